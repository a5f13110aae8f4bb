/* record_kif.c - the KIF reader (Kifu for Windows style; see record.h) and
 * the text encodings of KIF files.
 *
 * Owns: the choice of encoding (a BOM, "#KIF version=... encoding=...", else
 * UTF-8 when valid, else Shift_JIS), the Shift_JIS (CP932) subset records
 * use converted to UTF-8, KIF's headers (手合割 and the handicaps, names,
 * hands), the board diagram, move lines (同, 成, 不成, 打, promoted pieces,
 * the move numbers in order) and endings; variations are ignored. Does not
 * own: the parser and the result of an ending (record.c), the rules
 * (engine/).
 */
#include "data/record_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/movegen.h"

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
/* clang-format off */
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
/* clang-format on */
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

/* clang-format off */
enum {
    CP_SPACE = 0x3000, CP_DOT = 0x30FB, CP_COLON = 0xFF1A, CP_NARI = 0x6210, CP_FU_NEG = 0x4E0D,
    CP_UCHI = 0x6253, CP_DOU = 0x540C, CP_JU = 0x5341,
};
/* clang-format on */

/* clang-format off */
static const struct {
    int32_t cp;
    piece_type_t pt;
} KIF_PIECES[] = {
    {0x6B69, PT_PAWN},       {0x9999, PT_LANCE},  {0x6842, PT_KNIGHT}, {0x9280, PT_SILVER},
    {0x91D1, PT_GOLD},       {0x89D2, PT_BISHOP}, {0x98DB, PT_ROOK},   {0x7389, PT_KING},
    {0x738B, PT_KING},       {0x3068, PT_PRO_PAWN}, {0x674F, PT_PRO_LANCE}, {0x572D, PT_PRO_KNIGHT},
    {0x5168, PT_PRO_SILVER}, {0x99AC, PT_HORSE},  {0x9F8D, PT_DRAGON}, {0x7ADC, PT_DRAGON},
};
/* clang-format on */

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
    int32_t board_rows;    /* rows of a board diagram read */
    int32_t board_line;    /* line of its first row */
    const char *handicap;  /* SFEN of 手合割; NULL = none given */
    char handicap_bad[96]; /* a 手合割 value not in the table, "" if none */
    int32_t handicap_line;
    bool content;    /* a 手合割, a board or a move: this is a game */
    int32_t next_no; /* the number the next move line must carry; 0 = the first is free */
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
            reci_reject(p, false, 0, k->board_line, at_eof ? REC_ERR_TRUNCATED : REC_ERR_POSITION,
                        "the board diagram has %d of its 9 rows", (int)k->board_rows);
            return false;
        }
        if (k->b.side < 0) k->b.side = COLOR_BLACK;
        char sfen[SFEN_MAX_LEN];
        size_t n = reci_setup_sfen(&k->b, sfen, sizeof sfen);
        return reci_game_start(p, sfen, n, k->board_line);
    }
    if (k->handicap_bad[0]) {
        reci_reject(p, false, 0, k->handicap_line, REC_ERR_UNSUPPORTED,
                    "handicap '%s' is not supported (give a board diagram)", k->handicap_bad);
        return false;
    }
    const char *sfen = k->handicap ? k->handicap : "startpos";
    return reci_game_start(p, sfen, strlen(sfen), line);
}

/* clang-format off */
static const struct {
    const char *word;
    end_t end;
} KIF_ENDS[] = {
    {"投了", END_RESIGN},      {"詰み", END_MATE},         {"千日手", END_REPETITION}, {"持将棋", END_IMPASSE},
    {"入玉勝ち", END_DECLARE}, {"宣言勝ち", END_DECLARE},  {"中断", END_ABORT},        {"切れ負け", END_TIME},
    {"時間切れ", END_TIME},    {"反則負け", END_ILLEGAL},  {"反則勝ち", END_ILLEGAL_WIN}, {"不詰", END_ABORT},
};
/* clang-format on */

