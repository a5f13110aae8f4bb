/* record.c - CSA, KIF and USI game records into checked games (record.h).
 *
 * Owns: the three readers, format and encoding detection, the Shift_JIS
 * subset table, the endings -> result/reason mapping. Does not own: the
 * rules (engine/), what happens to a game once read (the sink's).
 *
 * Every reader walks the input line by line with explicit lengths (the
 * input need not be NUL-terminated and may hold NUL bytes), keeps one game
 * open at a time, checks each move against the engine's position, and
 * hands finished games to the sink. A failing game is reported once and
 * the reader skips to the next game (CSA "/", the next USI line; KIF has one
 * game a file).
 */
#include "data/record.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/rules.h"

/* ==================================================================================== */
/* names                                                                                */
/* ==================================================================================== */
static const char *const FORMAT_NAMES[REC_FORMAT_NB] = {"auto", "csa", "kif", "usi"};

const char *rec_format_name(rec_format_t f) { return (unsigned)f < REC_FORMAT_NB ? FORMAT_NAMES[f] : "?"; }

int rec_format_parse(const char *name, rec_format_t *out) {
    if (!name) return -1;
    for (int i = 0; i < REC_FORMAT_NB; i++)
        if (strcmp(name, FORMAT_NAMES[i]) == 0) {
            *out = (rec_format_t)i;
            return 0;
        }
    return -1;
}

static const char *const ERROR_NAMES[REC_ERR_NB] = {
    "none",        "unreadable", "encoding", "format",   "bad position", "bad move syntax",
    "illegal move", "truncated", "too long", "unsupported", "out of memory",
};

const char *rec_error_name(rec_error_t e) { return (unsigned)e < REC_ERR_NB ? ERROR_NAMES[e] : "?"; }

/* ==================================================================================== */
/* small text helpers (explicit lengths everywhere)                                     */
/* ==================================================================================== */
static bool has_prefix(const char *s, size_t n, const char *lit) {
    size_t k = strlen(lit);
    return n >= k && memcmp(s, lit, k) == 0;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Trims ASCII blanks on both sides: *s, *n updated. */
static void trim(const char **s, size_t *n) {
    while (*n && is_blank(**s)) (*s)++, (*n)--;
    while (*n && is_blank((*s)[*n - 1])) (*n)--;
}

/* Text for a message: printable ASCII as is, UTF-8 as is when utf8, other
 * bytes as \xNN; at most ~40 input bytes, then "...". */
static void quote(char *out, size_t cap, const char *s, size_t n, bool utf8) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 12 < cap; i++) {
        uint8_t ch = (uint8_t)s[i];
        bool cont = (ch & 0xC0) == 0x80;
        if (i >= 40 && !(utf8 && cont)) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (ch >= 0x20 && ch < 0x7F) out[o++] = (char)ch;
        else if (utf8 && ch >= 0x80) out[o++] = (char)ch;
        else o += (size_t)snprintf(out + o, cap - o, "\\x%02X", ch);
    }
    out[o] = 0;
}

/* One line of the input: [s, s+n) without its "\r\n"; unterminated when the
 * input ends without a newline after it. */
typedef struct {
    const char *s;
    size_t n;
    int32_t no;
    bool unterminated;
} line_t;

static bool next_line(const char *text, size_t len, size_t *at, int32_t *lineno, line_t *ln) {
    if (*at >= len) return false;
    size_t b = *at, e = b;
    while (e < len && text[e] != '\n') e++;
    ln->s = text + b;
    ln->n = e - b;
    ln->no = ++*lineno;
    ln->unterminated = e >= len;
    *at = e < len ? e + 1 : len;
    if (ln->n && ln->s[ln->n - 1] == '\r') ln->n--;
    return true;
}

/* ---- UTF-8 ------------------------------------------------------------------------ */
/* Offset of the first byte that is not valid UTF-8 (overlongs, surrogates and
 * code points above U+10FFFF are invalid), or len. */
static size_t utf8_check(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) k = 1, cp = c & 0x1F, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) k = 2, cp = c & 0x0F, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) k = 3, cp = c & 0x07, min = 0x10000;
        else return i;
        if (len - i <= k) return i;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += k + 1;
    }
    return len;
}

/* The code point at s[*i], advancing *i; -1 at the end, 0xFFFD for a bad byte. */
static int32_t u8_get(const char *s, size_t n, size_t *i) {
    if (*i >= n) return -1;
    uint8_t c = (uint8_t)s[*i];
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    size_t k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (k == 0 || n - *i <= k) {
        (*i)++;
        return 0xFFFD;
    }
    uint32_t cp = c & (0x3F >> k);
    for (size_t j = 1; j <= k; j++) {
        uint8_t d = (uint8_t)s[*i + j];
        if ((d & 0xC0) != 0x80) {
            (*i)++;
            return 0xFFFD;
        }
        cp = (cp << 6) | (d & 0x3F);
    }
    *i += k + 1;
    return (int32_t)cp;
}

static int32_t u8_peek(const char *s, size_t n, size_t i) { return u8_get(s, n, &i); }

static size_t u8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* ---- Shift_JIS (CP932), the subset game records use ------------------------------- */
/* Double-byte codes -> code points for the characters KIF readers look at
 * (digits, numerals, pieces, endings, headers). Other double-byte characters
 * (names, comments) become U+FFFD: they never matter to a game. Sorted. */
static const uint16_t SJIS_TABLE[][2] = {
    {0x8140, 0x3000}, {0x8145, 0x30FB}, {0x8146, 0xFF1A}, {0x815E, 0xFF0F}, {0x8169, 0xFF08},
    {0x816A, 0xFF09}, {0x817B, 0xFF0B}, {0x8181, 0xFF1D}, {0x81A2, 0x25B3}, {0x81A3, 0x25B2},
    {0x824F, 0xFF10}, {0x8250, 0xFF11}, {0x8251, 0xFF12}, {0x8252, 0xFF13}, {0x8253, 0xFF14},
    {0x8254, 0xFF15}, {0x8255, 0xFF16}, {0x8256, 0xFF17}, {0x8257, 0xFF18}, {0x8258, 0xFF19},
    {0x82AF, 0x3051}, {0x82B5, 0x3057}, {0x82BB, 0x305D}, {0x82BF, 0x3061}, {0x82C5, 0x3067},
    {0x82C6, 0x3068}, {0x82C8, 0x306A}, {0x82CC, 0x306E}, {0x82DC, 0x307E}, {0x82DD, 0x307F},
    {0x82EA, 0x308C}, {0x8350, 0x30AF}, {0x8358, 0x30B9}, {0x835C, 0x30BD}, {0x8370, 0x30D1},
    {0x88C7, 0x674F}, {0x88EA, 0x4E00}, {0x8945, 0x53F3}, {0x89A4, 0x738B}, {0x89BA, 0x4E0B},
    {0x89BB, 0x5316}, {0x8A4A, 0x958B}, {0x8A70, 0x89D2}, {0x8A84, 0x5272}, {0x8AD4, 0x9593},
    {0x8AFB, 0x68CB}, {0x8B6C, 0x8A70}, {0x8BCA, 0x7389}, {0x8BE0, 0x91D1}, {0x8BE2, 0x9280},
    {0x8BE3, 0x4E5D}, {0x8BEE, 0x99D2}, {0x8C5C, 0x572D}, {0x8C5E, 0x578B}, {0x8C6A, 0x6842},
    {0x8CBE, 0x8A00}, {0x8CDC, 0x4E94}, {0x8CE3, 0x5F8C}, {0x8D6C, 0x8003}, {0x8D81, 0x9999},
    {0x8D87, 0x5408}, {0x8DB6, 0x5DE6}, {0x8E4F, 0x4E09}, {0x8E6C, 0x56DB}, {0x8E6E, 0x59CB},
    {0x8E77, 0x6307}, {0x8E9D, 0x6301}, {0x8E9E, 0x6642}, {0x8EB5, 0x4E03}, {0x8ED4, 0x8ECA},
    {0x8EE8, 0x624B}, {0x8F49, 0x7D42}, {0x8F5C, 0x5341}, {0x8F8A, 0x6240}, {0x8F9F, 0x52DD},
    {0x8FAB, 0x5C06}, {0x8FC1, 0x6D88}, {0x8FE3, 0x4E0A}, {0x8FEA, 0x5834}, {0x9094, 0x6570},
    {0x90AC, 0x6210}, {0x90D8, 0x5207}, {0x90E6, 0x5148}, {0x90E7, 0x5343}, {0x90E9, 0x5BA3},
    {0x90ED, 0x6226}, {0x9153, 0x5168}, {0x91A5, 0x5247}, {0x91BC, 0x4ED6}, {0x91C5, 0x6253},
    {0x9266, 0x65AD}, {0x9286, 0x4E2D}, {0x938A, 0x6295}, {0x93AF, 0x540C}, {0x93F1, 0x4E8C},
    {0x93FA, 0x65E5}, {0x93FC, 0x5165}, {0x946E, 0x99AC}, {0x94AA, 0x516B}, {0x94BD, 0x53CD},
    {0x94D4, 0x756A}, {0x94EF, 0x8CBB}, {0x94F2, 0x98DB}, {0x94F5, 0x5099}, {0x9573, 0x4E0D},
    {0x9589, 0x8CA0}, {0x95BD, 0x5E73}, {0x95CF, 0x5909}, {0x95E0, 0x6B69}, {0x9687, 0x679A},
    {0x978E, 0x843D}, {0x97B3, 0x7ADC}, {0x97B4, 0x9F8D}, {0x97B9, 0x4E86}, {0x985A, 0x516D},
};
enum { SJIS_TABLE_N = (int)(sizeof SJIS_TABLE / sizeof SJIS_TABLE[0]) };

