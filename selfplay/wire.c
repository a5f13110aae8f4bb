/* wire.c - the self-play job's messages; see wire.h. */
#include "selfplay/wire.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "compat/compat.h"
#include "engine/encode.h"
#include "engine/position.h"
#include "engine/sfen.h"

#define GAME_MAGIC 0x4d47474bu /* "KGGM" */
#define NET_MAGIC 0x544e474bu  /* "KGNT" */
#define SMALL_MAGIC 0x4d53474bu /* "KGSM" */
#define PLAN_MAGIC 0x4e50474bu  /* "KGPN" */
#define PLAN_SHARD_MIN (8 + 4 + 4 + 8 + 1) /* bytes of a shard entry with an empty path */
#define MAX_MOVES 65535        /* a row's ply is 16 bits */

/* ---- little-endian writer and bounded reader ------------------------------------------ */

typedef struct {
    uint8_t *p;
    int64_t n;
} wbuf_t;

static void put(wbuf_t *w, const void *v, int64_t k) {
    if (w->p) memcpy(w->p + w->n, v, (size_t)k);
    w->n += k;
}
static void put_u8(wbuf_t *w, uint8_t v) { put(w, &v, 1); }
static void put_u16(wbuf_t *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}
static void put_u32(wbuf_t *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}
static void put_u64(wbuf_t *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}
static void put_f32(wbuf_t *w, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(w, u);
}

typedef struct {
    const uint8_t *p;
    int64_t n, at;
    int bad; /* read past the end */
} rbuf_t;

