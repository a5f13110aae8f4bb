/* report_games.c - the games of tools/report's page; see report_games.h. */
#include "tools/report_games.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "data/run.h"
#include "data/shard.h"
#include "engine/encode.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "report_board_js.h" /* generated: report_board_js, the text of tools/report_board.js */

/* Why a game is on the page; a game may be there for several. */
enum { K_NAMED, K_LONGEST, K_MATE, K_DECL, K_RESIGN, K_EVLOSS, K_NB };
static const char *const kind_name[K_NB] = {"named",       "longest",     "checkmate",
                                            "declaration", "resignation", "lost in evaluation"};

typedef struct {
    int64_t id, shard_id, first_row, row_count;
    int32_t cycle, plies, result;
    db_reason_t reason;
    char *start, *moves, *black, *white, *detail;
} rg_game_t;

typedef struct {
    rg_game_t *slot[K_NB]; /* K_NAMED unused here */
    int has_match;         /* the cycle's net played an evaluation */
} rg_cycle_t;

/* One game's data, ready for the page. */
typedef struct {
    int64_t id;
    int32_t cycle, kind; /* sorted by cycle, then by its first kind, then by id */
    int named;
    char *json;
    size_t len;
} rg_out_t;

struct rg {
    int64_t named[RG_NAMED_MAX];
    rg_game_t *named_game[RG_NAMED_MAX];
    int32_t n_named;
    rg_cycle_t *cycles;
    int32_t n_cycles; /* cycles[0, n_cycles) */
    int oom;
    /* rg_finish's result */
    rg_out_t *out;
    int32_t n_out, first;
    size_t bytes;
    int32_t cycles_with_games, cycles_shown, cycles_left_for_size;
    char share[64];
};

static char *dup(const char *s) {
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s ? s : "", n);
    return d;
}

static void game_free(rg_game_t *g) {
    if (!g) return;
    free(g->start), free(g->moves), free(g->black), free(g->white), free(g->detail);
    free(g);
}

static rg_game_t *game_copy(const db_game_t *g, int32_t cycle) {
    rg_game_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->id = g->id, c->shard_id = g->shard_id, c->first_row = g->first_row, c->row_count = g->row_count;
    c->cycle = cycle, c->plies = g->plies, c->result = g->result, c->reason = g->reason;
    c->start = dup(g->start_sfen && g->start_sfen[0] ? g->start_sfen : "startpos");
    c->moves = dup(g->moves), c->black = dup(g->black), c->white = dup(g->white), c->detail = dup(g->detail);
    if (!c->start || !c->moves || !c->black || !c->white || !c->detail) {
        game_free(c);
        return NULL;
    }
    return c;
}

rg_t *rg_new(const int64_t *named, int32_t n_named) {
    rg_t *rg = calloc(1, sizeof *rg);
    if (!rg) return NULL;
    for (int32_t i = 0; i < n_named && rg->n_named < RG_NAMED_MAX; i++) rg->named[rg->n_named++] = named[i];
    rg->first = 0;
    return rg;
}

void rg_free(rg_t *rg) {
    if (!rg) return;
    for (int32_t c = 0; c < rg->n_cycles; c++)
        for (int k = 0; k < K_NB; k++) game_free(rg->cycles[c].slot[k]);
    for (int32_t i = 0; i < rg->n_named; i++) game_free(rg->named_game[i]);
    for (int32_t i = 0; i < rg->n_out; i++) free(rg->out[i].json);
    free(rg->cycles);
    free(rg->out);
    free(rg);
}

static rg_cycle_t *cycle_at(rg_t *rg, int32_t c) {
    if (c < 0) return NULL;
    if (c >= rg->n_cycles) {
        int32_t n = c + 1 > 2 * rg->n_cycles ? c + 1 : 2 * rg->n_cycles;
        rg_cycle_t *p = realloc(rg->cycles, (size_t)n * sizeof *p);
        if (!p) {
            rg->oom = 1;
            return NULL;
        }
        memset(p + rg->n_cycles, 0, (size_t)(n - rg->n_cycles) * sizeof *p);
        rg->cycles = p, rg->n_cycles = n;
    }
    return &rg->cycles[c];
}

/* Puts a copy of g in *slot (replacing what is there). */
static void take(rg_t *rg, rg_game_t **slot, const db_game_t *g, int32_t cycle) {
    rg_game_t *c = game_copy(g, cycle);
    if (!c) {
        rg->oom = 1;
        return;
    }
    game_free(*slot);
    *slot = c;
}