static uint32_t sjis_lookup(uint16_t code) {
    int lo = 0, hi = SJIS_TABLE_N - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (SJIS_TABLE[mid][0] == code) return SJIS_TABLE[mid][1];
        if (SJIS_TABLE[mid][0] < code) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0xFFFD;
}

static bool sjis_lead(uint8_t c) { return (c >= 0x81 && c <= 0x9F) || (c >= 0xE0 && c <= 0xFC); }
static bool sjis_trail(uint8_t c) { return (c >= 0x40 && c <= 0x7E) || (c >= 0x80 && c <= 0xFC); }

/* Offset of the first byte that is not valid Shift_JIS, or len. */
static size_t sjis_check(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80 || (c >= 0xA1 && c <= 0xDF)) i++;
        else if (sjis_lead(c) && i + 1 < len && sjis_trail(s[i + 1])) i += 2;
        else return i;
    }
    return len;
}

/* Converts valid Shift_JIS to UTF-8 (malloc'ed, *out_len bytes); NULL when out of memory. */
static char *sjis_to_utf8(const uint8_t *s, size_t len, size_t *out_len) {
    if (len > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(3 * len + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) out[o++] = (char)c, i++;
        else if (c >= 0xA1 && c <= 0xDF) o += u8_put(out + o, 0xFF61u + (c - 0xA1u)), i++;
        else if (i + 1 < len) o += u8_put(out + o, sjis_lookup((uint16_t)(c << 8 | s[i + 1]))), i += 2;
        else o += u8_put(out + o, 0xFFFD), i++;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

/* ==================================================================================== */
/* the parser: one game open at a time                                                  */
/* ==================================================================================== */
/* How a record says its game ended (before the rules are asked). */
typedef enum {
    END_NONE,          /* no ending: the rules judge the last position */
    END_RESIGN,        /* side to move resigns */
    END_MATE,          /* side to move is mated (claimed) */
    END_REPETITION,    /* sennichite (or perpetual check, as the rules see it) */
    END_DECLARE,       /* side to move declares a win */
    END_IMPASSE,       /* jishogi / hikiwake: a draw */
    END_TIME,          /* side to move lost on time */
    END_ILLEGAL,       /* side to move loses by an illegal move */
    END_ILLEGAL_WIN,   /* side to move wins: the opponent's illegal move */
    END_ILLEGAL_BLACK, /* Black loses by an illegal action */
    END_ILLEGAL_WHITE, /* White loses by an illegal action */
    END_MAX_MOVES,     /* move limit: a draw */
    END_ABORT,         /* stopped, no result */
} end_t;

typedef struct {
    const char *name;
    const rec_sink_t *sink;
    const char *text; /* the input, decoded (KIF from Shift_JIS) */
    size_t len;
    bool utf8;        /* the text is UTF-8: messages may quote it as is */
    pos_t *pos;
    rec_game_t g;
    move_t moves[REC_MOVES_MAX];
    int32_t games;     /* games begun: the open one's index */
    int64_t delivered; /* games handed to the sink */
    int64_t rejected;  /* rejects reported */
    bool in_game;      /* a game is open */
    bool failed;       /* the open game was rejected: skip to its end */
    bool started;      /* the open game's start position is set */
    bool ended;        /* the open game's ending was read */
    end_t end;
    int stop;          /* 1: the sink said stop; -1: out of memory */
} parser_t;

/* Reports a reject: of the open game (game > 0, which is then skipped) or of
 * the whole input. move/line 0 = not shown. */
static void p_reject(parser_t *p, bool whole_file, int32_t move, int32_t line, rec_error_t code, const char *fmt,
                     ...) {
    rec_reject_t r;
    memset(&r, 0, sizeof r);
    r.game = whole_file ? 0 : p->games;
    r.move = move;
    r.line = line;
    r.code = code;
    char where[96] = "";
    size_t w = 0;
    if (r.game > 0) w += (size_t)snprintf(where + w, sizeof where - w, "game %d: ", (int)r.game);
    if (move > 0 && line > 0) snprintf(where + w, sizeof where - w, "move %d (line %d): ", (int)move, (int)line);
    else if (move > 0) snprintf(where + w, sizeof where - w, "move %d: ", (int)move);
    else if (line > 0) snprintf(where + w, sizeof where - w, "line %d: ", (int)line);
    int k = snprintf(r.msg, sizeof r.msg, "%.300s: %s", p->name, where);
    if (k > 0 && (size_t)k < sizeof r.msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r.msg + k, sizeof r.msg - (size_t)k, fmt, ap);
        va_end(ap);
    }
    if (!whole_file && p->in_game) p->failed = true;
    p->rejected++;
    if (p->sink && p->sink->reject) p->sink->reject(p->sink->user, &r);
}

static void game_begin(parser_t *p, int32_t line) {
    p->games++;
    p->in_game = true;
    p->failed = p->started = p->ended = false;
    p->end = END_NONE;
    memset(&p->g, 0, sizeof p->g);
    p->g.index = p->games;
    p->g.line = line;
    strcpy(p->g.start_sfen, "startpos");
    p->g.rating[0] = p->g.rating[1] = NAN;
    p->g.moves = p->moves;
}

/* Forgets the open game: it held nothing that makes a game. */
static void game_drop(parser_t *p) {
    if (!p->in_game) return;
    p->in_game = false;
    p->games--;
}

/* Sets the open game's start position from SFEN text (or "startpos"). */
static bool game_start(parser_t *p, const char *sfen, size_t n, int32_t line) {
    char err[256];
    if (sfen_parse(p->pos, sfen, n, err, sizeof err) != SFEN_OK) {
        char q[256];
        quote(q, sizeof q, sfen, n, p->utf8);
        p_reject(p, false, 0, line, REC_ERR_POSITION, "bad position '%s': %s", q, err);
        return false;
    }
    char buf[SFEN_MAX_LEN];
    sfen_write(p->pos, buf, sizeof buf);
    if (strcmp(buf, SFEN_STARTPOS) == 0) strcpy(p->g.start_sfen, "startpos");
    else memcpy(p->g.start_sfen, buf, sizeof buf);
    p->started = true;
    return true;
}

/* Plays a legal move in the open game. */
static bool game_play(parser_t *p, move_t m, int32_t line) {
    if (p->g.n_moves >= REC_MOVES_MAX) {
        p_reject(p, false, p->g.n_moves + 1, line, REC_ERR_TOO_LONG, "more than %d moves", REC_MOVES_MAX);
        return false;
    }
    pos_do_move(p->pos, m);
    p->moves[p->g.n_moves++] = m;
    return true;
}

static void game_set_end(parser_t *p, end_t e) {
    p->ended = true;
    p->end = e;
}

/* Closes the open game: works out its result and hands it to the sink. */
static void game_end(parser_t *p) {
    if (!p->in_game) return;
    p->in_game = false;
    if (p->failed || p->stop) return;
    KOMA_ASSERT(p->started);
    const pos_t *pos = p->pos;
    color_t stm = pos_side_to_move(pos);
    color_t winner = COLOR_NB;
    db_reason_t reason = DB_REASON_ABORT;
    switch (p->end) {
    case END_NONE: {
        rules_status_t st = rules_status(pos, 0);
        if (st.end == RULES_END_CHECKMATE) reason = DB_REASON_CHECKMATE, winner = color_flip(stm);
        else if (st.end == RULES_END_SENNICHITE) reason = DB_REASON_SENNICHITE;
        else if (st.end == RULES_END_PERPETUAL_CHECK) reason = DB_REASON_PERPETUAL_CHECK, winner = st.winner;
        break;
    }
    case END_RESIGN: reason = DB_REASON_RESIGN, winner = color_flip(stm); break;
    case END_MATE:
        reason = rules_has_legal_move(pos) ? DB_REASON_RESIGN : DB_REASON_CHECKMATE;
        winner = color_flip(stm);
        break;
    case END_REPETITION: {
        rules_rep_t r = rules_repetition(pos, NULL);
        if (r == RULES_REP_LOSS) reason = DB_REASON_PERPETUAL_CHECK, winner = color_flip(stm);
        else if (r == RULES_REP_WIN) reason = DB_REASON_PERPETUAL_CHECK, winner = stm;
        else reason = DB_REASON_SENNICHITE;
        break;
    }
    case END_DECLARE: reason = DB_REASON_DECLARATION, winner = stm; break;
    case END_IMPASSE: reason = DB_REASON_DECLARATION; break;
    case END_TIME: reason = DB_REASON_TIME, winner = color_flip(stm); break;
    case END_ILLEGAL: reason = DB_REASON_ILLEGAL_MOVE, winner = color_flip(stm); break;
    case END_ILLEGAL_WIN: reason = DB_REASON_ILLEGAL_MOVE, winner = stm; break;
    case END_ILLEGAL_BLACK: reason = DB_REASON_ILLEGAL_MOVE, winner = COLOR_WHITE; break;
    case END_ILLEGAL_WHITE: reason = DB_REASON_ILLEGAL_MOVE, winner = COLOR_BLACK; break;
    case END_MAX_MOVES: reason = DB_REASON_MAX_PLY; break;
    case END_ABORT: reason = DB_REASON_ABORT; break;
    }
    p->g.reason = reason;
    p->g.result = winner == COLOR_BLACK ? DB_RESULT_BLACK_WIN : winner == COLOR_WHITE ? DB_RESULT_WHITE_WIN : DB_RESULT_DRAW;
    p->g.moves = p->moves;
    p->delivered++;
    if (p->sink && p->sink->game && p->sink->game(p->sink->user, &p->g) != 0) p->stop = 1;
}

/* ---- boards built by CSA/KIF position statements --------------------------------- */
typedef struct {
    uint8_t board[SQ_NB];             /* Piece codes */
    int32_t hand[COLOR_NB][PT_HAND_NB]; /* counts, <= 99 */
    int32_t side;                     /* COLOR_BLACK/WHITE, -1 = not given */
} setup_t;

static void setup_startpos(setup_t *b, pos_t *scratch) {
    pos_set_startpos(scratch);
    memcpy(b->board, scratch->board, sizeof b->board);
    memset(b->hand, 0, sizeof b->hand);
}

/* SFEN text of a setup (validated later by sfen_parse). Returns its length. */
static size_t setup_sfen(const setup_t *b, char *out, size_t cap) {
    static const char LETTER[PT_KING + 1] = {'?', 'P', 'L', 'N', 'S', 'B', 'R', 'G', 'K'};
    static const piece_type_t HAND_ORDER[7] = {PT_ROOK, PT_BISHOP, PT_GOLD, PT_SILVER, PT_KNIGHT, PT_LANCE, PT_PAWN};
    char buf[SFEN_MAX_LEN * 2];
    size_t n = 0;
    for (int32_t r = 0; r < RANK_NB; r++) {
        int empty = 0;
        for (int32_t f = FILE_NB - 1; f >= 0; f--) {
            piece_t pc = b->board[sq_make(f, r)];
            if (pc == PIECE_NONE) {
                empty++;
                continue;
            }
            if (empty) buf[n++] = (char)('0' + empty), empty = 0;
            piece_type_t pt = piece_type(pc);
            if (pt_is_promoted(pt)) buf[n++] = '+', pt = pt_demote(pt);
            char ch = (pt >= PT_PAWN && pt <= PT_KING) ? LETTER[pt] : '?';
            if (piece_color(pc) == COLOR_WHITE && ch != '?') ch = (char)(ch - 'A' + 'a');
            buf[n++] = ch;
        }
        if (empty) buf[n++] = (char)('0' + empty);
        if (r < RANK_NB - 1) buf[n++] = '/';
    }
    buf[n++] = ' ';
    buf[n++] = b->side == COLOR_WHITE ? 'w' : 'b';
    buf[n++] = ' ';
    size_t hands_at = n;
    for (color_t c = COLOR_BLACK; c < COLOR_NB; c++)
        for (int i = 0; i < 7; i++) {
            int32_t k = b->hand[c][HAND_ORDER[i]];
            if (k <= 0) continue;
            if (k > 1) n += (size_t)snprintf(buf + n, sizeof buf - n, "%d", (int)(k > 99 ? 99 : k));
            char ch = LETTER[HAND_ORDER[i]];
            buf[n++] = c == COLOR_WHITE ? (char)(ch - 'A' + 'a') : ch;
        }
    if (n == hands_at) buf[n++] = '-';
    memcpy(buf + n, " 1", 3);
    n += 2;
    if (n >= cap) n = cap - 1;
    memcpy(out, buf, n);
    out[n] = 0;
    return n;
}

/* ==================================================================================== */
/* CSA                                                                                  */
/* ==================================================================================== */
static const char CSA_PIECES[PT_NB][3] = {"", "FU", "KY", "KE", "GI", "KA", "HI", "KI",
                                          "OU", "TO", "NY", "NK", "NG", "UM", "RY"};

static piece_type_t csa_piece(const char *s) {
    for (piece_type_t pt = PT_PAWN; pt < PT_NB; pt++)
        if (s[0] == CSA_PIECES[pt][0] && s[1] == CSA_PIECES[pt][1]) return pt;
    return PT_NONE;
}

/* "77" -> square; -1 unless both digits are 1..9. */
static sq_t csa_square(char f, char r) {
    if (f < '1' || f > '9' || r < '1' || r > '9') return -1;
    return sq_make(f - '1', r - '1');
}

typedef struct {
    setup_t b;
    int mode;        /* 0: no board statement, 1: PI, 2: P1..P9 rows, 3: P+/P- on an empty board */
    uint16_t rows;   /* P1..P9 rows read (bit r-1) */
    int32_t al;      /* the colour of a 00AL, -1 none */
    bool content;    /* a statement that makes a game (board, side, move, ending) */
    bool pending;    /* an illegal move waits for a %ILLEGAL_MOVE that would explain it */
    int32_t pend_move, pend_line;
    char pend_msg[REC_MSG_MAX - 128];
} csa_t;

static void csa_reset(csa_t *c) {
    memset(c, 0, sizeof *c);
    c->b.side = -1;
    c->al = -1;
}

static void csa_reject_pending(parser_t *p, csa_t *c) {
    c->pending = false;
    p_reject(p, false, c->pend_move, c->pend_line, REC_ERR_ILLEGAL, "%s", c->pend_msg);
}

/* Fixes the open game's start position from its board statements. */
static bool csa_start(parser_t *p, csa_t *c, int32_t line, bool at_eof) {
    if (p->started) return true;
    if (c->mode == 2 && c->rows != 0x1FF) {
        int got = 0;
        for (int r = 0; r < 9; r++) got += (c->rows >> r) & 1;
        if (at_eof) p_reject(p, false, 0, line, REC_ERR_TRUNCATED, "the input ends inside the board (%d of 9 rows)", got);
        else p_reject(p, false, 0, line, REC_ERR_POSITION, "the board has %d of its 9 rows P1..P9", got);
        return false;
    }
    if (c->mode == 0) setup_startpos(&c->b, p->pos);
    if (c->al >= 0) { /* 00AL: every piece not on the board or in a hand */
        int32_t used[PT_HAND_NB] = {0};
        for (sq_t sq = 0; sq < SQ_NB; sq++) {
            piece_type_t pt = pt_demote(piece_type(c->b.board[sq]));
            if (pt >= PT_PAWN && pt <= PT_GOLD) used[pt]++;
        }
        for (piece_type_t pt = PT_PAWN; pt <= PT_GOLD; pt++) {
            int32_t left = PIECE_TOTAL[pt] - used[pt] - c->b.hand[0][pt] - c->b.hand[1][pt];
            if (left > 0) c->b.hand[c->al][pt] += left;
        }
    }
    char sfen[SFEN_MAX_LEN];
    size_t n = setup_sfen(&c->b, sfen, sizeof sfen);
    return game_start(p, sfen, n, line);
}

/* P1..P9, PI, P+, P- */
static void csa_board(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    char q[256];
    quote(q, sizeof q, s, n, false);
    rec_error_t bad = at_eof ? REC_ERR_TRUNCATED : REC_ERR_POSITION;
    if (n < 2) {
        p_reject(p, false, 0, line, bad, "bad board line '%s'", q);
        return;
    }
    char k = s[1];
    if (k >= '1' && k <= '9') { /* one row, files 9..1 */
        int r = k - '1';
        if (c->mode != 0 && c->mode != 2) {
            p_reject(p, false, 0, line, REC_ERR_POSITION, "board row '%s' after another kind of board statement", q);
            return;
        }
        if (c->rows & (1u << r)) {
            p_reject(p, false, 0, line, REC_ERR_POSITION, "board row P%c given twice", k);
            return;
        }
        char cells[27];
        size_t m = n - 2;
        if (m > 27) {
            for (size_t i = 29; i < n; i++)
                if (!is_blank(s[i])) {
                    p_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': more than 9 squares", q);
                    return;
                }
            m = 27;
        }
        memset(cells, ' ', sizeof cells);
        memcpy(cells, s + 2, m);
        if (c->mode == 0) memset(c->b.board, 0, sizeof c->b.board);
        c->mode = 2;
        for (int i = 0; i < 9; i++) {
            const char *cell = cells + 3 * i;
            sq_t sq = sq_make(8 - i, r);
            if (cell[0] == ' ' && cell[1] == '*' && cell[2] == ' ') {
                c->b.board[sq] = PIECE_NONE;
                continue;
            }
            piece_type_t pt = (cell[0] == '+' || cell[0] == '-') ? csa_piece(cell + 1) : PT_NONE;
            if (pt == PT_NONE) {
                /* a row cut short by the end of the input reads as blanks */
                p_reject(p, false, 0, line, (at_eof && 3 * (size_t)i + 3 > m) ? REC_ERR_TRUNCATED : REC_ERR_POSITION,
                         "bad board line '%s': square %d%d is not ' * ' or a piece", q, 9 - i, r + 1);
                return;
            }
            c->b.board[sq] = (uint8_t)piece_make(cell[0] == '-' ? COLOR_WHITE : COLOR_BLACK, pt);
        }
        c->rows |= (uint16_t)(1u << r);
        return;
    }
    if (k != 'I' && k != '+' && k != '-') {
        p_reject(p, false, 0, line, bad, "bad board line '%s'", q);
        return;
    }
    if (k == 'I') {
        if (c->mode != 0) {
            p_reject(p, false, 0, line, REC_ERR_POSITION, "PI after another board statement");
            return;
        }
        setup_startpos(&c->b, p->pos);
        c->mode = 1;
    } else if (c->mode == 0 && n > 2) { /* pieces on an empty board ("P+" alone says nothing) */
        memset(c->b.board, 0, sizeof c->b.board);
        c->mode = 3;
    }
    if ((n - 2) % 4 != 0) {
        p_reject(p, false, 0, line, bad, "bad board line '%s': pieces come as 4 characters (square, piece)", q);
        return;
    }
    color_t col = k == '-' ? COLOR_WHITE : COLOR_BLACK;
    for (size_t i = 2; i + 4 <= n; i += 4) {
        const char *g = s + i;
        bool hand = g[0] == '0' && g[1] == '0';
        sq_t sq = csa_square(g[0], g[1]);
        if (k != 'I' && hand && g[2] == 'A' && g[3] == 'L') {
            c->al = col;
            continue;
        }
        piece_type_t pt = csa_piece(g + 2);
        if (pt == PT_NONE || (!hand && sq < 0) || (k == 'I' && hand)) {
            p_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': '%.4s' is no square and piece", q, g);
            return;
        }
        if (k == 'I') {
            if (piece_type(c->b.board[sq]) != pt) {
                p_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': PI removes a %s from %.2s, which is not there",
                         q, CSA_PIECES[pt], g);
                return;
            }
            c->b.board[sq] = PIECE_NONE;
        } else if (hand) {
            if (pt < PT_PAWN || pt > PT_GOLD) {
                p_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': a %s cannot be in hand", q, CSA_PIECES[pt]);
                return;
            }
            if (c->b.hand[col][pt] >= 99) {
                p_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': too many pieces in hand", q);
                return;
            }
            c->b.hand[col][pt]++;
        } else {
            if (c->b.board[sq] != PIECE_NONE) {
                p_reject(p, false, 0, line, REC_ERR_POSITION, "bad board line '%s': square %.2s is taken", q, g);
                return;
            }
            c->b.board[sq] = (uint8_t)piece_make(col, pt);
        }
    }
}

