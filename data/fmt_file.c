/* fmt_file.c - hcpe, hcpe3 and psv files read into checked games, and their
 * records written (data/fmt_file.h). */
#include "data/fmt_file.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "data/shard.h"
#include "engine/movegen.h"

const char *fmt_kind_name(fmt_kind_t k) {
    static const char *const N[FMT_NB] = {"hcpe", "hcpe3", "psv"};
    return (unsigned)k < FMT_NB ? N[k] : "?";
}

int fmt_kind_parse(const char *name, fmt_kind_t *out) {
    for (int k = 0; k < FMT_NB; k++)
        if (name && strcmp(name, fmt_kind_name((fmt_kind_t)k)) == 0) {
            *out = (fmt_kind_t)k;
            return 0;
        }
    return -1;
}

static int ends_with(const char *s, const char *ext) {
    size_t n = strlen(s), k = strlen(ext);
    if (n <= k) return 0;
    for (size_t j = 0; j < k; j++) {
        char c = s[n - k + j];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != ext[j]) return 0;
    }
    return 1;
}

int fmt_kind_guess(const char *path, fmt_kind_t *out) {
    if (!path) return -1;
    if (ends_with(path, ".hcpe3")) *out = FMT_HCPE3;
    else if (ends_with(path, ".hcpe")) *out = FMT_HCPE;
    else if (ends_with(path, ".psv") || ends_with(path, ".bin")) *out = FMT_PSV;
    else return -1;
    return 0;
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void wr16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* ---- reading ------------------------------------------------------------------------------ */
typedef struct {
    const char *name;
    const fmt_sink_t *sink;
    pos_t *pos;
    char sfen_start[SFEN_MAX_LEN];
    /* the game being read (grown as needed) */
    move_t *moves;
    float *values;
    int16_t *evals;
    uint32_t *cand_begin;
    move_t *cand_moves;
    uint16_t *cand_visits;
    int64_t cap_moves, cap_cands;
    int oom;
} reader_t;

static void reject(reader_t *r, int64_t record, int64_t offset, int32_t move, rec_error_t code, const char *fmt, ...) {
    if (!r->sink->reject) return;
    rec_reject_t rj;
    memset(&rj, 0, sizeof rj);
    rj.game = (int32_t)(record > INT32_MAX ? INT32_MAX : record);
    rj.move = move;
    rj.code = code;
    char what[REC_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (move > 0)
        snprintf(rj.msg, sizeof rj.msg, "%.200s: record %lld (byte %lld): move %d: %.250s", r->name, (long long)record,
                 (long long)offset, (int)move, what);
    else
        snprintf(rj.msg, sizeof rj.msg, "%.200s: record %lld (byte %lld): %.250s", r->name, (long long)record,
                 (long long)offset, what);
    r->sink->reject(r->sink->user, &rj);
}

static int grow(reader_t *r, int64_t moves, int64_t cands) {
    if (moves + 1 > r->cap_moves) {
        int64_t cap = moves + 1 > 2 * r->cap_moves ? moves + 1 : 2 * r->cap_moves;
        if (cap < 64) cap = 64;
        move_t *m = realloc(r->moves, (size_t)cap * sizeof *m);
        if (m) r->moves = m;
        float *v = realloc(r->values, (size_t)cap * sizeof *v);
        if (v) r->values = v;
        int16_t *e = realloc(r->evals, (size_t)cap * sizeof *e);
        if (e) r->evals = e;
        uint32_t *b = realloc(r->cand_begin, (size_t)(cap + 1) * sizeof *b);
        if (b) r->cand_begin = b;
        if (!m || !v || !e || !b) return -1;
        r->cap_moves = cap;
    }
    if (cands > r->cap_cands) {
        int64_t cap = cands > 2 * r->cap_cands ? cands : 2 * r->cap_cands;
        if (cap < 1024) cap = 1024;
        move_t *m = realloc(r->cand_moves, (size_t)cap * sizeof *m);
        if (m) r->cand_moves = m;
        uint16_t *v = realloc(r->cand_visits, (size_t)cap * sizeof *v);
        if (v) r->cand_visits = v;
        if (!m || !v) return -1;
        r->cap_cands = cap;
    }
    return 0;
}

/* The position of a 32-byte code into r->pos (rules checked by the SFEN
 * reader) and r->sfen_start ("startpos" for the initial position at ply 1).
 * NULL, or what is wrong. */
static const char *set_position(reader_t *r, fmt_pack_t k, const uint8_t *code, int32_t ply, char *why, size_t whylen) {
    fmt_board_t b;
    const char *e = fmt_pack_decode(k, code, &b);
    if (e) return e;
    pos_t *p = r->pos;
    if (sfen_set_position(p, b.board, b.hand, (color_t)b.side, ply, why, whylen) != SFEN_OK) return why;
    char text[SFEN_MAX_LEN];
    sfen_write(p, text, sizeof text);
    static const char START[] = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";
    snprintf(r->sfen_start, sizeof r->sfen_start, "%s", strcmp(text, START) == 0 ? "startpos" : text);
    return NULL;
}

/* Result and reason of the hcpe/hcpe3 byte; -1 for a winner code of 3. */
static int result_of_byte(uint8_t byte, int32_t *result, db_reason_t *reason) {
    int w = byte & 3;
    if (w == 3) return -1;
    *result = w == 0 ? DB_RESULT_DRAW : w == 1 ? DB_RESULT_BLACK_WIN : DB_RESULT_WHITE_WIN;
    if (byte & 4) *reason = w ? DB_REASON_PERPETUAL_CHECK : DB_REASON_SENNICHITE;
    else if (byte & 8) *reason = DB_REASON_DECLARATION;
    else if (byte & 16) *reason = DB_REASON_MAX_PLY;
    else *reason = w ? DB_REASON_RESIGN : DB_REASON_ABORT;
    return 0;
}

uint8_t fmt_result_byte(int32_t result, db_reason_t reason) {
    uint8_t b = result > 0 ? 1 : result < 0 ? 2 : 0;
    if (reason == DB_REASON_SENNICHITE || reason == DB_REASON_PERPETUAL_CHECK) b |= 4;
    else if (reason == DB_REASON_DECLARATION) b |= 8;
    else if (reason == DB_REASON_MAX_PLY) b |= 16;
    return b;
}

static int deliver(reader_t *r, fmt_game_t *g) {
    g->moves = r->moves;
    g->values = r->values;
    g->evals = r->evals;
    snprintf(g->start_sfen, sizeof g->start_sfen, "%s", r->sfen_start);
    return r->sink->game(r->sink->user, g);
}

/* hcpe and psv: one position a record. */
static int parse_positions(reader_t *r, const uint8_t *d, size_t len, fmt_kind_t k) {
    const size_t rec = k == FMT_HCPE ? FMT_HCPE_BYTES : FMT_PSV_BYTES;
    if (grow(r, 1, 0) != 0) return -1;
    char why[REC_MSG_MAX];
    size_t n = len / rec;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = d + i * rec;
        int64_t record = (int64_t)i + 1, off = (int64_t)(i * rec);
        fmt_game_t g;
        memset(&g, 0, sizeof g);
        g.record = record;
        g.offset = off;
        int16_t eval = (int16_t)rd16(p + 32);
        uint16_t m16 = rd16(p + 34);
        int32_t ply = 1;
        move_t m;
        if (k == FMT_HCPE) {
            g.result_byte = p[36];
            if (result_of_byte(p[36], &g.result, &g.reason) != 0) {
                reject(r, record, off, 0, REC_ERR_FORMAT, "gameResult %u is no result", (unsigned)p[36]);
                continue;
            }
            m = fmt_move_from_cshogi(m16);
        } else {
            ply = rd16(p + 36);
            int8_t gr = (int8_t)p[38];
            if (ply < 1) ply = 1;
            if (gr < -1 || gr > 1) {
                reject(r, record, off, 0, REC_ERR_FORMAT, "game_result %d is not -1, 0 or 1", (int)gr);
                continue;
            }
            g.result_byte = (uint8_t)gr;
            g.reason = gr ? DB_REASON_RESIGN : DB_REASON_ABORT;
            g.result = gr; /* side to move's; turned to Black's below */
            m = (move_t)m16;
        }
        const char *e = set_position(r, k == FMT_HCPE ? FMT_PACK_HCP : FMT_PACK_PSFEN, p, ply, why, sizeof why);
        if (e) {
            reject(r, record, off, 0, REC_ERR_POSITION, "bad position: %s", e);
            continue;
        }
        if (k == FMT_PSV && pos_side_to_move(r->pos) == COLOR_WHITE) g.result = -g.result;
        if (!move_is_ok(m) || !pos_is_valid_move(r->pos, m)) {
            char mt[MOVE_USI_MAX + 8];
            move_to_usi(m, mt);
            reject(r, record, off, 1, REC_ERR_ILLEGAL, "move16 0x%04x (%s) is not legal in %s", (unsigned)m16, mt,
                   r->sfen_start);
            continue;
        }
        r->moves[0] = m;
        r->evals[0] = eval;
        r->values[0] = k == FMT_HCPE ? fmt_eval_to_value(eval, FMT_EVAL_DLSHOGI, FMT_EVAL_DLSHOGI_MAX)
                                     : fmt_eval_to_value(eval, FMT_EVAL_YANEURAOU, FMT_EVAL_YANEURAOU_MAX);
        g.n_moves = 1;
        if (deliver(r, &g)) return 1;
    }
    if (len % rec)
        reject(r, (int64_t)n + 1, (int64_t)(n * rec), 0, REC_ERR_TRUNCATED,
               "the file ends %d bytes into a %d-byte record", (int)(len % rec), (int)rec);
    return 0;
}

static int parse_hcpe3(reader_t *r, const uint8_t *d, size_t len) {
    size_t off = 0;
    char why[REC_MSG_MAX];
    for (int64_t record = 1; off < len; record++) {
        size_t start = off;
        if (len - off < FMT_HCPE3_HEAD) {
            reject(r, record, (int64_t)off, 0, REC_ERR_TRUNCATED,
                   "the file ends inside a game's 36-byte head: its last %lld bytes are not read", (long long)(len - off));
            return 0;
        }
        const uint8_t *h = d + off;
        int32_t n = rd16(h + 32);
        uint8_t rb = h[34];
        off += FMT_HCPE3_HEAD;
        /* the record's extent first, so that a bad game is skipped whole */
        int64_t ncand = 0;
        int cut = 0;
        for (int32_t i = 0; i < n; i++) {
            if (len - off < FMT_HCPE3_MOVE) {
                cut = 1;
                break;
            }
            uint16_t c = rd16(d + off + 4);
            off += FMT_HCPE3_MOVE;
            if ((len - off) / FMT_HCPE3_CAND < c) {
                cut = 1;
                break;
            }
            off += (size_t)c * FMT_HCPE3_CAND;
            ncand += c;
        }
        if (cut) {
            /* A game whose moves or candidates run past the end: a cut file, or one damaged count that makes
             * every later record unreadable. Either way the rest is lost: say how much. */
            reject(r, record, (int64_t)start, 0, REC_ERR_TRUNCATED,
                   "the file ends inside a game of %d moves (or a count in it is damaged): the %lld bytes from byte "
                   "%lld to the end (%.1f%% of the file) are not read", (int)n, (long long)(len - start),
                   (long long)start, 100.0 * (double)(len - start) / (double)len);
            return 0;
        }
        fmt_game_t g;
        memset(&g, 0, sizeof g);
        g.record = record;
        g.offset = (int64_t)start;
        g.result_byte = rb;
        if (result_of_byte(rb, &g.result, &g.reason) != 0) {
            reject(r, record, (int64_t)start, 0, REC_ERR_FORMAT, "result %u is no result", (unsigned)rb);
            continue;
        }
        if (n > REC_MOVES_MAX) {
            reject(r, record, (int64_t)start, 0, REC_ERR_TOO_LONG, "%d moves (at most %d)", (int)n, REC_MOVES_MAX);
            continue;
        }
        if (grow(r, n, ncand) != 0) {
            reject(r, record, (int64_t)start, 0, REC_ERR_MEMORY, "out of memory");
            return -1;
        }
        const char *e = set_position(r, FMT_PACK_HCP, h, 1, why, sizeof why);
        if (e) {
            reject(r, record, (int64_t)start, 0, REC_ERR_POSITION, "bad start position: %s", e);
            continue;
        }
        size_t q = start + FMT_HCPE3_HEAD;
        uint32_t nc = 0;
        int bad = 0;
        for (int32_t i = 0; i < n && !bad; i++) {
            uint16_t m16 = rd16(d + q), c = rd16(d + q + 4);
            int16_t eval = (int16_t)rd16(d + q + 2);
            q += FMT_HCPE3_MOVE;
            r->cand_begin[i] = nc;
            uint32_t sum = 0;
            for (uint16_t j = 0; j < c && !bad; j++, q += FMT_HCPE3_CAND) {
                uint16_t c16 = rd16(d + q);
                move_t cm = fmt_move_from_cshogi(c16);
                if (!move_is_ok(cm) || !pos_is_valid_move(r->pos, cm)) {
                    reject(r, record, (int64_t)start, i + 1, REC_ERR_ILLEGAL,
                           "candidate %d: move16 0x%04x is not legal", (int)j + 1, (unsigned)c16);
                    bad = 1;
                }
                r->cand_moves[nc] = cm;
                r->cand_visits[nc] = rd16(d + q + 2);
                sum += r->cand_visits[nc++];
            }
            if (bad) break;
            if (c > 0 && sum == 0) {
                reject(r, record, (int64_t)start, i + 1, REC_ERR_FORMAT, "%d candidates with no visits", (int)c);
                bad = 1;
                break;
            }
            move_t m = fmt_move_from_cshogi(m16);
            if (!move_is_ok(m) || !pos_is_valid_move(r->pos, m)) {
                char mt[MOVE_USI_MAX + 8];
                move_to_usi(m, mt);
                reject(r, record, (int64_t)start, i + 1, REC_ERR_ILLEGAL, "move16 0x%04x (%s) is not legal", (unsigned)m16,
                       mt);
                bad = 1;
                break;
            }
            r->moves[i] = m;
            r->evals[i] = eval;
            r->values[i] = fmt_eval_to_value(eval, FMT_EVAL_DLSHOGI, FMT_EVAL_DLSHOGI_MAX);
            pos_do_move(r->pos, m);
        }
        if (bad) continue;
        r->cand_begin[n] = nc;
        if (g.reason == DB_REASON_RESIGN || g.reason == DB_REASON_ABORT) {
            if (n > 0 && movegen_count_legal(r->pos) == 0) g.reason = DB_REASON_CHECKMATE;
        }
        g.n_moves = n;
        g.cand_begin = r->cand_begin;
        g.cand_moves = r->cand_moves;
        g.cand_visits = r->cand_visits;
        if (deliver(r, &g)) return 1;
    }
    return 0;
}

int fmt_parse(const char *name, const void *data, size_t len, fmt_kind_t k, const fmt_sink_t *sink) {
    reader_t r;
    memset(&r, 0, sizeof r);
    r.name = name ? name : "<input>";
    r.sink = sink;
    r.pos = malloc(sizeof *r.pos);
    int rc;
    if (!r.pos) {
        rc = -1;
    } else if (k == FMT_HCPE3) {
        rc = parse_hcpe3(&r, data, len);
    } else {
        rc = parse_positions(&r, data, len, k);
    }
    if (rc < 0 && !r.pos) reject(&r, 0, 0, 0, REC_ERR_MEMORY, "out of memory");
    free(r.pos);
    free(r.moves);
    free(r.values);
    free(r.evals);
    free(r.cand_begin);
    free(r.cand_moves);
    free(r.cand_visits);
    return rc;
}

int fmt_parse_file(const char *path, fmt_kind_t k, const fmt_sink_t *sink) {
    compat_map_t map;
    char err[1024];
    if (compat_map_file(path, &map, err, sizeof err) != 0) {
        if (sink->reject) {
            rec_reject_t rj;
            memset(&rj, 0, sizeof rj);
            rj.code = REC_ERR_IO;
            snprintf(rj.msg, sizeof rj.msg, "%.500s", err);
            sink->reject(sink->user, &rj);
        }
        return 0;
    }
    int rc = fmt_parse(path, map.data, map.size, k, sink);
    compat_unmap_file(&map);
    return rc;
}

/* ---- writing -------------------------------------------------------------------------------- */
void fmt_board_of_pos(const pos_t *pos, fmt_board_t *b) {
    memcpy(b->board, pos->board, sizeof b->board);
    b->hand[0] = pos->hand[0];
    b->hand[1] = pos->hand[1];
    b->side = (uint8_t)pos->side;
}

int fmt_hcpe_record(const pos_t *pos, float value, move_t m, uint8_t result_byte, uint8_t out[FMT_HCPE_BYTES]) {
    fmt_board_t b;
    fmt_board_of_pos(pos, &b);
    if (fmt_pack_encode(FMT_PACK_HCP, &b, out) != 0) return -1;
    wr16(out + 32, (uint16_t)(int16_t)fmt_value_to_eval(value, FMT_EVAL_DLSHOGI, FMT_EVAL_DLSHOGI_MAX));
    wr16(out + 34, fmt_move_to_cshogi(m));
    out[36] = result_byte;
    out[37] = 0;
    return 0;
}

int fmt_psv_record(const pos_t *pos, float value, move_t m, int32_t result, uint8_t out[FMT_PSV_BYTES]) {
    fmt_board_t b;
    fmt_board_of_pos(pos, &b);
    if (fmt_pack_encode(FMT_PACK_PSFEN, &b, out) != 0) return -1;
    int32_t ply = pos_game_ply(pos);
    wr16(out + 32, (uint16_t)(int16_t)fmt_value_to_eval(value, FMT_EVAL_YANEURAOU, FMT_EVAL_YANEURAOU_MAX));
    wr16(out + 34, m);
    wr16(out + 36, (uint16_t)(ply > UINT16_MAX ? UINT16_MAX : ply));
    out[38] = (uint8_t)(int8_t)(result > 0 ? 1 : result < 0 ? -1 : 0);
    out[39] = 0;
    return 0;
}

int fmt_hcpe3_head(const pos_t *start, int32_t n_moves, uint8_t result_byte, uint8_t out[FMT_HCPE3_HEAD]) {
    fmt_board_t b;
    fmt_board_of_pos(start, &b);
    if (n_moves < 0 || n_moves > UINT16_MAX || fmt_pack_encode(FMT_PACK_HCP, &b, out) != 0) return -1;
    wr16(out + 32, (uint32_t)n_moves);
    out[34] = result_byte;
    out[35] = 0;
    return 0;
}

/* The smallest counts (smallest count k = 1, 2, ... kmax) whose float
 * quotients are prob exactly; 0 and visits, or -1 when none. */
static int visits_exact(const float *prob, int32_t n, int32_t kmax, uint16_t *visits) {
    float pmin = 0;
    for (int32_t i = 0; i < n; i++)
        if (prob[i] > 0 && (pmin == 0 || prob[i] < pmin)) pmin = prob[i];
    if (pmin <= 0) return -1;
    for (int32_t k = 1; k <= kmax; k++) {
        double total = (double)k / pmin;
        if (total > 65535.0 * n) break;
        uint32_t sum = 0;
        int ok = 1;
        for (int32_t i = 0; i < n && ok; i++) {
            double v = prob[i] > 0 ? floor((double)prob[i] * total + 0.5) : 0;
            if (v > 65535 || (prob[i] > 0 && v < 1)) ok = 0;
            else sum += (uint32_t)v, visits[i] = (uint16_t)v;
        }
        for (int32_t i = 0; i < n && ok; i++)
            if ((float)visits[i] / (float)sum != prob[i]) ok = 0;
        if (ok) return 0;
    }
    return -1;
}

static uint32_t gcd32(uint32_t a, uint32_t b) {
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void fmt_visits_of_probs(const float *prob, int32_t n, uint16_t *visits) {
    float pmax = 0;
    for (int32_t i = 0; i < n; i++)
        if (prob[i] > pmax) pmax = prob[i];
    if (!(pmax > 0)) {
        for (int32_t i = 0; i < n; i++) visits[i] = 0;
        return;
    }
    if (visits_exact(prob, n, 1024, visits) == 0) return; /* a target made from visits: those visits */
    /* any other target: counts proportional to it (the largest 10000), in lowest terms, then the
     * smallest counts with the same float quotients, which is what importing and exporting them
     * again gives (so a second export is the same bytes) */
    uint32_t g = 0, sum = 0;
    for (int32_t i = 0; i < n; i++) {
        double v = prob[i] > 0 ? floor((double)prob[i] / pmax * 10000.0 + 0.5) : 0;
        visits[i] = (uint16_t)(prob[i] > 0 && v < 1 ? 1 : v);
        g = gcd32(visits[i], g);
    }
    for (int32_t i = 0; i < n; i++) sum += visits[i] /= (uint16_t)g;
    float q[SHARD_LABEL_NB];
    if (n > SHARD_LABEL_NB) return;
    for (int32_t i = 0; i < n; i++) q[i] = (float)visits[i] / (float)sum;
    uint16_t w[SHARD_LABEL_NB];
    if (visits_exact(q, n, 10000, w) == 0) memcpy(visits, w, (size_t)n * sizeof *w);
}