void rg_see(rg_t *rg, const db_shard_t *s, const db_game_t *g, int32_t net) {
    if (!rg || !s || !g) return;
    for (int32_t i = 0; i < rg->n_named; i++)
        if (rg->named[i] == g->id && !rg->named_game[i]) take(rg, &rg->named_game[i], g, net);
    rg_cycle_t *c = cycle_at(rg, net);
    if (!c) return;
    if (!c->slot[K_LONGEST] || g->plies > c->slot[K_LONGEST]->plies) take(rg, &c->slot[K_LONGEST], g, net);
    int k = g->reason == DB_REASON_CHECKMATE     ? K_MATE
            : g->reason == DB_REASON_DECLARATION ? K_DECL
            : g->reason == DB_REASON_RESIGN      ? K_RESIGN
                                                 : -1;
    if (k >= 0 && !c->slot[k]) take(rg, &c->slot[k], g, net);
}

/* ---- the evaluation's games ----------------------------------------------------------------- */
/* The first game the net of m (player A) lost in match m, into *slot; 0, or -1 on a database failure. */
static int eval_loss(rg_t *rg, db_t *db, const db_match_t *m, rg_game_t **slot) {
    if (!m->engine_a[0]) return 0; /* a match of schema v1: no players recorded */
    db_game_list_t gl = {0};
    if (db_match_games_list(db, m->id, &gl) != DB_OK) return -1;
    for (int64_t i = 0; i < gl.n && !*slot; i++) {
        const db_game_t *g = &gl.games[i];
        int a_black = g->black && !strcmp(g->black, m->engine_a), a_white = g->white && !strcmp(g->white, m->engine_a);
        if ((a_black && g->result == DB_RESULT_WHITE_WIN) || (a_white && g->result == DB_RESULT_BLACK_WIN))
            take(rg, slot, g, m->cycle);
    }
    db_game_list_free(&gl);
    return 0;
}

/* Named match games (ids < 0), found among every match's games. */
static int find_named_match_games(rg_t *rg, db_t *db, const db_match_t *ms, int32_t nm) {
    int want = 0;
    for (int32_t i = 0; i < rg->n_named; i++) want |= rg->named[i] < 0;
    for (int32_t k = 0; k < nm && want; k++) {
        db_game_list_t gl = {0};
        if (db_match_games_list(db, ms[k].id, &gl) != DB_OK) return -1;
        for (int64_t j = 0; j < gl.n; j++)
            for (int32_t i = 0; i < rg->n_named; i++)
                if (rg->named[i] == gl.games[j].id && !rg->named_game[i])
                    take(rg, &rg->named_game[i], &gl.games[j], ms[k].cycle);
        db_game_list_free(&gl);
    }
    return 0;
}

/* ---- one game's data ---------------------------------------------------------------------- */
/* A JSON string (also safe inside <script>: no "</"). */
static void json_str(sb_t *o, const char *s) {
    sb_printf(o, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') sb_printf(o, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') sb_printf(o, "\\u%04x", *p);
        else sb_printf(o, "%c", *p);
    }
    sb_printf(o, "\"");
}

/* The shard open for the games being read: one at a time, kept while the games of one shard follow. */
typedef struct {
    int64_t id;
    shard_t *s;
    char err[512]; /* why it could not be read ("" when open) */
} rg_shard_t;

static void shard_use(rg_shard_t *c, db_t *db, const char *base_dir, int64_t shard_id) {
    if (c->id == shard_id) return;
    shard_close(c->s);
    c->s = NULL, c->id = shard_id, c->err[0] = 0;
    db_shard_t row;
    char path[RUN_PATH_MAX];
    if (db_shard_get(db, shard_id, &row) != DB_OK) {
        set_err(c->err, sizeof c->err, "%s", db_errmsg(db));
        return;
    }
    if (run_path(base_dir, row.path, path, sizeof path) != 0) {
        set_err(c->err, sizeof c->err, "%s/%s: path too long", base_dir, row.path);
        return;
    }
    if (!compat_file_exists(path)) {
        set_err(c->err, sizeof c->err, "%s: no such file", path);
        return;
    }
    c->s = shard_open(path, NULL, SHARD_OPEN_NO_CHECKSUM, c->err, sizeof c->err);
}