/* +7776FU */
static void csa_move(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    char q[256];
    quote(q, sizeof q, s, n, false);
    int32_t no = p->g.n_moves + 1;
    if (p->ended) {
        p_reject(p, false, no, line, REC_ERR_SYNTAX, "move '%s' after the game's ending", q);
        return;
    }
    if (!csa_start(p, c, line, false)) return;
    piece_type_t after = n == 7 ? csa_piece(s + 5) : PT_NONE;
    bool drop = n == 7 && s[1] == '0' && s[2] == '0';
    sq_t from = n == 7 ? csa_square(s[1], s[2]) : -1, to = n == 7 ? csa_square(s[3], s[4]) : -1;
    if (n != 7 || after == PT_NONE || to < 0 || (!drop && from < 0)) {
        p_reject(p, false, no, line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                 at_eof ? "the input ends inside move '%s'" : "bad move syntax '%s' (a move is like +7776FU)", q);
        return;
    }
    const pos_t *pos = p->pos;
    color_t stm = pos_side_to_move(pos), mover = s[0] == '-' ? COLOR_WHITE : COLOR_BLACK;
    char why[160] = "";
    move_t m = MOVE_NONE;
    if (mover != stm) {
        snprintf(why, sizeof why, "it is %s's move", stm == COLOR_BLACK ? "Black" : "White");
    } else if (drop) {
        if (after > PT_GOLD) snprintf(why, sizeof why, "a %s cannot be dropped", CSA_PIECES[after]);
        else if (pos_hand_count(pos, stm, after) == 0) snprintf(why, sizeof why, "no %s in hand", CSA_PIECES[after]);
        else m = move_make_drop(after, to);
    } else {
        piece_t pc = pos_piece_on(pos, from);
        piece_type_t before = piece_type(pc);
        if (pc == PIECE_NONE || piece_color(pc) != stm) snprintf(why, sizeof why, "no piece of the side to move on %.2s", s + 1);
        else if (after == before) m = move_make(from, to, false);
        else if (pt_can_promote(before) && after == pt_promote(before)) m = move_make(from, to, true);
        else snprintf(why, sizeof why, "the %s on %.2s cannot become a %s", CSA_PIECES[before], s + 1, CSA_PIECES[after]);
    }
    if (m != MOVE_NONE && !pos_is_valid_move(pos, m)) {
        snprintf(why, sizeof why, "not a legal move here");
        m = MOVE_NONE;
    }
    if (m == MOVE_NONE) { /* rejected unless %ILLEGAL_MOVE follows */
        c->pending = true;
        c->pend_move = no;
        c->pend_line = line;
        snprintf(c->pend_msg, sizeof c->pend_msg, "illegal move '%s': %s", q, why);
        return;
    }
    game_play(p, m, line);
}