static const uint8_t *take(rbuf_t *r, int64_t k) {
    if (r->bad || k < 0 || k > r->n - r->at) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *q = r->p + r->at;
    r->at += k;
    return q;
}
static uint8_t get_u8(rbuf_t *r) {
    const uint8_t *q = take(r, 1);
    return q ? q[0] : 0;
}
static uint16_t get_u16(rbuf_t *r) {
    const uint8_t *q = take(r, 2);
    return q ? (uint16_t)(q[0] | q[1] << 8) : 0;
}
static uint32_t get_u32(rbuf_t *r) {
    const uint8_t *q = take(r, 4);
    uint32_t v = 0;
    for (int i = 0; q && i < 4; i++) v |= (uint32_t)q[i] << (8 * i);
    return v;
}
static uint64_t get_u64(rbuf_t *r) {
    const uint8_t *q = take(r, 8);
    uint64_t v = 0;
    for (int i = 0; q && i < 8; i++) v |= (uint64_t)q[i] << (8 * i);
    return v;
}
static float get_f32(rbuf_t *r) {
    uint32_t u = get_u32(r);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The header every message starts with, and the trailing XXH3 of all before it. */
static void put_head(wbuf_t *w, uint32_t magic) {
    put_u32(w, magic);
    put_u16(w, SP_WIRE_VERSION);
    put_u16(w, 0);
}
static void put_tail(wbuf_t *w) {
    if (w->p) put_u64(w, XXH3_64bits(w->p, (size_t)w->n));
    else w->n += 8;
}
/* Checks magic, version and the trailing hash; r then reads the body. */
static int open_msg(rbuf_t *r, const uint8_t *buf, int64_t len, uint32_t magic, const char *what, char *err,
                    size_t errlen) {
    *r = (rbuf_t){0};
    if (!buf || len < 16) return fail(err, errlen, "%s message: %lld bytes, too short", what, (long long)len);
    rbuf_t t = {buf + len - 8, 8, 0, 0};
    uint64_t want = get_u64(&t), got = XXH3_64bits(buf, (size_t)(len - 8));
    *r = (rbuf_t){buf, len - 8, 0, 0};
    uint32_t m = get_u32(r);
    uint16_t v = get_u16(r);
    get_u16(r);
    if (m != magic) return fail(err, errlen, "%s message: bad magic 0x%08x", what, m);
    if (v != SP_WIRE_VERSION)
        return fail(err, errlen, "%s message: version %u, this build speaks %d", what, v, SP_WIRE_VERSION);
    if (want != got)
        return fail(err, errlen, "%s message: checksum %016llx, the bytes give %016llx (damaged)", what,
                    (unsigned long long)want, (unsigned long long)got);
    return 0;
}

/* ---- games --------------------------------------------------------------------------- */

static void game_body(wbuf_t *w, const sp_record_t *r) {
    put_head(w, GAME_MAGIC);
    put_u32(w, (uint32_t)r->n_moves);
    put_u32(w, (uint32_t)r->n_rows);
    put_u32(w, (uint32_t)r->n_pol);
    put_u8(w, (uint8_t)r->n_gens);
    put_u8(w, (uint8_t)(int8_t)r->result);
    put_u8(w, (uint8_t)r->end);
    put_u8(w, (uint8_t)(r->no_resign | r->false_resign << 1));
    put_u8(w, (uint8_t)r->would_resign);
    put_u32(w, (uint32_t)r->random_plies);
    put_u32(w, (uint32_t)r->full_rows);
    for (int32_t i = 0; i < r->n_gens; i++) {
        put_u64(w, (uint64_t)r->gens[i]);
        put_u32(w, (uint32_t)r->gen_moves[i]);
    }
    for (int32_t i = 0; i < r->n_moves; i++) put_u16(w, r->moves[i]);
    for (int32_t i = 0; i < r->n_rows; i++) {
        put_u16(w, r->rows[i].ply);
        put_f32(w, r->rows[i].root_q);
        put_u32(w, r->rows[i].pol_n);
        put_f32(w, r->rows[i].surprise);
    }
    for (int32_t i = 0; i < r->n_rows; i++) {
        const sp_row_t *x = &r->rows[i];
        for (uint32_t k = 0; k < x->pol_n; k++) {
            put_u16(w, r->pol_label[x->pol_begin + k]);
            put_f32(w, r->pol_prob[x->pol_begin + k]);
        }
    }
    put_tail(w);
}

uint8_t *sp_wire_game_encode(const sp_record_t *r, int64_t *len) {
    wbuf_t w = {NULL, 0};
    game_body(&w, r);
    uint8_t *buf = malloc((size_t)w.n);
    if (!buf) return NULL;
    *len = w.n;
    w = (wbuf_t){buf, 0};
    game_body(&w, r);
    return buf;
}

/* Replays the moves from the start position: every move legal, every row's
 * columns rebuilt where its ply is reached. */
static int replay(sp_record_t *r, char *err, size_t errlen) {
    pos_t *pos = malloc(sizeof *pos);
    if (!pos) return fail(err, errlen, "game message: out of memory");
    pos_set_startpos(pos);
    int32_t row = 0;
    int rc = 0;
    for (int32_t i = 0; i < r->n_moves && rc == 0; i++) {
        move_t m = r->moves[i];
        if (!pos_is_pseudo_legal(pos, m) || !pos_is_legal(pos, m)) {
            char usi[16] = "?";
            if (m != MOVE_NONE) move_to_usi(m, usi);
            rc = fail(err, errlen, "game message: move %d (%s) is not legal here", i + 1, usi);
            break;
        }
        if (row < r->n_rows && r->rows[row].ply == i) {
            sp_row_encode(&r->rows[row], pos);
            r->rows[row].move = m;
            row++;
        }
        pos_do_move(pos, m);
    }
    free(pos);
    return rc;
}

sp_record_t *sp_wire_game_decode(const uint8_t *buf, int64_t len, char *err, size_t errlen) {
    rbuf_t rb = {0};
    if (open_msg(&rb, buf, len, GAME_MAGIC, "game", err, errlen) != 0) return NULL;
    uint32_t n_moves = get_u32(&rb), n_rows = get_u32(&rb), n_pol = get_u32(&rb);
    uint8_t n_gens = get_u8(&rb);
    int8_t result = (int8_t)get_u8(&rb);
    uint8_t end = get_u8(&rb), flags = get_u8(&rb), would = get_u8(&rb);
    uint32_t random_plies = get_u32(&rb), full_rows = get_u32(&rb);
    /* Each count against what the rest of the message can hold. */
    int64_t left = rb.n - rb.at;
    if (rb.bad || n_moves > MAX_MOVES || n_rows > n_moves || n_gens > SP_GENS_MAX ||
        (int64_t)n_moves * 2 + (int64_t)n_rows * 14 + (int64_t)n_pol * 6 + n_gens * 12 != left)
        return fail(err, errlen, "game message: %u moves, %u rows, %u policy entries, %u nets do not fill its %lld bytes",
                    n_moves, n_rows, n_pol, n_gens, (long long)len), NULL;
    if (result < -1 || result > 1 || end >= RULES_END_NB || flags > 3 || would > COLOR_NB || full_rows > n_rows ||
        random_plies > n_moves)
        return fail(err, errlen, "game message: result %d, end %u, flags %u, resigning side %u, %u full rows: out of "
                    "range", result, end, flags, would, full_rows), NULL;
    sp_record_t *r = calloc(1, sizeof *r);
    if (!r) return fail(err, errlen, "game message: out of memory"), NULL;
    r->moves = malloc((size_t)(n_moves ? n_moves : 1) * sizeof *r->moves);
    r->rows = calloc(n_rows ? n_rows : 1, sizeof *r->rows);
    r->pol_label = malloc((size_t)(n_pol ? n_pol : 1) * sizeof *r->pol_label);
    r->pol_prob = malloc((size_t)(n_pol ? n_pol : 1) * sizeof *r->pol_prob);
    if (!r->moves || !r->rows || !r->pol_label || !r->pol_prob) {
        sp_record_free(r);
        return fail(err, errlen, "game message: out of memory for %u moves", n_moves), NULL;
    }
    r->cap_moves = r->n_moves = (int32_t)n_moves;
    r->cap_rows = r->n_rows = (int32_t)n_rows;
    r->cap_pol = r->n_pol = n_pol;
    r->result = result;
    r->end = (rules_end_t)end;
    r->no_resign = flags & 1;
    r->false_resign = (flags >> 1) & 1;
    r->would_resign = would;
    r->random_plies = (int32_t)random_plies;
    r->full_rows = (int32_t)full_rows;
    r->n_gens = n_gens;
    for (int32_t i = 0; i < n_gens; i++) {
        r->gens[i] = (int64_t)get_u64(&rb);
        r->gen_moves[i] = (int32_t)get_u32(&rb);
        if (r->gens[i] <= 0 || r->gen_moves[i] < 0 || r->gen_moves[i] > (int32_t)n_moves) {
            fail(err, errlen, "game message: net %d: generation %lld, %d moves: out of range", i,
                 (long long)r->gens[i], r->gen_moves[i]);
            sp_record_free(r);
            return NULL;
        }
    }
    for (uint32_t i = 0; i < n_moves; i++) r->moves[i] = get_u16(&rb);
    int64_t pol = 0;
    for (uint32_t i = 0; i < n_rows; i++) {
        sp_row_t *w = &r->rows[i];
        w->ply = get_u16(&rb);
        w->root_q = get_f32(&rb);
        w->pol_n = get_u32(&rb);
        w->surprise = get_f32(&rb);
        w->pol_begin = (uint32_t)pol;
        const char *bad = NULL;
        if (w->ply >= n_moves || (i > 0 && w->ply <= r->rows[i - 1].ply)) bad = "ply out of order or past the moves";
        else if (!(w->root_q >= -1.0f && w->root_q <= 1.0f)) bad = "search value outside [-1, 1]";
        else if (w->pol_n > ENC_LABEL_NB || w->pol_n > n_pol - pol) bad = "more policy entries than the message has";
        else if (!(w->surprise == SHARD_SURPRISE_UNKNOWN || (isfinite(w->surprise) && w->surprise >= 0.0f)))
            bad = "policy surprise neither >= 0 nor unknown";
        if (bad) {
            sp_record_free(r);
            return fail(err, errlen, "game message: row %u: %s", i, bad), NULL;
        }
        pol += w->pol_n;
    }
    if (pol != (int64_t)n_pol) {
        sp_record_free(r);
        return fail(err, errlen, "game message: the rows name %lld policy entries, the message has %u", (long long)pol,
                    n_pol), NULL;
    }
    for (uint32_t k = 0; k < n_pol; k++) {
        r->pol_label[k] = get_u16(&rb);
        r->pol_prob[k] = get_f32(&rb);
        if (r->pol_label[k] >= ENC_LABEL_NB || !(r->pol_prob[k] > 0.0f && r->pol_prob[k] <= 1.0f)) {
            fail(err, errlen, "game message: policy entry %u: label %u, probability %g: out of range", k,
                 r->pol_label[k], (double)r->pol_prob[k]);
            sp_record_free(r);
            return NULL;
        }
    }
    KOMA_ASSERT(!rb.bad && rb.at == rb.n); /* the sizes were checked above */
    if (replay(r, err, errlen) != 0) {
        sp_record_free(r);
        return NULL;
    }
    return r;
}

/* ---- nets ------------------------------------------------------------------------------- */

uint8_t *sp_wire_net_encode(int64_t cycle, uint64_t seed, uint64_t xxh3, const uint8_t *file, int64_t file_len,
                            int64_t *len) {
    int64_t n = 8 + 8 + 8 + 8 + 8 + file_len + 8;
    uint8_t *buf = malloc((size_t)n);
    if (!buf) return NULL;
    wbuf_t w = {buf, 0};
    put_head(&w, NET_MAGIC);
    put_u64(&w, (uint64_t)cycle);
    put_u64(&w, seed);
    put_u64(&w, xxh3);
    put_u64(&w, (uint64_t)file_len);
    put(&w, file, file_len);
    put_tail(&w);
    *len = w.n;
    return buf;
}

int sp_wire_net_decode(const uint8_t *buf, int64_t len, int64_t *cycle, uint64_t *seed, uint64_t *xxh3,
                       const uint8_t **file, int64_t *file_len, char *err, size_t errlen) {
    rbuf_t rb = {0};
    if (open_msg(&rb, buf, len, NET_MAGIC, "net", err, errlen) != 0) return -1;
    *cycle = (int64_t)get_u64(&rb);
    *seed = get_u64(&rb);
    *xxh3 = get_u64(&rb);
    uint64_t n = get_u64(&rb);
    if (rb.bad || n != (uint64_t)(rb.n - rb.at) || *cycle < 0)
        return fail(err, errlen, "net message: cycle %lld, %llu file bytes in a %lld-byte message", (long long)*cycle,
                    (unsigned long long)n, (long long)len);
    *file = take(&rb, (int64_t)n);
    *file_len = (int64_t)n;
    uint64_t got = XXH3_64bits(*file, (size_t)n);
    if (got != *xxh3)
        return fail(err, errlen, "net message: model cycle %lld: the file's XXH3 is %016llx, rank 0 registered %016llx",
                    (long long)*cycle, (unsigned long long)got, (unsigned long long)*xxh3);
    return 0;
}

/* ---- small messages ---------------------------------------------------------------------- */

static void put_str(wbuf_t *w, const char *s, size_t cap) {
    size_t n = strnlen(s, cap - 1);
    put_u8(w, (uint8_t)n);
    put(w, s, (int64_t)n);
}
static int get_str(rbuf_t *r, char *out, size_t cap) {
    uint8_t n = get_u8(r);
    const uint8_t *q = take(r, n);
    if (!q || n >= cap) return -1;
    memcpy(out, q, n);
    out[n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 32 || out[i] == 127) out[i] = '?'; /* printed in the log */
    return 0;
}

int64_t sp_wire_hello_encode(const sp_wire_hello_t *h, uint8_t *out) {
    wbuf_t w = {out, 0};
    put_head(&w, SMALL_MAGIC);
    put_u8(&w, SP_TAG_HELLO);
    put_u64(&w, (uint64_t)h->pid);
    put_u32(&w, (uint32_t)h->device);
    put_str(&w, h->host, sizeof h->host);
    put_str(&w, h->backend, sizeof h->backend);
    put_tail(&w);
    return w.n;
}

static int open_small(rbuf_t *r, const uint8_t *buf, int64_t len, int kind, const char *what, char *err,
                      size_t errlen) {
    if (open_msg(r, buf, len, SMALL_MAGIC, what, err, errlen) != 0) return -1;
    if (get_u8(r) != kind) return fail(err, errlen, "%s message: holds another kind", what);
    return 0;
}

int sp_wire_hello_decode(const uint8_t *buf, int64_t len, sp_wire_hello_t *h, char *err, size_t errlen) {
    rbuf_t rb = {0};
    if (open_small(&rb, buf, len, SP_TAG_HELLO, "hello", err, errlen) != 0) return -1;
    memset(h, 0, sizeof *h);
    h->pid = (int64_t)get_u64(&rb);
    h->device = (int32_t)get_u32(&rb);
    if (get_str(&rb, h->host, sizeof h->host) != 0 || get_str(&rb, h->backend, sizeof h->backend) != 0 || rb.bad ||
        rb.at != rb.n)
        return fail(err, errlen, "hello message: malformed (%lld bytes)", (long long)len);
    return 0;
}

int64_t sp_wire_stats_encode(const sp_wire_stats_t *s, uint8_t *out) {
    wbuf_t w = {out, 0};
    put_head(&w, SMALL_MAGIC);
    put_u8(&w, SP_TAG_STATS);
    put_u64(&w, (uint64_t)s->searches);
    put_u64(&w, (uint64_t)s->evaluated);
    put_u64(&w, (uint64_t)s->batches);
    put_u64(&w, (uint64_t)s->games);
    put_u64(&w, (uint64_t)s->generation);
    put_u32(&w, (uint32_t)s->active);
    put_tail(&w);
    return w.n;
}

int sp_wire_stats_decode(const uint8_t *buf, int64_t len, sp_wire_stats_t *s, char *err, size_t errlen) {
    rbuf_t rb = {0};
    if (open_small(&rb, buf, len, SP_TAG_STATS, "stats", err, errlen) != 0) return -1;
    s->searches = (int64_t)get_u64(&rb);
    s->evaluated = (int64_t)get_u64(&rb);
    s->batches = (int64_t)get_u64(&rb);
    s->games = (int64_t)get_u64(&rb);
    s->generation = (int64_t)get_u64(&rb);
    s->active = (int32_t)get_u32(&rb);
    if (rb.bad || rb.at != rb.n || s->searches < 0 || s->evaluated < 0 || s->batches < 0 || s->games < 0 ||
        s->active < 0)
        return fail(err, errlen, "stats message: malformed (%lld bytes)", (long long)len);
    return 0;
}

int64_t sp_wire_int_encode(int32_t v, uint8_t *out) {
    wbuf_t w = {out, 0};
    put_head(&w, SMALL_MAGIC);
    put_u8(&w, 0);
    put_u32(&w, (uint32_t)v);
    put_tail(&w);
    return w.n;
}

int sp_wire_int_decode(const uint8_t *buf, int64_t len, int32_t *v, char *err, size_t errlen) {
    rbuf_t rb = {0};
    if (open_small(&rb, buf, len, 0, "order", err, errlen) != 0) return -1;
    *v = (int32_t)get_u32(&rb);
    if (rb.bad || rb.at != rb.n) return fail(err, errlen, "order message: malformed (%lld bytes)", (long long)len);
    return 0;
}

/* ---- training plans and reports --------------------------------------------------------- */

static void plan_body(wbuf_t *w, const train_plan_t *p) {
    put_head(w, PLAN_MAGIC);
    put_u64(w, (uint64_t)p->cycle);
    put_u64(w, (uint64_t)p->first);
    put_u64(w, (uint64_t)p->end);
    put_u64(w, (uint64_t)p->want);
    put_u32(w, (uint32_t)p->batch);
    put_u64(w, p->seed);
    put_u64(w, (uint64_t)p->model_cycle);
    put_u64(w, (uint64_t)p->model_steps);
    put_str(w, p->model_rel, sizeof p->model_rel);
    put_str(w, p->model_xxh3, sizeof p->model_xxh3);
    put_u32(w, (uint32_t)p->nshards);
    for (int32_t i = 0; i < p->nshards; i++) {
        const db_shard_t *s = &p->shards[i];
        put_u64(w, (uint64_t)s->id);
        put_u32(w, (uint32_t)s->cycle);
        put_u32(w, (uint32_t)s->features_version);
        put_u64(w, (uint64_t)s->rows);
        put_str(w, s->path, sizeof s->path);
    }
    put_tail(w);
}

uint8_t *sp_wire_plan_encode(const train_plan_t *p, int64_t *len) {
    if (p->nshards < 0 || strlen(p->model_rel) > 255) return NULL;
    for (int32_t i = 0; i < p->nshards; i++)
        if (strlen(p->shards[i].path) > 255) return NULL;
    wbuf_t w = {NULL, 0};
    plan_body(&w, p); /* the size first */
    uint8_t *buf = malloc((size_t)w.n);
    if (!buf) return NULL;
    w = (wbuf_t){buf, 0};
    plan_body(&w, p);
    *len = w.n;
    return buf;
}

/* A run-relative path the follower may open: not absolute, no ".." part. */
static int path_ok(const char *s) {
    if (!s[0] || s[0] == '/' || s[0] == '\\' || strchr(s, ':')) return 0;
    for (const char *q = s; *q; q++)
        if (q[0] == '.' && q[1] == '.' && (q == s || q[-1] == '/' || q[-1] == '\\') &&
            (q[2] == 0 || q[2] == '/' || q[2] == '\\'))
            return 0;
    return 1;
}

void sp_wire_plan_free(sp_wire_plan_t *p) {
    if (!p) return;
    free(p->shards);
    p->shards = NULL;
}

int sp_wire_plan_decode(const uint8_t *buf, int64_t len, sp_wire_plan_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    rbuf_t rb = {0};
    if (open_msg(&rb, buf, len, PLAN_MAGIC, "plan", err, errlen) != 0) return -1;
    train_plan_t *p = &out->plan;
    p->cycle = (int64_t)get_u64(&rb);
    p->first = (int64_t)get_u64(&rb);
    p->end = (int64_t)get_u64(&rb);
    p->want = (int64_t)get_u64(&rb);
    p->batch = (int32_t)get_u32(&rb);
    p->seed = get_u64(&rb);
    p->model_cycle = (int64_t)get_u64(&rb);
    p->model_steps = (int64_t)get_u64(&rb);
    if (get_str(&rb, p->model_rel, sizeof p->model_rel) != 0 || get_str(&rb, p->model_xxh3, sizeof p->model_xxh3) != 0)
        return fail(err, errlen, "plan message: malformed model (%lld bytes)", (long long)len);
    uint32_t n = get_u32(&rb);
    if (rb.bad || p->cycle < 0 || p->first < 0 || p->end < p->first || p->want < 0 || p->batch < 1 ||
        p->model_cycle < 0 || p->model_cycle >= p->cycle || p->model_steps < 0 || !path_ok(p->model_rel) ||
        n > (uint64_t)(rb.n - rb.at) / PLAN_SHARD_MIN)
        return fail(err, errlen, "plan message: malformed (cycle %lld, steps [%lld, %lld), batch %d, model %lld '%s', "
                    "%u shards in %lld bytes)", (long long)p->cycle, (long long)p->first, (long long)p->end,
                    (int)p->batch, (long long)p->model_cycle, p->model_rel, n, (long long)len);
    out->shards = calloc(n ? n : 1, sizeof *out->shards);
    if (!out->shards) return fail(err, errlen, "plan message: out of memory for %u shards", n);
    for (uint32_t i = 0; i < n; i++) {
        db_shard_t *s = &out->shards[i];
        s->id = (int64_t)get_u64(&rb);
        s->cycle = (int32_t)get_u32(&rb);
        s->features_version = (int32_t)get_u32(&rb);
        s->rows = (int64_t)get_u64(&rb);
        if (get_str(&rb, s->path, sizeof s->path) != 0 || rb.bad || s->rows < 0 || s->cycle < 0 || !path_ok(s->path)) {
            fail(err, errlen, "plan message: shard %u of %u is malformed ('%s')", i + 1, n, s->path);
            sp_wire_plan_free(out);
            return -1;
        }
    }
    if (rb.at != rb.n) {
        sp_wire_plan_free(out);
        return fail(err, errlen, "plan message: %lld bytes left over", (long long)(rb.n - rb.at));
    }
    p->shards = out->shards;
    p->nshards = (int32_t)n;
    return 0;
}

int64_t sp_wire_trained_encode(const sp_wire_trained_t *t, uint8_t *out) {
    wbuf_t w = {out, 0};
    put_head(&w, SMALL_MAGIC);
    put_u8(&w, SP_TAG_TRAINED);
    put_u64(&w, (uint64_t)t->cycle);
    put_u64(&w, (uint64_t)t->steps);
    put_u64(&w, (uint64_t)t->positions);
    put_u64(&w, t->weights);
    put_u64(&w, (uint64_t)t->ms);
    put_u32(&w, (uint32_t)t->status);
    put_u8(&w, (uint8_t)(t->loaded != 0));
    size_t n = strnlen(t->text, sizeof t->text - 1);
    put_u16(&w, (uint16_t)n);
    put(&w, t->text, (int64_t)n);
    put_tail(&w);
    return w.n;
}

int sp_wire_trained_decode(const uint8_t *buf, int64_t len, sp_wire_trained_t *t, char *err, size_t errlen) {
    rbuf_t rb = {0};
    if (open_small(&rb, buf, len, SP_TAG_TRAINED, "trained", err, errlen) != 0) return -1;
    memset(t, 0, sizeof *t);
    t->cycle = (int64_t)get_u64(&rb);
    t->steps = (int64_t)get_u64(&rb);
    t->positions = (int64_t)get_u64(&rb);
    t->weights = get_u64(&rb);
    t->ms = (int64_t)get_u64(&rb);
    t->status = (int32_t)get_u32(&rb);
    t->loaded = get_u8(&rb);
    uint16_t n = get_u16(&rb);
    const uint8_t *q = take(&rb, n);
    if (!q || n >= sizeof t->text || rb.bad || rb.at != rb.n || t->cycle < 0 || t->steps < 0 || t->status < 0 ||
        t->status > SP_TRAINED_FAILED)
        return fail(err, errlen, "trained message: malformed (%lld bytes)", (long long)len);
    memcpy(t->text, q, n);
    for (uint16_t i = 0; i < n; i++)
        if ((unsigned char)t->text[i] < 32 || t->text[i] == 127) t->text[i] = ' ';
    return 0;
}