/* Black's win probability from a root value seen by the side to move, as one character of
 * A-Z a-z 0-9 - _ (0..63 over [0, 1]); the page reads it back (report_board.js: valueAt). */
static char value_char(float q, color_t side) {
    double b = side == COLOR_BLACK ? (1.0 + q) / 2.0 : (1.0 - q) / 2.0;
    int k = (int)lround((b < 0 ? 0 : b > 1 ? 1 : b) * 63.0);
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    return alphabet[k];
}

/* The top search moves of row r at pos, as ,"usi",pct pairs; how many. */
static int top_moves(sb_t *o, const shard_t *s, int64_t r, const pos_t *pos) {
    const shard_columns_t *col = shard_columns(s);
    int64_t b, e, best[RG_TOP_MOVES];
    float prob[SHARD_LABEL_NB];
    shard_row_policy(s, r, &b, &e);
    shard_row_probs(s, r, prob);
    int nb = 0;
    for (int64_t i = 0; i < e - b; i++) { /* the short list (entries of the row), largest first */
        int j = nb;
        if (nb < RG_TOP_MOVES) nb++;
        else if (prob[i] <= prob[best[RG_TOP_MOVES - 1]]) continue;
        else j = RG_TOP_MOVES - 1;
        while (j > 0 && prob[best[j - 1]] < prob[i]) best[j] = best[j - 1], j--;
        best[j] = i;
    }
    int wrote = 0;
    for (int k = 0; k < nb; k++) {
        move_t m = encode_label_move(pos, col->policy_label[b + best[k]]);
        if (m == MOVE_NONE) continue;
        char u[MOVE_USI_MAX];
        move_to_usi(m, u);
        sb_printf(o, ",\"%s\",%ld", u, lround(100.0 * prob[best[k]]));
        wrote++;
    }
    return wrote;
}

static const char *result_words(int32_t result) { return result > 0 ? "Black won" : result < 0 ? "White won" : "draw"; }

/* The moves of g that replay from its start, into mv (USI, spaces); n: how many. What went wrong goes into
 * note (a start that does not read: the usual one; a move that does not replay: the record cut there). */
static int32_t replay(const rg_game_t *g, pos_t *pos, sb_t *mv, char *note, size_t note_len) {
    char err[256];
    if (sfen_parse_cstr(pos, g->start, err, sizeof err) != SFEN_OK) {
        snprintf(note, note_len, "its start position does not read (%s): shown from the usual one", err);
        pos_set_startpos(pos);
    }
    int32_t n = 0;
    for (const char *p = g->moves; *p;) {
        while (*p == ' ') p++;
        const char *w = p;
        while (*p && *p != ' ') p++;
        if (p == w) break;
        move_t m = move_from_usi(pos, w, (size_t)(p - w));
        if (m == MOVE_NONE || pos_hist_len(pos) >= POS_HIST_MAX - 1) {
            size_t l = strlen(note);
            snprintf(note + l, note_len - l, "%sthe record is cut at move %d (%.*s): %s", l ? "; " : "", n + 1,
                     (int)(p - w > 12 ? 12 : p - w), w, m == MOVE_NONE ? "not a legal move there" : "too long a game");
            break;
        }
        sb_printf(mv, "%s%.*s", n ? " " : "", (int)(p - w), w);
        pos_do_move(pos, m);
        n++;
    }
    return n;
}

/* The values (one character a position, '.' none: value_char) and search moves ([ply,"usi",pct,...] a
 * position that has them) of g's n moves (moves) from its shard's rows, into v and t; NULL, or why there
 * are none. */