/* "   1 ７六歩(77)   ( 0:01/00:00:01)" */
static void kif_move(parser_t *p, kif_t *k, const char *s, size_t n, int32_t line, bool at_eof) {
    char q[256];
    reci_quote(q, sizeof q, s, n, true);
    size_t i = 0;
    int64_t num = 0;
    while (i < n && is_digit(s[i]) && num < 100000000) num = num * 10 + (s[i++] - '0');
    int32_t no = p->g.n_moves + 1;
    rec_error_t syn = at_eof ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX;
    if (i < n && is_digit(s[i])) {
        reci_reject(p, false, no, line, REC_ERR_SYNTAX, "bad move number in '%s'", q);
        return;
    }
    if (k->next_no && num != k->next_no) {
        reci_reject(p, false, no, line, REC_ERR_SYNTAX, "move number %lld where %d was expected: '%s'", (long long)num,
                    (int)k->next_no, q);
        return;
    }
    k->next_no = (int32_t)num + 1;
    k->content = true;
    if (!kif_start(p, k, line, false)) return;
    if (i >= n || !kif_space(u8_peek(s, n, i))) {
        reci_reject(p, false, no, line, syn, "bad move syntax '%s'", q);
        return;
    }
    kif_skip_space(s, n, &i);
    int32_t cp = u8_peek(s, n, i);
    if (cp == 0x25B2 || cp == 0x25B3 || cp == 0x2617 || cp == 0x2616) u8_get(s, n, &i); /* ▲△☗☖ */
    for (size_t e = 0; e < sizeof KIF_ENDS / sizeof KIF_ENDS[0]; e++)
        if (has_prefix(s + i, n - i, KIF_ENDS[e].word)) {
            if (!p->ended) reci_game_set_end(p, KIF_ENDS[e].end);
            return;
        }
    if (p->ended) {
        reci_reject(p, false, no, line, REC_ERR_SYNTAX, "move '%s' after the game's ending", q);
        return;
    }
    if (has_prefix(s + i, n - i, "パス")) {
        reci_reject(p, false, no, line, REC_ERR_UNSUPPORTED, "a pass is not supported: '%s'", q);
        return;
    }
    /* destination */
    sq_t to;
    cp = u8_get(s, n, &i);
    if (cp == CP_DOU) {
        if (p->g.n_moves == 0) {
            reci_reject(p, false, no, line, REC_ERR_SYNTAX, "'同' on the first move: '%s'", q);
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
            reci_reject(p, false, no, line, syn, "bad move syntax '%s' (no destination square)", q);
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
        reci_reject(p, false, no, line, syn, "bad move syntax '%s' (no piece)", q);
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
            reci_reject(p, false, no, line, syn, "bad move syntax '%s'", q);
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
            reci_reject(p, false, no, line, REC_ERR_SYNTAX, "bad origin square in '%s'", q);
            return;
        }
    } else if (j + 1 < n && s[j] == '(' && is_digit(s[j + 1])) {
        bool cut = at_eof && j + 4 > n;
        reci_reject(p, false, no, line, cut ? REC_ERR_TRUNCATED : REC_ERR_SYNTAX,
                    cut ? "the input ends inside move '%s'" : "bad origin square in '%s'", q);
        return;
    }
    if (drop && (from >= 0 || promote)) {
        reci_reject(p, false, no, line, REC_ERR_SYNTAX, "bad move syntax '%s' (a drop with an origin)", q);
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
        reci_reject(p, false, no, line, REC_ERR_ILLEGAL, "illegal move '%s': %s", q, why);
        return;
    }
    reci_game_play(p, m, line);
}