static void csa_ending(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    static const struct {
        const char *name;
        end_t end;
    } ENDS[] = {
        {"TORYO", END_RESIGN},      {"CHUDAN", END_ABORT},     {"SENNICHITE", END_REPETITION},
        {"TIME_UP", END_TIME},      {"ILLEGAL_MOVE", END_ILLEGAL}, {"+ILLEGAL_ACTION", END_ILLEGAL_BLACK},
        {"-ILLEGAL_ACTION", END_ILLEGAL_WHITE}, {"JISHOGI", END_IMPASSE}, {"KACHI", END_DECLARE},
        {"HIKIWAKE", END_IMPASSE},  {"MAX_MOVES", END_MAX_MOVES}, {"TSUMI", END_MATE},
        {"FUZUMI", END_ABORT},      {"MATTA", END_ABORT},      {"ERROR", END_ABORT},
    };
    int found = -1;
    for (int i = 0; i < (int)(sizeof ENDS / sizeof ENDS[0]); i++)
        if (n - 1 == strlen(ENDS[i].name) && memcmp(s + 1, ENDS[i].name, n - 1) == 0) found = i;
    if (c->pending) {
        if (found >= 0 && (ENDS[found].end == END_ILLEGAL || ENDS[found].end == END_ILLEGAL_BLACK ||
                           ENDS[found].end == END_ILLEGAL_WHITE)) {
            c->pending = false; /* the record keeps the game up to the illegal move */
            game_set_end(p, ENDS[found].end);
        } else {
            csa_reject_pending(p, c);
        }
        return;
    }
    if (p->ended) return; /* the first ending counts */
    if (!csa_start(p, c, line, false)) return;
    if (found < 0) {
        char q[256];
        quote(q, sizeof q, s, n, false);
        p_reject(p, false, p->g.n_moves + 1, line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                 at_eof ? "the input ends inside '%s'" : "unknown ending '%s'", q);
        return;
    }
    game_set_end(p, ENDS[found].end);
}

/* 'black_rate:NAME:1234.5 (floodgate) */
static void csa_comment(parser_t *p, const char *s, size_t n) {
    int c = has_prefix(s, n, "'black_rate:") ? 0 : has_prefix(s, n, "'white_rate:") ? 1 : -1;
    if (c < 0) return;
    size_t k = n;
    while (k > 0 && s[k - 1] != ':') k--;
    char buf[64];
    size_t m = n - k;
    if (m == 0 || m >= sizeof buf) return;
    memcpy(buf, s + k, m);
    buf[m] = 0;
    char *end = NULL;
    double v = strtod(buf, &end);
    if (end == buf + m && isfinite(v)) p->g.rating[c] = v;
}