static const char *values(const rg_game_t *g, const char *moves, int32_t n, db_t *db, const char *base_dir,
                          rg_shard_t *sc, pos_t *pos, sb_t *v, sb_t *t, char *why, size_t why_len) {
    if (g->shard_id <= 0) return "a match game: its search values are not stored";
    shard_use(sc, db, base_dir, g->shard_id);
    if (!sc->s) {
        snprintf(why, why_len, "values not available: %s", sc->err);
        return why;
    }
    int64_t *row_of = malloc(((size_t)n + 1) * sizeof *row_of); /* the shard's row of each position, or -1 */
    if (!row_of) return "out of memory";
    const shard_columns_t *col = shard_columns(sc->s);
    int have_rows = 0;
    for (int32_t i = 0; i <= n; i++) row_of[i] = -1;
    for (int64_t r = g->first_row; r < g->first_row + g->row_count && r < shard_rows(sc->s); r++) {
        int64_t holds = shard_row_game(sc->s, r);
        if (holds != g->id) {
            snprintf(why, why_len, "values not available: %s: row %lld holds game %lld, not %lld", shard_path(sc->s),
                     (long long)r, (long long)holds, (long long)g->id);
            free(row_of);
            return why;
        }
        if (col->ply[r] <= n) row_of[col->ply[r]] = r, have_rows = 1;
    }
    if (!have_rows) {
        free(row_of);
        return "no search values stored for this game";
    }
    if (sfen_parse_cstr(pos, g->start, NULL, 0) != SFEN_OK) pos_set_startpos(pos);
    for (int32_t i = 0, any = 0; i <= n; i++) {
        int64_t r = row_of[i];
        sb_printf(v, "%c", r >= 0 ? value_char(col->root_q[r], pos_side_to_move(pos)) : '.');
        if (r >= 0) {
            size_t before = t->n;
            sb_printf(t, "%s[%d", any ? "," : "", i);
            if (top_moves(t, sc->s, r, pos) > 0) sb_printf(t, "]"), any = 1;
            else if (t->s) t->n = before, t->s[t->n] = 0; /* no policy target at this row */
        }
        if (i == n) break;
        const char *w = moves;
        while (*moves && *moves != ' ') moves++;
        pos_do_move(pos, move_from_usi(pos, w, (size_t)(moves - w)));
        if (*moves == ' ') moves++;
    }
    free(row_of);
    return NULL;
}

/* The game's JSON object into o: replayed with the engine, values and search moves from its shard. */
static void game_json(sb_t *o, const rg_game_t *g, uint32_t kinds, db_t *db, const char *base_dir, rg_shard_t *sc,
                      pos_t *pos) {
    char note[600] = "", why[640];
    sb_t mv = {0}, v = {0}, t = {0}, title = {0};
    int32_t n = replay(g, pos, &mv, note, sizeof note);
    char start[SFEN_MAX_LEN] = "startpos";
    if (strcmp(g->start, "startpos") != 0) { /* as the engine read it */
        if (sfen_parse_cstr(pos, g->start, NULL, 0) != SFEN_OK) pos_set_startpos(pos);
        sfen_write(pos, start, sizeof start);
    }
    const char *nv = values(g, mv.s ? mv.s : "", n, db, base_dir, sc, pos, &v, &t, why, sizeof why);
    if (g->cycle >= 0) sb_printf(&title, "net %d", g->cycle);
    else sb_printf(&title, "a match");
    for (int k = 0, first = 1; k < K_NB; k++)
        if (kinds & (1u << k)) sb_printf(&title, "%s%s", first ? " · " : ", ", kind_name[k]), first = 0;
    sb_printf(&title, " · %d plies · %s (%s) · game %lld", n, result_words(g->result), db_reason_name(g->reason),
              (long long)g->id);
    char end[256];
    snprintf(end, sizeof end, "%s (%s)%s%s", result_words(g->result), db_reason_name(g->reason),
             g->detail[0] ? ": " : "", g->detail);
    sb_printf(o, "{\"id\":%lld,\"c\":%d,\"title\":", (long long)g->id, g->cycle);
    json_str(o, title.s);
    sb_printf(o, ",\"b\":");
    json_str(o, g->black);
    sb_printf(o, ",\"w\":");
    json_str(o, g->white);
    sb_printf(o, ",\"end\":");
    json_str(o, end);
    sb_printf(o, ",\"s\":");
    json_str(o, start);
    sb_printf(o, ",\"m\":");
    json_str(o, mv.s ? mv.s : "");
    if (!nv) sb_printf(o, ",\"v\":\"%s\"", v.s ? v.s : "");
    else {
        sb_printf(o, ",\"nv\":");
        json_str(o, nv);
    }
    if (t.s && t.n) sb_printf(o, ",\"t\":[%s]", t.s);
    if (note[0]) {
        sb_printf(o, ",\"note\":");
        json_str(o, note);
    }
    sb_printf(o, "}");
    if (mv.oom || v.oom || t.oom || title.oom) o->oom = 1;
    free(mv.s), free(v.s), free(t.s), free(title.s);
}