void reci_kif_read(parser_t *p) {
    kif_t *k = calloc(1, sizeof *k);
    if (!k) {
        p->stop = -1;
        return;
    }
    k->b.side = -1;
    reci_game_begin(p, 1);
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    while (!p->failed && !p->stop && reci_next_line(p->text, p->len, &at, &lineno, &ln)) {
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
            reci_reject(p, false, 0, ln.no, REC_ERR_UNSUPPORTED,
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
                reci_quote(q, sizeof q, s, n, true);
                reci_reject(p, false, 0, ln.no, ln.unterminated ? REC_ERR_TRUNCATED : REC_ERR_POSITION,
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
            if (!k->handicap) reci_quote(k->handicap_bad, sizeof k->handicap_bad, val, vn, true);
        } else if (str_eq(key, kn, "先手") || str_eq(key, kn, "下手")) {
            reci_copy_name(p->g.black, val, vn);
        } else if (str_eq(key, kn, "後手") || str_eq(key, kn, "上手")) {
            reci_copy_name(p->g.white, val, vn);
        } else if (str_eq(key, kn, "先手の持駒") || str_eq(key, kn, "下手の持駒") || str_eq(key, kn, "後手の持駒") ||
                   str_eq(key, kn, "上手の持駒")) {
            color_t col = (has_prefix(key, kn, "先手") || has_prefix(key, kn, "下手")) ? COLOR_BLACK : COLOR_WHITE;
            if (!kif_hand(&k->b, col, val, vn)) {
                char q[256];
                reci_quote(q, sizeof q, s, n, true);
                reci_reject(p, false, 0, ln.no, REC_ERR_POSITION, "bad hand '%s'", q);
            }
        }
    }
    if (!p->failed && !p->stop) {
        if (!k->content) reci_game_drop(p);
        else kif_start(p, k, lineno, true);
    }
    reci_game_end(p);
    free(k);
}

/* Chooses the KIF text encoding; sets p->text/len (and *owned when converted).
 * Returns false after reporting a reject. */
bool reci_kif_decode(parser_t *p, const uint8_t *data, size_t len, char **owned) {
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
                for (size_t j = 0; j < m; j++)
                    enc[j] = (char)((l[b + j] >= 'a' && l[b + j] <= 'z') ? l[b + j] - 32 : l[b + j]);
                enc[m] = 0;
                if (strcmp(enc, "UTF-8") == 0 || strcmp(enc, "UTF8") == 0) want = 1;
                else if (strcmp(enc, "SHIFT_JIS") == 0 || strcmp(enc, "SJIS") == 0 || strcmp(enc, "CP932") == 0 ||
                         strcmp(enc, "WINDOWS-31J") == 0 || strcmp(enc, "MS932") == 0 || strcmp(enc, "SHIFT-JIS") == 0)
                    want = 2;
                else {
                    char q[64];
                    reci_quote(q, sizeof q, l + b, k - b, false);
                    reci_reject(p, true, 0, 1, REC_ERR_ENCODING, "unsupported encoding '%s' (UTF-8 or Shift_JIS)", q);
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
        reci_reject(p, true, 0, 0, REC_ERR_ENCODING, "invalid UTF-8 (byte 0x%02X at offset %llu)", data[bad8],
                    (unsigned long long)(bad8 + (bom ? 3 : 0)));
        return false;
    }
    size_t badj = sjis_check(data, len);
    if (badj != len) {
        if (want == 2)
            reci_reject(p, true, 0, 0, REC_ERR_ENCODING, "invalid Shift_JIS (byte 0x%02X at offset %llu)", data[badj],
                        (unsigned long long)badj);
        else
            reci_reject(
                p, true, 0, 0, REC_ERR_ENCODING,
                "unknown text encoding: neither UTF-8 (byte 0x%02X at offset %llu) nor Shift_JIS (byte 0x%02X at "
                "offset %llu)",
                data[bad8], (unsigned long long)bad8, data[badj], (unsigned long long)badj);
        return false;
    }
    size_t n = 0;
    *owned = sjis_to_utf8(data, len, &n);
    if (!*owned) {
        reci_reject(p, true, 0, 0, REC_ERR_MEMORY, "out of memory converting Shift_JIS");
        p->stop = -1;
        return false;
    }
    p->text = *owned;
    p->len = n;
    p->utf8 = true;
    return true;
}