static void copy_name(char *dst, const char *s, size_t n) {
    size_t m = 0;
    for (size_t i = 0; i < n && m + 1 < REC_NAME_MAX; i++)
        if ((uint8_t)s[i] >= 0x20 && s[i] != 0x7F) dst[m++] = s[i];
    /* do not end inside a UTF-8 sequence */
    while (m > 0 && ((uint8_t)dst[m - 1] & 0x80)) {
        size_t b = m;
        while (b > 0 && ((uint8_t)dst[b - 1] & 0xC0) == 0x80) b--;
        if (b == 0) {
            m = 0;
            break;
        }
        uint8_t lead = (uint8_t)dst[b - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (m - (b - 1) >= want) break;
        m = b - 1;
    }
    dst[m] = 0;
}

static void csa_statement(parser_t *p, csa_t *c, const char *s, size_t n, int32_t line, bool at_eof) {
    char k = s[0];
    if (k == 'T') return; /* time of the last move */
    if (c->pending && k != '%') {
        csa_reject_pending(p, c);
        return;
    }
    c->content = true;
    if (k == 'P') {
        if (p->started) p_reject(p, false, p->g.n_moves + 1, line, REC_ERR_POSITION, "board statement after the game started");
        else csa_board(p, c, s, n, line, at_eof);
        return;
    }
    if ((k == '+' || k == '-') && n == 1) {
        if (p->started) p_reject(p, false, p->g.n_moves + 1, line, REC_ERR_POSITION, "side to move given after the game started");
        else c->b.side = k == '-' ? COLOR_WHITE : COLOR_BLACK;
        return;
    }
    if (k == '+' || k == '-') {
        csa_move(p, c, s, n, line, at_eof);
        return;
    }
    if (k == '%') {
        csa_ending(p, c, s, n, line, at_eof);
        return;
    }
    char q[256];
    quote(q, sizeof q, s, n, false);
    p_reject(p, false, p->started ? p->g.n_moves + 1 : 0, line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
             "unknown statement '%s'", q);
}

/* Closes a CSA game at "/" or at the end of the input. */
static void csa_game_end(parser_t *p, csa_t *c, int32_t line, bool at_eof) {
    if (!p->in_game) return;
    if (!p->failed) {
        if (c->pending) csa_reject_pending(p, c);
        else if (!c->content) {
            game_drop(p); /* comments and names only */
            return;
        } else
            csa_start(p, c, line, at_eof);
    }
    game_end(p);
}

static void csa_read(parser_t *p) {
    csa_t *c = malloc(sizeof *c);
    if (!c) {
        p->stop = -1;
        return;
    }
    csa_reset(c);
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    while (!p->stop && next_line(p->text, p->len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        trim(&s, &n);
        if (n == 0) continue;
        if (n == 1 && s[0] == '/') {
            csa_game_end(p, c, ln.no, false);
            continue;
        }
        if (!p->in_game) {
            game_begin(p, ln.no);
            csa_reset(c);
        }
        if (p->failed) continue;
        if (s[0] == '\'') {
            csa_comment(p, s, n);
            continue;
        }
        if (s[0] == 'N' && n >= 2 && (s[1] == '+' || s[1] == '-')) {
            copy_name(s[1] == '+' ? p->g.black : p->g.white, s + 2, n - 2);
            continue;
        }
        if (s[0] == '$' || s[0] == 'V') continue; /* game information, version */
        size_t b = 0;
        while (b < n && !p->failed && !p->stop) {
            size_t e = b;
            while (e < n && s[e] != ',') e++;
            const char *t = s + b;
            size_t tn = e - b;
            trim(&t, &tn);
            if (tn && t[0] == '\'') break; /* a comment ends the line */
            if (tn) csa_statement(p, c, t, tn, ln.no, ln.unterminated && e >= n);
            b = e + 1;
        }
    }
    if (!p->stop) csa_game_end(p, c, lineno, true);
    free(c);
}

/* ==================================================================================== */
/* KIF                                                                                  */
/* ==================================================================================== */
enum {
    CP_SPACE = 0x3000, CP_DOT = 0x30FB, CP_COLON = 0xFF1A, CP_NARI = 0x6210, CP_FU_NEG = 0x4E0D,
    CP_UCHI = 0x6253, CP_DOU = 0x540C, CP_JU = 0x5341,
};

static const struct {
    int32_t cp;
    piece_type_t pt;
} KIF_PIECES[] = {
    {0x6B69, PT_PAWN},       {0x9999, PT_LANCE},  {0x6842, PT_KNIGHT}, {0x9280, PT_SILVER},
    {0x91D1, PT_GOLD},       {0x89D2, PT_BISHOP}, {0x98DB, PT_ROOK},   {0x7389, PT_KING},
    {0x738B, PT_KING},       {0x3068, PT_PRO_PAWN}, {0x674F, PT_PRO_LANCE}, {0x572D, PT_PRO_KNIGHT},
    {0x5168, PT_PRO_SILVER}, {0x99AC, PT_HORSE},  {0x9F8D, PT_DRAGON}, {0x7ADC, PT_DRAGON},
};

static piece_type_t kif_piece(int32_t cp) {
    for (size_t i = 0; i < sizeof KIF_PIECES / sizeof KIF_PIECES[0]; i++)
        if (KIF_PIECES[i].cp == cp) return KIF_PIECES[i].pt;
    return PT_NONE;
}

/* 一..九 -> 1..9, else 0. */
static int kanji_digit(int32_t cp) {
    static const int32_t K[9] = {0x4E00, 0x4E8C, 0x4E09, 0x56DB, 0x4E94, 0x516D, 0x4E03, 0x516B, 0x4E5D};
    for (int i = 0; i < 9; i++)
        if (K[i] == cp) return i + 1;
    return 0;
}

/* １..９ (full width) or 1..9 -> 1..9, else 0. */
static int wide_digit(int32_t cp) {
    if (cp >= 0xFF11 && cp <= 0xFF19) return cp - 0xFF10;
    if (cp >= '1' && cp <= '9') return cp - '0';
    return 0;
}

static bool kif_space(int32_t cp) { return cp == ' ' || cp == '\t' || cp == CP_SPACE; }

static void kif_skip_space(const char *s, size_t n, size_t *i) {
    while (*i < n && kif_space(u8_peek(s, n, *i))) u8_get(s, n, i);
}

/* Trims ASCII blanks and U+3000 on both sides. */
static void kif_trim(const char **s, size_t *n) {
    size_t i = 0;
    kif_skip_space(*s, *n, &i);
    *s += i;
    *n -= i;
    for (;;) {
        if (*n && is_blank((*s)[*n - 1])) (*n)--;
        else if (*n >= 3 && memcmp(*s + *n - 3, "\xE3\x80\x80", 3) == 0) *n -= 3;
        else break;
    }
}

static bool str_eq(const char *s, size_t n, const char *lit) { return n == strlen(lit) && memcmp(s, lit, n) == 0; }

typedef struct {
    const char *name;
    const char *sfen;
} handicap_t;

/* Handicaps: White (the stronger player) moves first. */
static const handicap_t HANDICAPS[] = {
    {"平手", "startpos"},
    {"香落ち", "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"右香落ち", "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"角落ち", "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"飛車落ち", "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"飛香落ち", "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"二枚落ち", "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"三枚落ち", "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"四枚落ち", "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"六枚落ち", "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"八枚落ち", "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
    {"十枚落ち", "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"},
};

typedef struct {
    setup_t b;
    int32_t board_rows;   /* rows of a board diagram read */
    int32_t board_line;   /* line of its first row */
    const char *handicap; /* SFEN of 手合割; NULL = none given */
    char handicap_bad[96]; /* a 手合割 value not in the table, "" if none */
    int32_t handicap_line;
    bool content;         /* a 手合割, a board or a move: this is a game */
    int32_t next_no;      /* the number the next move line must carry; 0 = the first is free */
} kif_t;

/* Hands: "なし" or "歩二　香　角" (count in kanji, 十八 at most). */
static bool kif_hand(setup_t *b, color_t c, const char *s, size_t n) {
    kif_trim(&s, &n);
    if (str_eq(s, n, "なし") || n == 0) return true;
    size_t i = 0;
    while (i < n) {
        kif_skip_space(s, n, &i);
        if (i >= n) break;
        piece_type_t pt = kif_piece(u8_get(s, n, &i));
        if (pt < PT_PAWN || pt > PT_GOLD) return false;
        int count = 1;
        int32_t cp = u8_peek(s, n, i);
        if (cp == CP_JU) {
            u8_get(s, n, &i);
            count = 10;
            int d = kanji_digit(u8_peek(s, n, i));
            if (d) u8_get(s, n, &i), count += d;
        } else if (kanji_digit(cp)) {
            count = kanji_digit(u8_get(s, n, &i));
        }
        b->hand[c][pt] += count;
        if (b->hand[c][pt] > 99) return false;
    }
    return true;
}

/* "|v香v桂v銀v金v玉v金v銀v桂v香|一" */
static bool kif_board_row(kif_t *k, const char *s, size_t n) {
    if (k->board_rows >= RANK_NB) return false;
    size_t i = 1; /* past '|' */
    int32_t r = k->board_rows;
    for (int f = 8; f >= 0; f--) {
        if (i >= n) return false;
        char pre = s[i++];
        if (pre != ' ' && pre != 'v' && pre != 'V') return false;
        int32_t cp = u8_get(s, n, &i);
        sq_t sq = sq_make(f, r);
        if (cp == CP_DOT) {
            k->b.board[sq] = PIECE_NONE;
            continue;
        }
        piece_type_t pt = kif_piece(cp);
        if (pt == PT_NONE) return false;
        k->b.board[sq] = (uint8_t)piece_make(pre == ' ' ? COLOR_BLACK : COLOR_WHITE, pt);
    }
    if (i >= n || s[i] != '|') return false;
    i++;
    if (i < n) { /* the rank numeral, when written, must be this row's */
        int d = kanji_digit(u8_peek(s, n, i));
        if (d && d != r + 1) return false;
    }
    k->board_rows++;
    return true;
}

static bool kif_start(parser_t *p, kif_t *k, int32_t line, bool at_eof) {
    if (p->started) return true;
    if (k->board_rows > 0) {
        if (k->board_rows != RANK_NB) {
            p_reject(p, false, 0, k->board_line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_POSITION,
                     "the board diagram has %d of its 9 rows", (int)k->board_rows);
            return false;
        }
        if (k->b.side < 0) k->b.side = COLOR_BLACK;
        char sfen[SFEN_MAX_LEN];
        size_t n = setup_sfen(&k->b, sfen, sizeof sfen);
        return game_start(p, sfen, n, k->board_line);
    }
    if (k->handicap_bad[0]) {
        p_reject(p, false, 0, k->handicap_line, REC_ERR_UNSUPPORTED,
                 "handicap '%s' is not supported (give a board diagram)", k->handicap_bad);
        return false;
    }
    const char *sfen = k->handicap ? k->handicap : "startpos";
    return game_start(p, sfen, strlen(sfen), line);
}

static const struct {
    const char *word;
    end_t end;
} KIF_ENDS[] = {
    {"投了", END_RESIGN},      {"詰み", END_MATE},         {"千日手", END_REPETITION}, {"持将棋", END_IMPASSE},
    {"入玉勝ち", END_DECLARE}, {"宣言勝ち", END_DECLARE},  {"中断", END_ABORT},        {"切れ負け", END_TIME},
    {"時間切れ", END_TIME},    {"反則負け", END_ILLEGAL},  {"反則勝ち", END_ILLEGAL_WIN}, {"不詰", END_ABORT},
};

/* "   1 ７六歩(77)   ( 0:01/00:00:01)" */
static void kif_move(parser_t *p, kif_t *k, const char *s, size_t n, int32_t line, bool at_eof) {
    char q[256];
    quote(q, sizeof q, s, n, true);
    size_t i = 0;
    int64_t num = 0;
    while (i < n && is_digit(s[i]) && num < 100000000) num = num * 10 + (s[i++] - '0');
    int32_t no = p->g.n_moves + 1;
    rec_error_t syn = at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX;
    if (i < n && is_digit(s[i])) {
        p_reject(p, false, no, line, REC_ERR_SYNTAX, "bad move number in '%s'", q);
        return;
    }
    if (k->next_no && num != k->next_no) {
        p_reject(p, false, no, line, REC_ERR_SYNTAX, "move number %lld where %d was expected: '%s'", (long long)num,
                 (int)k->next_no, q);
        return;
    }
    k->next_no = (int32_t)num + 1;
    k->content = true;
    if (!kif_start(p, k, line, false)) return;
    if (i >= n || !kif_space(u8_peek(s, n, i))) {
        p_reject(p, false, no, line, syn, "bad move syntax '%s'", q);
        return;
    }
    kif_skip_space(s, n, &i);
    int32_t cp = u8_peek(s, n, i);
    if (cp == 0x25B2 || cp == 0x25B3 || cp == 0x2617 || cp == 0x2616) u8_get(s, n, &i); /* ▲△☗☖ */
    for (size_t e = 0; e < sizeof KIF_ENDS / sizeof KIF_ENDS[0]; e++)
        if (has_prefix(s + i, n - i, KIF_ENDS[e].word)) {
            if (!p->ended) game_set_end(p, KIF_ENDS[e].end);
            return;
        }
    if (p->ended) {
        p_reject(p, false, no, line, REC_ERR_SYNTAX, "move '%s' after the game's ending", q);
        return;
    }
    if (has_prefix(s + i, n - i, "パス")) {
        p_reject(p, false, no, line, REC_ERR_UNSUPPORTED, "a pass is not supported: '%s'", q);
        return;
    }
    /* destination */
    sq_t to;
    cp = u8_get(s, n, &i);
    if (cp == CP_DOU) {
        if (p->g.n_moves == 0) {
            p_reject(p, false, no, line, REC_ERR_SYNTAX, "'同' on the first move: '%s'", q);
            return;
        }
        to = move_to(p->moves[p->g.n_moves - 1]);
        kif_skip_space(s, n, &i);
    } else {
        int f = wide_digit(cp), r = 0;
        int32_t rc = u8_get(s, n, &i);
        r = kanji_digit(rc);
        if (!r) r = wide_digit(rc);
        if (!f || !r) {
            p_reject(p, false, no, line, syn, "bad move syntax '%s' (no destination square)", q);
            return;
        }
        to = sq_make(f - 1, r - 1);
    }
    /* piece */
    cp = u8_get(s, n, &i);
    piece_type_t pt = PT_NONE;
    if (cp == CP_NARI) {
        piece_type_t base = kif_piece(u8_get(s, n, &i));
        if (base == PT_LANCE || base == PT_KNIGHT || base == PT_SILVER) pt = pt_promote(base);
    } else {
        pt = kif_piece(cp);
    }
    if (pt == PT_NONE) {
        p_reject(p, false, no, line, syn, "bad move syntax '%s' (no piece)", q);
        return;
    }
    /* promotion, drop */
    bool promote = false, drop = false;
    cp = u8_peek(s, n, i);
    if (cp == CP_UCHI) drop = true, u8_get(s, n, &i);
    else if (cp == CP_NARI) promote = true, u8_get(s, n, &i);
    else if (cp == CP_FU_NEG) {
        u8_get(s, n, &i);
        if (u8_get(s, n, &i) != CP_NARI) {
            p_reject(p, false, no, line, syn, "bad move syntax '%s'", q);
            return;
        }
    }
    /* origin "(77)" */
    sq_t from = -1;
    size_t j = i;
    kif_skip_space(s, n, &j);
    if (j < n && s[j] == '(' && j + 3 < n && s[j + 3] == ')' && is_digit(s[j + 1]) && is_digit(s[j + 2])) {
        from = csa_square(s[j + 1], s[j + 2]);
        if (from < 0) {
            p_reject(p, false, no, line, REC_ERR_SYNTAX, "bad origin square in '%s'", q);
            return;
        }
    } else if (j + 1 < n && s[j] == '(' && is_digit(s[j + 1])) {
        bool cut = at_eof && j + 4 > n;
        p_reject(p, false, no, line, cut ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                 cut ? "the input ends inside move '%s'" : "bad origin square in '%s'", q);
        return;
    }
    if (drop && (from >= 0 || promote)) {
        p_reject(p, false, no, line, REC_ERR_SYNTAX, "bad move syntax '%s' (a drop with an origin)", q);
        return;
    }
    const pos_t *pos = p->pos;
    color_t stm = pos_side_to_move(pos);
    move_t m = MOVE_NONE;
    const char *why = "not a legal move here";
    if (drop) {
        if (pt > PT_GOLD) why = "that piece cannot be dropped";
        else m = move_make_drop(pt, to);
    } else if (from >= 0) {
        piece_t pc = pos_piece_on(pos, from);
        if (pc == PIECE_NONE || piece_color(pc) != stm) why = "no piece of the side to move on the origin square";
        else if (piece_type(pc) != pt) why = "the origin square holds another piece";
        else m = move_make(from, to, promote);
    } else { /* no origin: the one legal move of that piece to that square */
        move_list_t list;
        movegen_legal(pos, &list);
        int32_t found = 0;
        move_t board_m = MOVE_NONE, drop_m = MOVE_NONE;
        for (int32_t t = 0; t < list.n; t++) {
            move_t c = list.moves[t];
            if (move_to(c) != to) continue;
            if (move_is_drop(c)) {
                if (!promote && move_drop_pt(c) == pt) drop_m = c;
            } else if (piece_type(pos_piece_on(pos, move_from(c))) == pt && move_is_promote(c) == promote) {
                board_m = c;
                found++;
            }
        }
        if (found == 1) m = board_m;
        else if (found == 0 && drop_m != MOVE_NONE) m = drop_m;
        else if (found > 1) why = "ambiguous without an origin square";
    }
    if (m != MOVE_NONE && !pos_is_valid_move(pos, m)) m = MOVE_NONE;
    if (m == MOVE_NONE) {
        p_reject(p, false, no, line, REC_ERR_ILLEGAL, "illegal move '%s': %s", q, why);
        return;
    }
    game_play(p, m, line);
}

static void kif_read(parser_t *p) {
    kif_t *k = calloc(1, sizeof *k);
    if (!k) {
        p->stop = -1;
        return;
    }
    k->b.side = -1;
    game_begin(p, 1);
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    while (!p->failed && !p->stop && next_line(p->text, p->len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        kif_trim(&s, &n);
        if (n == 0 || s[0] == '#' || s[0] == '*' || s[0] == '&') continue;
        if (has_prefix(s, n, "変化")) break; /* variations follow the main line */
        if (has_prefix(s, n, "まで")) continue;
        if (is_digit(s[0])) {
            kif_move(p, k, s, n, ln.no, ln.unterminated);
            continue;
        }
        if (has_prefix(s, n, "▲") || has_prefix(s, n, "△") || has_prefix(s, n, "☗") || has_prefix(s, n, "☖")) {
            p_reject(p, false, 0, ln.no, REC_ERR_UNSUPPORTED,
                     "KI2 notation (moves without numbers and origin squares) is not supported: use KIF or CSA");
            continue;
        }
        if (p->started) continue; /* nothing after the moves began changes the position */
        if (s[0] == '|') {
            if (k->board_rows == 0) {
                k->board_line = ln.no;
                memset(k->b.board, 0, sizeof k->b.board);
            }
            k->content = true;
            if (!kif_board_row(k, s, n)) {
                char q[256];
                quote(q, sizeof q, s, n, true);
                p_reject(p, false, 0, ln.no, ln.unterminated ? REC_ERR_TRUNCATED : REC_ERR_POSITION,
                         "bad board line '%s'", q);
            }
            continue;
        }
        if (str_eq(s, n, "先手番") || str_eq(s, n, "下手番")) {
            k->b.side = COLOR_BLACK;
            continue;
        }
        if (str_eq(s, n, "後手番") || str_eq(s, n, "上手番")) {
            k->b.side = COLOR_WHITE;
            continue;
        }
        /* header "key：value" */
        size_t c = 0;
        while (c + 3 <= n && memcmp(s + c, "\xEF\xBC\x9A", 3) != 0) c++;
        if (c + 3 > n) continue; /* frames, file labels, anything else */
        const char *key = s, *val = s + c + 3;
        size_t kn = c, vn = n - c - 3;
        kif_trim(&key, &kn);
        kif_trim(&val, &vn);
        if (str_eq(key, kn, "手合割")) {
            k->content = true;
            k->handicap_line = ln.no;
            k->handicap = NULL;
            k->handicap_bad[0] = 0;
            for (size_t h = 0; h < sizeof HANDICAPS / sizeof HANDICAPS[0]; h++)
                if (str_eq(val, vn, HANDICAPS[h].name)) k->handicap = HANDICAPS[h].sfen;
            if (!k->handicap) quote(k->handicap_bad, sizeof k->handicap_bad, val, vn, true);
        } else if (str_eq(key, kn, "先手") || str_eq(key, kn, "下手")) {
            copy_name(p->g.black, val, vn);
        } else if (str_eq(key, kn, "後手") || str_eq(key, kn, "上手")) {
            copy_name(p->g.white, val, vn);
        } else if (str_eq(key, kn, "先手の持駒") || str_eq(key, kn, "下手の持駒") || str_eq(key, kn, "後手の持駒") ||
                   str_eq(key, kn, "上手の持駒")) {
            color_t col = (has_prefix(key, kn, "先手") || has_prefix(key, kn, "下手")) ? COLOR_BLACK : COLOR_WHITE;
            if (!kif_hand(&k->b, col, val, vn)) {
                char q[256];
                quote(q, sizeof q, s, n, true);
                p_reject(p, false, 0, ln.no, REC_ERR_POSITION, "bad hand '%s'", q);
            }
        }
    }
    if (!p->failed && !p->stop) {
        if (!k->content) game_drop(p);
        else kif_start(p, k, lineno, true);
    }
    game_end(p);
    free(k);
}

/* ==================================================================================== */
/* USI                                                                                  */
/* ==================================================================================== */
typedef struct {
    const char *s;
    size_t n;
} tok_t;

static bool usi_tok(const char *s, size_t n, size_t *i, tok_t *t) {
    while (*i < n && is_blank(s[*i])) (*i)++;
    if (*i >= n) return false;
    size_t b = *i;
    while (*i < n && !is_blank(s[*i])) (*i)++;
    t->s = s + b;
    t->n = *i - b;
    return true;
}

static bool tok_is(const tok_t *t, const char *lit) { return str_eq(t->s, t->n, lit); }

/* "7g7f", "8h2b+", "P*5e" shapes (not checked against a position). */
static bool usi_move_shape(const char *s, size_t n) {
    if (n == 4 && s[0] && strchr("PLNSGBR", s[0]) && s[1] == '*')
        return s[2] >= '1' && s[2] <= '9' && s[3] >= 'a' && s[3] <= 'i';
    if (n != 4 && n != 5) return false;
    if (n == 5 && s[4] != '+') return false;
    return s[0] >= '1' && s[0] <= '9' && s[1] >= 'a' && s[1] <= 'i' && s[2] >= '1' && s[2] <= '9' && s[3] >= 'a' &&
           s[3] <= 'i';
}

/* A result word at the end of a USI game line: 0 and *e, or -1. */
static int usi_result(const tok_t *t, end_t *e) {
    static const struct {
        const char *word;
        end_t end;
    } W[] = {
        {"resign", END_RESIGN},         {"win", END_DECLARE},          {"checkmate", END_MATE},
        {"sennichite", END_REPETITION}, {"perpetual_check", END_REPETITION}, {"declaration", END_DECLARE},
        {"max_ply", END_MAX_MOVES},     {"illegal_move", END_ILLEGAL}, {"time", END_TIME},
        {"abort", END_ABORT},
    };
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++)
        if (tok_is(t, W[i].word)) {
            *e = W[i].end;
            return 0;
        }
    return -1;
}

static void usi_game(parser_t *p, const line_t *ln, const char *s, size_t n) {
    size_t i = 0;
    tok_t t = {s, 0};
    usi_tok(s, n, &i, &t);
    if (tok_is(&t, "position") && !usi_tok(s, n, &i, &t)) {
        p_reject(p, false, 0, ln->no, ln->unterminated ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                 "'position' without startpos or sfen");
        return;
    }
    bool more;
    if (tok_is(&t, "startpos")) {
        if (!game_start(p, "startpos", 8, ln->no)) return;
        more = usi_tok(s, n, &i, &t);
    } else if (tok_is(&t, "sfen")) {
        size_t b = i, e = i;
        more = false;
        while (usi_tok(s, n, &i, &t)) {
            if (tok_is(&t, "moves")) {
                more = true;
                break;
            }
            e = i;
        }
        if (!game_start(p, s + b, e - b, ln->no)) return;
    } else {
        char q[256];
        quote(q, sizeof q, t.s, t.n, false);
        p_reject(p, false, 0, ln->no, REC_ERR_SYNTAX, "expected 'startpos' or 'sfen', not '%s'", q);
        return;
    }
    if (more && !tok_is(&t, "moves")) { /* a result right after the position */
        end_t e;
        if (usi_result(&t, &e) == 0 && !usi_tok(s, n, &i, &t)) {
            game_set_end(p, e);
            return;
        }
        char q[256];
        quote(q, sizeof q, t.s, t.n, false);
        p_reject(p, false, 0, ln->no, REC_ERR_SYNTAX, "expected 'moves', not '%s'", q);
        return;
    }
    while (more && usi_tok(s, n, &i, &t)) {
        int32_t no = p->g.n_moves + 1;
        char q[256];
        quote(q, sizeof q, t.s, t.n, false);
        end_t e;
        if (usi_result(&t, &e) == 0) {
            tok_t extra;
            if (usi_tok(s, n, &i, &extra)) {
                p_reject(p, false, no, ln->no, REC_ERR_SYNTAX, "text after the result '%s'", q);
                return;
            }
            game_set_end(p, e);
            return;
        }
        if (tok_is(&t, "pass") || tok_is(&t, "0000")) {
            p_reject(p, false, no, ln->no, REC_ERR_UNSUPPORTED, "a pass ('%s') is not supported", q);
            return;
        }
        bool last = i >= n;
        if (!usi_move_shape(t.s, t.n)) {
            bool cut = last && ln->unterminated;
            p_reject(p, false, no, ln->no, cut ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                     cut ? "the input ends inside move '%s'" : "bad move syntax '%s'", q);
            return;
        }
        move_t m = move_from_usi(p->pos, t.s, t.n);
        if (m == MOVE_NONE) {
            p_reject(p, false, no, ln->no, REC_ERR_ILLEGAL, "illegal move '%s'", q);
            return;
        }
        if (!game_play(p, m, ln->no)) return;
    }
}

static void usi_read(parser_t *p) {
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    while (!p->stop && next_line(p->text, p->len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        trim(&s, &n);
        if (n == 0 || s[0] == '#') continue;
        game_begin(p, ln.no);
        usi_game(p, &ln, s, n);
        game_end(p);
    }
}

/* ==================================================================================== */
/* detection and entry points                                                           */
/* ==================================================================================== */
static bool ext_is(const char *name, const char *ext) {
    size_t n = strlen(name), k = strlen(ext);
    if (n <= k || name[n - k - 1] != '.') return false;
    for (size_t i = 0; i < k; i++) {
        char c = name[n - k + i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != ext[i]) return false;
    }
    return true;
}

rec_format_t rec_format_guess(const char *name, const void *data, size_t len) {
    if (name) {
        if (ext_is(name, "csa")) return REC_FORMAT_CSA;
        if (ext_is(name, "kif") || ext_is(name, "kifu")) return REC_FORMAT_KIF;
        if (ext_is(name, "usi") || ext_is(name, "sfen")) return REC_FORMAT_USI;
    }
    const char *text = data;
    if (!text) return REC_FORMAT_AUTO;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3, len -= 3;
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    bool kif_comment = false;
    while (lineno < 200 && next_line(text, len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        trim(&s, &n);
        if (n == 0) continue;
        if (s[0] == '#') {
            if (has_prefix(s, n, "#KIF") || has_prefix(s, n, "# ----")) kif_comment = true;
            continue;
        }
        if (has_prefix(s, n, "position ") || has_prefix(s, n, "startpos") || has_prefix(s, n, "sfen "))
            return REC_FORMAT_USI;
        if (s[0] && strchr("VNP$'+-%/", s[0])) return REC_FORMAT_CSA;
        for (size_t i = 0; i < n; i++)
            if ((uint8_t)s[i] >= 0x80) return REC_FORMAT_KIF;
        if (is_digit(s[0])) return REC_FORMAT_KIF;
        return kif_comment ? REC_FORMAT_KIF : REC_FORMAT_AUTO;
    }
    return kif_comment ? REC_FORMAT_KIF : REC_FORMAT_AUTO;
}

/* Chooses the KIF text encoding; sets p->text/len (and *owned when converted).
 * Returns false after reporting a reject. */
static bool kif_decode(parser_t *p, const uint8_t *data, size_t len, char **owned) {
    *owned = NULL;
    bool bom = len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0;
    if (bom) data += 3, len -= 3;
    int want = bom ? 1 : 0; /* 0 unknown, 1 UTF-8, 2 Shift_JIS */
    if (len >= 4 && memcmp(data, "#KIF", 4) == 0) {
        size_t e = 0;
        while (e < len && data[e] != '\n') e++;
        const char *l = (const char *)data;
        for (size_t i = 0; i + 9 <= e; i++)
            if (memcmp(l + i, "encoding=", 9) == 0) {
                size_t b = i + 9, k = b;
                while (k < e && !is_blank(l[k])) k++;
                char enc[32];
                size_t m = k - b < sizeof enc - 1 ? k - b : sizeof enc - 1;
                for (size_t j = 0; j < m; j++) enc[j] = (char)((l[b + j] >= 'a' && l[b + j] <= 'z') ? l[b + j] - 32 : l[b + j]);
                enc[m] = 0;
                if (strcmp(enc, "UTF-8") == 0 || strcmp(enc, "UTF8") == 0) want = 1;
                else if (strcmp(enc, "SHIFT_JIS") == 0 || strcmp(enc, "SJIS") == 0 || strcmp(enc, "CP932") == 0 ||
                         strcmp(enc, "WINDOWS-31J") == 0 || strcmp(enc, "MS932") == 0 || strcmp(enc, "SHIFT-JIS") == 0)
                    want = 2;
                else {
                    char q[64];
                    quote(q, sizeof q, l + b, k - b, false);
                    p_reject(p, true, 0, 1, REC_ERR_ENCODING, "unsupported encoding '%s' (UTF-8 or Shift_JIS)", q);
                    return false;
                }
                break;
            }
    }
    size_t bad8 = want == 2 ? 0 : utf8_check(data, len);
    if (want != 2 && bad8 == len) {
        p->text = (const char *)data;
        p->len = len;
        p->utf8 = true;
        return true;
    }
    if (want == 1) {
        p_reject(p, true, 0, 0, REC_ERR_ENCODING, "invalid UTF-8 (byte 0x%02X at offset %llu)", data[bad8],
                 (unsigned long long)(bad8 + (bom ? 3 : 0)));
        return false;
    }
    size_t badj = sjis_check(data, len);
    if (badj != len) {
        if (want == 2)
            p_reject(p, true, 0, 0, REC_ERR_ENCODING, "invalid Shift_JIS (byte 0x%02X at offset %llu)", data[badj],
                     (unsigned long long)badj);
        else
            p_reject(p, true, 0, 0, REC_ERR_ENCODING,
                     "unknown text encoding: neither UTF-8 (byte 0x%02X at offset %llu) nor Shift_JIS (byte 0x%02X at "
                     "offset %llu)",
                     data[bad8], (unsigned long long)bad8, data[badj], (unsigned long long)badj);
        return false;
    }
    size_t n = 0;
    *owned = sjis_to_utf8(data, len, &n);
    if (!*owned) {
        p_reject(p, true, 0, 0, REC_ERR_MEMORY, "out of memory converting Shift_JIS");
        p->stop = -1;
        return false;
    }
    p->text = *owned;
    p->len = n;
    p->utf8 = true;
    return true;
}

int rec_parse(const char *name, const void *data, size_t len, rec_format_t fmt, const rec_sink_t *sink) {
    parser_t *p = calloc(1, sizeof *p);
    pos_t *pos = malloc(sizeof *pos);
    if (!p || !pos) {
        free(p);
        free(pos);
        if (sink && sink->reject) {
            rec_reject_t r = {.code = REC_ERR_MEMORY};
            snprintf(r.msg, sizeof r.msg, "%s: out of memory", name ? name : "<input>");
            sink->reject(sink->user, &r);
        }
        return -1;
    }
    p->name = name ? name : "<input>";
    p->sink = sink;
    p->pos = pos;
    p->text = data;
    p->len = data ? len : 0;
    const uint8_t *b = data;
    char *owned = NULL;
    if ((unsigned)fmt >= REC_FORMAT_NB) fmt = REC_FORMAT_AUTO;
    /* UTF-16 (a BOM, or NUL bytes early on) is refused by every reader. */
    bool nul = false;
    for (size_t i = 0; i < p->len && i < 512; i++) nul |= b[i] == 0;
    if (p->len >= 2 && ((b[0] == 0xFF && b[1] == 0xFE) || (b[0] == 0xFE && b[1] == 0xFF))) {
        p_reject(p, true, 0, 0, REC_ERR_ENCODING, "UTF-16 text is not supported (save it as UTF-8 or Shift_JIS)");
    } else if (nul) {
        p_reject(p, true, 0, 0, REC_ERR_ENCODING, "NUL bytes in the text: UTF-16 or a binary file, not a record");
    } else {
        if (fmt == REC_FORMAT_AUTO) fmt = rec_format_guess(name, data, p->len);
        if (fmt == REC_FORMAT_AUTO) {
            p_reject(p, true, 0, 0, REC_ERR_FORMAT, p->len ? "not a CSA, KIF or USI record" : "empty file");
        } else if (fmt == REC_FORMAT_KIF) {
            if (kif_decode(p, b, p->len, &owned)) kif_read(p);
        } else {
            if (p->len >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0) p->text += 3, p->len -= 3;
            if (fmt == REC_FORMAT_CSA) csa_read(p);
            else usi_read(p);
        }
        if (p->stop == 0 && p->delivered == 0 && p->rejected == 0)
            p_reject(p, true, 0, 0, REC_ERR_FORMAT, "no game found (read as %s)", rec_format_name(fmt));
    }
    if (p->stop < 0 && p->rejected == 0) p_reject(p, true, 0, 0, REC_ERR_MEMORY, "out of memory");
    int rc = p->stop < 0 ? -1 : p->stop > 0 ? 1 : 0;
    free(owned);
    free(pos);
    free(p);
    return rc;
}

int rec_parse_file(const char *path, rec_format_t fmt, const rec_sink_t *sink) {
    compat_map_t map;
    char err[512];
    if (compat_map_file(path, &map, err, sizeof err) != 0) {
        if (sink && sink->reject) {
            rec_reject_t r = {.code = REC_ERR_IO};
            snprintf(r.msg, sizeof r.msg, "%s", err);
            sink->reject(sink->user, &r);
        }
        return 0;
    }
    if (map.size > SIZE_MAX) {
        compat_unmap_file(&map);
        return -1;
    }
    int rc = rec_parse(path, map.data, (size_t)map.size, fmt, sink);
    compat_unmap_file(&map);
    return rc;
}

/* ==================================================================================== */
/* collecting                                                                           */
/* ==================================================================================== */
typedef struct {
    rec_list_t *l;
    int32_t cap_g, cap_r;
    bool oom;
} collect_t;

static int collect_game(void *user, const rec_game_t *g) {
    collect_t *c = user;
    rec_list_t *l = c->l;
    if (l->n_games == c->cap_g) {
        int32_t cap = c->cap_g ? 2 * c->cap_g : 8;
        rec_game_t *a = realloc(l->games, sizeof *a * (size_t)cap);
        if (!a) return c->oom = true, 1;
        l->games = a;
        c->cap_g = cap;
    }
    move_t *mv = malloc(sizeof(move_t) * (size_t)(g->n_moves ? g->n_moves : 1));
    if (!mv) return c->oom = true, 1;
    memcpy(mv, g->moves, sizeof(move_t) * (size_t)g->n_moves);
    rec_game_t *d = &l->games[l->n_games++];
    *d = *g;
    d->moves = mv;
    return 0;
}

static void collect_reject(void *user, const rec_reject_t *r) {
    collect_t *c = user;
    rec_list_t *l = c->l;
    if (l->n_rejects == c->cap_r) {
        int32_t cap = c->cap_r ? 2 * c->cap_r : 4;
        rec_reject_t *a = realloc(l->rejects, sizeof *a * (size_t)cap);
        if (!a) {
            c->oom = true;
            return;
        }
        l->rejects = a;
        c->cap_r = cap;
    }
    l->rejects[l->n_rejects++] = *r;
}

int rec_parse_list(const char *name, const void *data, size_t len, rec_format_t fmt, rec_list_t *out) {
    memset(out, 0, sizeof *out);
    collect_t c = {.l = out};
    rec_sink_t sink = {collect_game, collect_reject, &c};
    int rc = rec_parse(name, data, len, fmt, &sink);
    return c.oom ? -1 : rc;
}

void rec_list_free(rec_list_t *l) {
    if (!l) return;
    for (int32_t i = 0; i < l->n_games; i++) free((void *)l->games[i].moves);
    free(l->games);
    free(l->rejects);
    memset(l, 0, sizeof *l);
}

char *rec_moves_usi(const move_t *moves, int32_t n) {
    size_t cap = (size_t)(n > 0 ? n : 0) * MOVE_USI_MAX + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        if (i) s[len++] = ' ';
        len += (size_t)move_to_usi(moves[i], s + len);
    }
    s[len] = 0;
    return s;
}