/* ---- the choice -------------------------------------------------------------------------- */
static int cmp_out(const void *a, const void *b) {
    const rg_out_t *x = a, *y = b;
    if (x->cycle != y->cycle) return x->cycle < y->cycle ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Appends game g (kinds) to the output when it fits the budget (named: always). 1 added, 0 not, -1 oom. */
static int emit(rg_t *rg, const rg_game_t *g, uint32_t kinds, int named, db_t *db, const char *base_dir, rg_shard_t *sc,
                pos_t *pos) {
    for (int32_t i = 0; i < rg->n_out; i++)
        if (rg->out[i].id == g->id) return 1; /* a named game that is also the cycle's */
    sb_t j = {0};
    game_json(&j, g, kinds, db, base_dir, sc, pos);
    if (j.oom) {
        free(j.s);
        return -1;
    }
    if (!named && rg->bytes + j.n > RG_BYTE_BUDGET) {
        free(j.s);
        return 0;
    }
    rg_out_t *p = realloc(rg->out, ((size_t)rg->n_out + 1) * sizeof *p);
    if (!p) {
        free(j.s);
        return -1;
    }
    rg->out = p;
    int lowest = 0;
    while (lowest < K_NB && !(kinds & (1u << lowest))) lowest++;
    rg->out[rg->n_out++] = (rg_out_t){g->id, g->cycle, lowest, named, j.s, j.n};
    rg->bytes += j.n + 1;
    return 1;
}

/* The games of cycle c (each once, with every kind it is there for); 1 all in, 0 over budget, -1 oom. */
static int emit_cycle(rg_t *rg, int32_t c, db_t *db, const char *base_dir, rg_shard_t *sc, pos_t *pos) {
    rg_cycle_t *cy = &rg->cycles[c];
    size_t bytes0 = rg->bytes;
    int32_t n0 = rg->n_out;
    for (int k = 1; k < K_NB; k++) {
        const rg_game_t *g = cy->slot[k];
        if (!g) continue;
        int seen = 0;
        for (int j = 1; j < k; j++) seen |= cy->slot[j] && cy->slot[j]->id == g->id;
        if (seen) continue;
        uint32_t kinds = 0;
        for (int j = k; j < K_NB; j++)
            if (cy->slot[j] && cy->slot[j]->id == g->id) kinds |= 1u << j;
        int st = emit(rg, g, kinds, 0, db, base_dir, sc, pos);
        if (st < 0) return -1;
        if (st == 0) { /* the cycle does not fit: none of its games */
            for (int32_t i = n0; i < rg->n_out; i++) free(rg->out[i].json);
            rg->n_out = n0, rg->bytes = bytes0;
            return 0;
        }
    }
    return 1;
}

int rg_finish(rg_t *rg, db_t *db, const char *base_dir, const char *search, char *err, size_t errlen) {
    snprintf(rg->share, sizeof rg->share, "%s",
             !strcmp(search ? search : "", "puct") ? "visit shares" : "search policy (Gumbel: improved policy)");
    db_match_t *ms = NULL;
    int32_t nm = 0;
    if (db_matches_list(db, -1, &ms, &nm) != DB_OK) goto dbfail;
    if (find_named_match_games(rg, db, ms, nm) != 0) goto dbfail;
    for (int32_t i = 0; i < rg->n_named; i++)
        if (!rg->named_game[i]) {
            set_err(err, errlen,
                    "--game %lld: %s holds no such game (self-play games have ids from 1, match "
                    "games from -1)",
                    (long long)rg->named[i], db_path(db));
            free(ms);
            return -1;
        }
    for (int32_t k = 0; k < nm; k++)
        if (ms[k].model_a != 0 && ms[k].cycle >= 0 && ms[k].games > 0) {
            rg_cycle_t *c = cycle_at(rg, ms[k].cycle);
            if (c) c->has_match = 1;
        }
    if (rg->oom) goto oom;
    /* the cycles shown: every one on a short run; the newest and some spread over a long one */
    int32_t *with = malloc(((size_t)rg->n_cycles + 1) * sizeof *with), n_with = 0;
    uint8_t *chosen = calloc((size_t)rg->n_cycles + 1, 1);
    if (!with || !chosen) {
        free(with), free(chosen);
        goto oom;
    }
    for (int32_t c = 0; c < rg->n_cycles; c++) {
        int any = rg->cycles[c].has_match;
        for (int k = 1; k < K_NB; k++) any |= rg->cycles[c].slot[k] != NULL;
        if (any) with[n_with++] = c;
    }
    rg->cycles_with_games = n_with;
    int32_t n_new = n_with < RG_CYCLES_NEWEST ? n_with : RG_CYCLES_NEWEST, rest = n_with - n_new;
    for (int32_t i = 0; i < n_new; i++) chosen[n_with - 1 - i] = 2; /* index into with[] */
    if (rest <= RG_CYCLES_SPREAD)
        for (int32_t i = 0; i < rest; i++) chosen[i] = 1;
    else
        for (int32_t i = 0; i < RG_CYCLES_SPREAD; i++)
            chosen[(int32_t)llround((double)i * (rest - 1) / (RG_CYCLES_SPREAD - 1))] = 1;
    /* the evaluation losses of the chosen cycles */
    for (int32_t k = 0; k < nm; k++) {
        const db_match_t *m = &ms[k];
        if (m->model_a == 0 || m->cycle < 0 || m->cycle >= rg->n_cycles) continue;
        int32_t i = 0;
        while (i < n_with && with[i] != m->cycle) i++;
        if (i == n_with || !chosen[i] || rg->cycles[m->cycle].slot[K_EVLOSS]) continue;
        if (eval_loss(rg, db, m, &rg->cycles[m->cycle].slot[K_EVLOSS]) != 0) {
            free(with), free(chosen);
            goto dbfail;
        }
    }
    free(ms);
    ms = NULL;
    if (rg->oom) {
        free(with), free(chosen);
        goto oom;
    }
    /* the data: named games, then the newest cycles, then the spread ones, newest first, while they fit */
    pos_t *pos = malloc(sizeof *pos);
    rg_shard_t sc = {0, NULL, ""};
    int st = pos ? 0 : -1;
    for (int32_t i = 0; i < rg->n_named && st >= 0; i++)
        st = emit(rg, rg->named_game[i], 1u << K_NAMED, 1, db, base_dir, &sc, pos);
    for (int pass = 2; pass >= 1 && st >= 0; pass--)
        for (int32_t i = n_with - 1; i >= 0 && st >= 0; i--) {
            if (chosen[i] != pass) continue;
            int32_t before = rg->n_out;
            int r = emit_cycle(rg, with[i], db, base_dir, &sc, pos);
            if (r < 0) st = -1;
            else if (r == 0) rg->cycles_left_for_size++;
            else rg->cycles_shown += rg->n_out > before;
        }
    shard_close(sc.s);
    free(pos), free(with), free(chosen);
    if (st < 0) goto oom;
    if (rg->n_out > 1) qsort(rg->out, (size_t)rg->n_out, sizeof *rg->out, cmp_out);
    /* the game shown first: the first named one, else the newest cycle's first */
    rg->first = rg->n_out - 1;
    while (rg->first > 0 && rg->out[rg->first - 1].cycle == rg->out[rg->n_out - 1].cycle) rg->first--;
    for (int32_t i = rg->n_out - 1; i >= 0; i--)
        if (rg->out[i].named) rg->first = i;
    if (rg->first < 0) rg->first = 0;
    return 0;
oom:
    free(ms);
    set_err(err, errlen, "out of memory choosing the games to show");
    return -1;
dbfail:
    free(ms);
    set_err(err, errlen, "%s", db_errmsg(db));
    return -1;
}

int32_t rg_games(const rg_t *rg) { return rg ? rg->n_out : 0; }
size_t rg_bytes(const rg_t *rg) { return rg ? rg->bytes : 0; }

/* ---- the section ------------------------------------------------------------------------- */
static const char *const board_css =
    ".kb{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.kbl{width:440px}.kbr{flex:1;min-width:320px;"
    "max-width:640px}#kg{max-width:440px;width:100%;margin-bottom:6px}#kgame{font-weight:600;margin:2px 0 6px}"
    ".kbtn{display:flex;gap:6px;align-items:center;margin:6px 0}.kbtn button{min-width:40px}#kmove{color:#333;"
    "min-height:20px}svg .kbg{fill:#f3d9a4;stroke:#333;stroke-width:1.5}svg .ksq{fill:transparent;stroke:#8a6d3b;"
    "stroke-width:.6}svg .kto{fill:#f5b971}svg .kfrom{fill:#f8dcb0}svg .kp{fill:#fbeccb;stroke:#6b5530;"
    "stroke-width:.8}svg .kt{font-size:21px;text-anchor:middle;fill:#111}svg .kl{font-size:15px;font-family:"
    "monospace;font-weight:600}svg .kpr{fill:#c0201a}svg .kc{font-size:12px;fill:#555;text-anchor:middle}"
    "svg .kh{font-size:15px;fill:#222}svg .kdot{fill:#333}svg .kvbg{fill:#fafafa;stroke:#ccc}svg .kvgrid{stroke:#eee}"
    "svg .kvmid{stroke:#999;stroke-dasharray:4 3}svg .kvl{fill:none;stroke:#1f77b4;stroke-width:1.6}"
    "svg .kvd{fill:#1f77b4}svg .kvcur{stroke:#d62728;stroke-width:1.5}svg .kvt{font-size:11px;fill:#555}"
    "#ktop{margin:8px 0;font-size:13px}#ktop .ktm{font-family:monospace;padding-left:12px}#ktop .kplayed{"
    "font-weight:600}.kmuted{color:#999}#kmoves{font-size:12px;line-height:1.7;max-height:220px;overflow:auto;position:"
    "relative;"
    "border:1px solid #e4e4e4;border-radius:4px;padding:4px 8px;margin-top:10px}#kmoves "
    "span{margin-right:8px;cursor:pointer;white-space:nowrap}"
    "#kmoves span.kcur{background:#f5b971}";

void rg_render(sb_t *o, const rg_t *rg) {
    sb_printf(o, "<h2>Games on the board</h2>");
    if (!rg || rg->n_out == 0) {
        sb_printf(o, "<p class=\"muted\">no data yet: no game has been recorded</p>");
        return;
    }
    sb_printf(o,
              "<p class=\"sub\">%d games: for each net (by the cycle that made it), the longest of its self-play "
              "games, the first that ended by checkmate, by declaration and by resignation, and the first it lost "
              "in its evaluation",
              rg->n_out);
    if (rg->cycles_with_games > rg->cycles_shown)
        sb_printf(o, "; %d of %d nets (the newest %d, and earlier ones spread over the run%s)", rg->cycles_shown,
                  rg->cycles_with_games, RG_CYCLES_NEWEST,
                  rg->cycles_left_for_size ? ", as many as fit the page's size" : "");
    sb_printf(o, ". <code>report --game ID</code> adds a game. Keys: &larr; &rarr; a move, Home End, PgUp PgDn ten "
                 "moves, &uarr; &darr; the previous or next game, L letters.</p>");
    sb_printf(o, "<style>%s</style>", board_css);
    sb_printf(o, "<div class=\"kb\" id=\"kb\"><div class=\"kbl\"><select id=\"kg\" aria-label=\"game\"></select>"
                 "<div id=\"kgame\"></div><div id=\"knote\" class=\"muted\"></div><svg id=\"kboard\" viewBox=\"0 0 420 "
                 "456\" width=\"420\" height=\"456\" "
                 "role=\"img\" aria-label=\"board\"></svg><div class=\"kbtn\"><button id=\"kfirst\" "
                 "title=\"first (Home)\">|&#x25C0;</button><button id=\"kprev\" title=\"back (&larr;)\">&#x25C0;"
                 "</button><button id=\"knext\" title=\"forward (&rarr;)\">&#x25B6;</button><button id=\"klast\" "
                 "title=\"last (End)\">&#x25B6;|</button><label><input type=\"checkbox\" id=\"klet\"> letters"
                 "</label></div><div id=\"kmove\"></div></div><div class=\"kbr\"><svg id=\"kval\" "
                 "viewBox=\"0 0 420 150\" width=\"420\" height=\"150\" role=\"img\" aria-label=\"value\"></svg>"
                 "<div id=\"ktop\"></div><div id=\"kmoves\"></div></div></div>"
                 "<noscript><p class=\"muted\">the board needs JavaScript</p></noscript>\n");
    sb_printf(o, "<script>window.KOMA_GAMES={\"first\":%d,\"share\":", rg->first);
    json_str(o, rg->share);
    sb_printf(o, ",\"games\":[\n");
    for (int32_t i = 0; i < rg->n_out; i++) sb_printf(o, "%s%s\n", i ? "," : "", rg->out[i].json);
    sb_printf(o, "]};\n%s</script>\n", report_board_js);
}
