/* window.c - the training window: shard cache, window choice, sampling. See window.h. */
#include "train/window.h"
#include "compat/err.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/runlog.h"
#include "data/shard_pos.h"
#include "engine/encode.h"

/* One shard known to the cache. */
typedef struct {
    int64_t id;             /* shards.id */
    char rel[DB_PATH_MAX];  /* run-relative path */
    shard_t *sh;            /* NULL when bad */
    int bad;                /* reported once, never retried */
    int used;               /* in the current window */
    void *dev;              /* resident: the columns in the backend's memory (one allocation), else NULL */
    int64_t dev_bytes;
    nn_rows_src_t cols;     /* resident: where each column starts in dev */
    float *q;               /* (rows) the value column trained on when q_lambda > 0 (shard_q_lambda), else NULL */
    float *prob;            /* (nnz) the policy targets trained on when policy_temp != 1 (temper_policy), else NULL */
    uint16_t *label;        /* (rows) each row's played move's label (train_move_labels) */
} ent_t;

/* A contiguous piece of the window: rows [begin, begin + count) of one shard. */
typedef struct {
    const shard_t *sh;      /* NULL until a batch first draws from it (lazy opening: seg_open) */
    const float *q;         /* the shard's ent_t.q (NULL: its root_q column) */
    const float *prob;      /* the shard's ent_t.prob (NULL: its policy_prob column) */
    const uint16_t *label;  /* the shard's ent_t.label */
    int64_t id;             /* shards.id */
    int64_t begin, count;
    int64_t prefix;         /* window rows before this segment */
    db_shard_t row;         /* its koma.db row: path and rows, to open it when first drawn */
} seg_t;

typedef struct {
    int32_t seg;
    int64_t row;
} pick_t;

struct train_window {
    char run_dir[1024];
    shard_format_t fmt;
    runlog_sink_t log;      /* the caller's, else stderr after "train: " */
    float q_lambda;         /* train_window_set_q_lambda (0: the root_q column as stored) */
    float policy_temp;      /* train_window_set_policy_temp (1: the policy_prob column as stored) */
    float surprise_weight;  /* train_window_set_surprise_weight (0: uniform sampling) */
    double *cum;            /* (cap_cum) surprise weighting: cumulative weight of window rows [0, g], else unused */
    int64_t cap_cum;
    int weighted;           /* the last select found surprises to weight by: pick_rows draws by cum */
    int eager;              /* open (map, verify, check) every shard at select (the default), else when a batch
                               first draws from it (train_window_set_eager(w, 0): train --from-games) */
    int selected;           /* train_window_select has run */
    int epochs;             /* train_window_set_epoch_order: keys from train_window_key are epoch positions */
    uint64_t epoch_seed;
    ent_t *ents;            /* sorted by id */
    int32_t nents, capents;
    seg_t *segs;            /* oldest first */
    int32_t nsegs, capsegs;
    int64_t positions;
    pick_t *picks;          /* (cap_picks) sampling scratch */
    int64_t *rows;          /* (cap_picks) */
    int32_t cap_picks, npicks;
    /* Resident rows (train_window_resident): NULL be = the host route. */
    nn_backend_t *be;
    int64_t dev_cap, dev_bytes;  /* bytes allowed and held by the resident shards */
    nn_rows_src_t *srcs;    /* (cap_srcs) device: segs[i]'s shard columns at i */
    int32_t cap_srcs;
    nn_row_ref_t *refs_host, *refs_dev; /* (2 cap_refs) a batch's rows, then their opponent replies' rows */
    uint32_t *offs_host;    /* (2 (cap_refs + 1)) its policy offsets, then its opponent-reply offsets */
    int32_t cap_refs;
    char dev_why[DB_PATH_MAX + 256]; /* why residency ended */
};

static int resident_update(train_window_t *w);

train_window_t *train_window_new(const char *run_dir, const shard_format_t *fmt, train_log_fn log,
                                 void *log_user, char *err, size_t errlen) {
    if (!run_dir || !fmt || strlen(run_dir) >= sizeof(((train_window_t *)0)->run_dir)) {
        set_err(err, errlen, "training window: bad run directory");
        return NULL;
    }
    train_window_t *w = calloc(1, sizeof *w);
    if (!w) {
        set_err(err, errlen, "%s: training window: out of memory", run_dir);
        return NULL;
    }
    snprintf(w->run_dir, sizeof w->run_dir, "%s", run_dir);
    w->fmt = *fmt;
    w->policy_temp = 1.0f;
    w->eager = 1; /* train --from-games turns it off (train_window_set_eager) */
    w->log = runlog_sink(log, log_user, "train: ");
    return w;
}

int train_window_set_q_lambda(train_window_t *w, float lambda, char *err, size_t errlen) {
    if (!(lambda >= 0 && lambda < 1)) {
        set_err(err, errlen, "%s: value target: lambda %g is outside [0, 1)", w->run_dir, (double)lambda);
        return -1;
    }
    if (w->nents || w->selected) {
        set_err(err, errlen, "%s: value target: lambda set after the window opened shards", w->run_dir);
        return -1;
    }
    w->q_lambda = lambda;
    return 0;
}

int train_window_set_policy_temp(train_window_t *w, float temp, char *err, size_t errlen) {
    if (!(temp >= 0.1f && temp <= 10.0f)) {
        set_err(err, errlen, "%s: policy target: temperature %g is outside [0.1, 10]", w->run_dir, (double)temp);
        return -1;
    }
    if (w->nents || w->selected) {
        set_err(err, errlen, "%s: policy target: temperature set after the window opened shards", w->run_dir);
        return -1;
    }
    w->policy_temp = temp;
    return 0;
}

void train_window_set_eager(train_window_t *w, int eager) { w->eager = eager != 0; }

void train_window_set_epoch_order(train_window_t *w, uint64_t seed) {
    w->epochs = 1;
    w->epoch_seed = seed ^ 0x6a09e667f3bcc909ULL;
}

uint64_t train_window_key(const train_window_t *w, uint64_t seed, int64_t cycle, int64_t step) {
    if (w && w->epochs) return 1ULL << 63 | (uint64_t)step;
    return train_key(seed, cycle, step);
}

int train_window_set_surprise_weight(train_window_t *w, float s, char *err, size_t errlen) {
    if (!(s >= 0 && s <= 1)) {
        set_err(err, errlen, "%s: surprise weight %g is outside [0, 1]", w->run_dir, (double)s);
        return -1;
    }
    w->surprise_weight = s;
    return 0;
}

/* Frees the resident copies of every shard and the tables: the host route from now on. */
static void resident_off(train_window_t *w) {
    nn_backend_t *be = w->be;
    if (!be) return;
    for (int32_t i = 0; i < w->nents; i++) {
        be->buf_free(be, w->ents[i].dev);
        w->ents[i].dev = NULL;
        w->ents[i].dev_bytes = 0;
    }
    be->buf_free(be, w->srcs);
    be->buf_free(be, w->refs_dev);
    free(w->refs_host);
    free(w->offs_host);
    w->srcs = NULL, w->refs_dev = NULL, w->refs_host = NULL, w->offs_host = NULL;
    w->cap_srcs = w->cap_refs = 0;
    w->dev_bytes = 0;
    w->be = NULL;
}

void train_window_free(train_window_t *w) {
    if (!w) return;
    resident_off(w);
    for (int32_t i = 0; i < w->nents; i++) {
        shard_close(w->ents[i].sh);
        free(w->ents[i].q);
        free(w->ents[i].prob);
        free(w->ents[i].label);
    }
    free(w->ents);
    free(w->segs);
    free(w->cum);
    free(w->picks);
    free(w->rows);
    free(w);
}

int64_t train_window_count(const db_shard_t *list, int32_t n, int32_t fv, int64_t lo, int64_t hi) {
    int64_t rows = 0;
    for (int32_t i = 0; i < n; i++) {
        if (list[i].features_version != fv && list[i].features_version != SHARD_FEATURES_ANY) continue;
        if (lo >= 0 && list[i].cycle <= lo) continue;
        if (hi >= 0 && list[i].cycle > hi) continue;
        rows += list[i].rows;
    }
    return rows;
}

/* Index of id in the sorted cache, or -(insertion point) - 1. */
static int32_t ent_find(const train_window_t *w, int64_t id) {
    int32_t lo = 0, hi = w->nents;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (w->ents[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < w->nents && w->ents[lo].id == id) return lo;
    return -lo - 1;
}

/* The soft policy target: out = each row's entries of s raised to the power
 * 1/temp and scaled back to the row's sum (1 for a search's or a record's
 * target), in log space relative to the row's largest entry; zeros stay zero. */
static void temper_policy(const shard_t *s, float temp, float *out) {
    const float *p = out; /* each row's stored target, read into out first and tempered in place */
    double inv = 1.0 / (double)temp;
    for (int64_t r = 0; r < shard_rows(s); r++) {
        int64_t b, e;
        shard_row_policy(s, r, &b, &e);
        shard_row_probs(s, r, out + b);
        double mx = 0, sum = 0, tot = 0;
        for (int64_t i = b; i < e; i++) sum += p[i], mx = p[i] > mx ? p[i] : mx;
        if (!(mx > 0)) { /* no mass to move */
            for (int64_t i = b; i < e; i++) out[i] = p[i];
            continue;
        }
        double lmx = log(mx);
        for (int64_t i = b; i < e; i++) tot += p[i] > 0 ? exp((log((double)p[i]) - lmx) * inv) : 0.0;
        for (int64_t i = b; i < e; i++)
            out[i] = p[i] > 0 ? (float)(exp((log((double)p[i]) - lmx) * inv) / tot * sum) : 0.0f;
    }
}


#define LABEL_PENDING 0xFFFEu /* a lazily opened shard's label not made yet (never a label: < SHARD_LABEL_NB) */

/* Row r's move label in the label array of s (train_move_labels' rule, one row). */
static uint16_t row_label(const shard_t *s, int64_t r, pos_t *pos) {
    const shard_columns_t *c = shard_columns(s);
    const shard_format_t *f = shard_format(s);
    shard_row_pos(c, r, pos);
    int32_t lab = encode_move_label(pos, c->move[r]);
    int masked = c->legal && (int64_t)f->legal_bytes * 8 >= SHARD_LABEL_NB;
    int ok = lab >= 0 && lab < SHARD_LABEL_NB && (!masked || encode_bit(c->legal + r * f->legal_bytes, lab));
    return ok ? (uint16_t)lab : SHARD_LABEL_UNKNOWN;
}

/* The labels rows[0..n) of sg and the rows after them (the opponent-reply targets) need, made now where a lazily
 * opened shard has not made them yet. 0, or -1 when out of memory. */
static int labels_for(const seg_t *sg, const int64_t *rows, int32_t n) {
    uint16_t *lab = (uint16_t *)sg->label;
    pos_t *pos = NULL;
    int64_t R = shard_rows(sg->sh);
    for (int32_t i = 0; i < n; i++)
        for (int64_t r = rows[i]; r < rows[i] + 2 && r < R; r++) {
            if (lab[r] != LABEL_PENDING) continue;
            if (!pos && !(pos = malloc(sizeof *pos))) return -1;
            memset(pos, 0, offsetof(pos_t, hist));
            lab[r] = row_label(sg->sh, r, pos);
        }
    free(pos);
    return 0;
}

int train_move_labels(const shard_t *s, uint16_t *out) {
    /* Only the fields the position column holds (board, hands, side, ply: shard_row_pos): a label is the move's
     * geometry in the side to move's view, which encode_move_label reads from them. */
    pos_t *pos = malloc(sizeof *pos);
    if (!pos) return -1;
    memset(pos, 0, offsetof(pos_t, hist));
    for (int64_t r = 0; r < shard_rows(s); r++) out[r] = row_label(s, r, pos);
    free(pos);
    return 0;
}

/* The cache entry of shard row s, opened now if new. NULL only when out of memory. */
static ent_t *ent_get(train_window_t *w, const db_shard_t *s) {
    int32_t at = ent_find(w, s->id);
    if (at >= 0) return &w->ents[at];
    at = -at - 1;
    if (w->nents == w->capents) {
        int32_t cap = w->capents ? 2 * w->capents : 64;
        ent_t *ne = realloc(w->ents, sizeof(ent_t) * (size_t)cap);
        if (!ne) return NULL;
        w->ents = ne;
        w->capents = cap;
    }
    memmove(&w->ents[at + 1], &w->ents[at], sizeof(ent_t) * (size_t)(w->nents - at));
    w->nents++;
    ent_t *e = &w->ents[at];
    memset(e, 0, sizeof *e);
    e->id = s->id;
    snprintf(e->rel, sizeof e->rel, "%s", s->path);
    char path[1400], err[2048] = "";
    snprintf(path, sizeof path, "%s/%s", w->run_dir, s->path);
    e->sh = shard_open(path, &w->fmt, 0, err, sizeof err);
    if (e->sh && shard_rows(e->sh) != s->rows) {
        snprintf(err, sizeof err, "%s: %" PRId64 " rows, but koma.db registered %" PRId64, path, shard_rows(e->sh),
                 s->rows);
        shard_close(e->sh);
        e->sh = NULL;
    }
    if (!e->sh) {
        e->bad = 1;
        runlog_printf(&w->log, "skipping bad shard %s: %s", s->path, err);
    } else {
        int64_t rows = shard_rows(e->sh), nnz = shard_nnz(e->sh);
        if (w->q_lambda > 0) e->q = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
        if (w->policy_temp != 1.0f) e->prob = malloc(sizeof(float) * (size_t)(nnz > 0 ? nnz : 1));
        e->label = malloc(sizeof(uint16_t) * (size_t)(rows > 0 ? rows : 1));
        /* Lazily opened (train --from-games): each row's label when a batch first takes the row (labels_for);
         * a shard's every row at once would decode 100,000 positions before its first batch. */
        int lazy = !w->eager && !w->be;
        if (e->label && lazy)
            for (int64_t r = 0; r < rows; r++) e->label[r] = LABEL_PENDING;
        if ((w->q_lambda > 0 && !e->q) || (w->policy_temp != 1.0f && !e->prob) || !e->label ||
            (!lazy && train_move_labels(e->sh, e->label) != 0)) {
            free(e->q);
            free(e->prob);
            free(e->label);
            shard_close(e->sh);
            memmove(&w->ents[at], &w->ents[at + 1], sizeof(ent_t) * (size_t)(w->nents - at - 1));
            w->nents--;
            return NULL;
        }
        if (e->q) shard_q_lambda(e->sh, w->q_lambda, e->q);
        if (e->prob) temper_policy(e->sh, w->policy_temp, e->prob);
    }
    return e;
}

/* Policy-surprise weighting (KataGo) of the window just chosen: row g of the
 * window weighs (1 - s) + s * surprise_g / mean, the mean over the rows with
 * a policy target and a known surprise; the others weigh 1 (as the mean).
 * w->cum[g] = the weights of rows 0..g. Without a weight (s = 0) or a
 * surprise to weight by (none known, or all 0), sampling stays uniform.
 * 0, or -1 when out of memory. */
static int surprise_weights(train_window_t *w) {
    w->weighted = 0;
    if (!(w->surprise_weight > 0) || w->positions <= 0) return 0;
    double sum = 0;
    int64_t known = 0;
    for (int32_t i = 0; i < w->nsegs; i++) {
        const seg_t *sg = &w->segs[i];
        for (int64_t r = sg->begin; r < sg->begin + sg->count; r++) {
            int64_t pb, pe;
            shard_row_policy(sg->sh, r, &pb, &pe);
            float x = shard_row_surprise(sg->sh, r);
            if (pe > pb && x >= 0) sum += x, known++;
        }
    }
    if (!known || !(sum > 0)) return 0;
    if (w->positions > w->cap_cum) {
        double *c = realloc(w->cum, sizeof(double) * (size_t)w->positions);
        if (!c) return -1;
        w->cum = c;
        w->cap_cum = w->positions;
    }
    double s = w->surprise_weight, mean = sum / (double)known, acc = 0;
    int64_t g = 0;
    for (int32_t i = 0; i < w->nsegs; i++) {
        const seg_t *sg = &w->segs[i];
        for (int64_t r = sg->begin; r < sg->begin + sg->count; r++, g++) {
            int64_t pb, pe;
            shard_row_policy(sg->sh, r, &pb, &pe);
            float x = shard_row_surprise(sg->sh, r);
            acc += pe > pb && x >= 0 ? (1.0 - s) + s * (double)x / mean : 1.0;
            w->cum[g] = acc;
        }
    }
    w->weighted = 1;
    return 0;
}

int train_window_select(train_window_t *w, const db_shard_t *list, int32_t n, int64_t max_cycle, int64_t want,
                        int64_t *positions, int32_t *bad, char *err, size_t errlen) {
    *positions = 0;
    *bad = 0;
    w->weighted = 0;
    w->selected = 1;
    for (int32_t i = 0; i < w->nents; i++) w->ents[i].used = 0;
    w->nsegs = 0;
    w->positions = 0;
    int64_t got = 0;
    for (int32_t i = n - 1; i >= 0 && (want <= 0 || got < want); i--) {
        const db_shard_t *s = &list[i];
        if (s->features_version != w->fmt.features_version && s->features_version != SHARD_FEATURES_ANY) continue;
        if (max_cycle >= 0 && s->cycle > max_cycle) continue;
        if (s->rows <= 0) continue;
        /* Lazily (the default on the host route): a shard not yet open joins by its koma.db row and is
         * opened, verified and checked when a batch first draws from it, so a start costs nothing per
         * shard; eager opening (resident windows, surprise weights, --verify-shards) opens it now. */
        int32_t at = ent_find(w, s->id);
        ent_t *e = at >= 0 ? &w->ents[at] : NULL;
        int lazy = !e && !w->eager && !w->be && !(w->surprise_weight > 0);
        if (!e && !lazy && !(e = ent_get(w, s))) {
            set_err(err, errlen, "%s: training window: out of memory", w->run_dir);
            return -1;
        }
        if (e && e->bad) {
            (*bad)++;
            continue;
        }
        if (e) e->used = 1;
        if (w->nsegs == w->capsegs) {
            int32_t cap = w->capsegs ? 2 * w->capsegs : 64;
            seg_t *ns = realloc(w->segs, sizeof(seg_t) * (size_t)cap);
            if (!ns) {
                set_err(err, errlen, "%s: training window: out of memory", w->run_dir);
                return -1;
            }
            w->segs = ns;
            w->capsegs = cap;
        }
        int64_t rows = e ? shard_rows(e->sh) : s->rows, take = rows;
        if (want > 0 && got + take > want) take = want - got;
        w->segs[w->nsegs++] = e ? (seg_t){.sh = e->sh, .q = e->q, .prob = e->prob, .label = e->label, .id = e->id,
                                          .begin = rows - take, .count = take, .row = *s}
                                : (seg_t){.id = s->id, .begin = rows - take, .count = take, .row = *s};
        got += take;
    }
    /* newest first -> oldest first, then prefix sums */
    for (int32_t i = 0; i < w->nsegs / 2; i++) {
        seg_t t = w->segs[i];
        w->segs[i] = w->segs[w->nsegs - 1 - i];
        w->segs[w->nsegs - 1 - i] = t;
    }
    int64_t pre = 0;
    for (int32_t i = 0; i < w->nsegs; i++) {
        w->segs[i].prefix = pre;
        pre += w->segs[i].count;
    }
    w->positions = pre;
    /* close shards that left the window (bad ones stay listed, never reopened) */
    int32_t k = 0;
    for (int32_t i = 0; i < w->nents; i++) {
        ent_t *e = &w->ents[i];
        if (!e->used && !e->bad) {
            if (w->be) {
                w->be->buf_free(w->be, e->dev);
                w->dev_bytes -= e->dev_bytes;
            }
            shard_close(e->sh);
            free(e->q);
            free(e->prob);
            free(e->label);
            continue;
        }
        w->ents[k++] = *e;
    }
    w->nents = k;
    *positions = pre;
    if (surprise_weights(w) != 0) {
        set_err(err, errlen, "%s: training window: out of memory for the surprise weights of %" PRId64 " rows",
                w->run_dir, pre);
        return -1;
    }
    if (w->be && resident_update(w) != 0) {
        runlog_printf(&w->log, "the training window (%" PRId64 " positions) does not fit in %s memory (%s): batches "
                      "are gathered on the host and uploaded from now on", pre, nn_backend_memory(w->be), w->dev_why);
        resident_off(w);
    }
    return 0;
}

/* Bytes of a column of n elements of `size` bytes, rounded up for the next column's alignment. */
static int64_t col_bytes(int64_t n, int64_t size) { return (n * size + 255) & ~(int64_t)255; }

/* Uploads the columns of e's shard into one allocation, one piece a column.
 * 0, or -1 (w->dev_why says why) when the cap or the backend's memory is short. */
static int resident_load(train_window_t *w, ent_t *e) {
    nn_backend_t *be = w->be;
    const shard_format_t *f = &w->fmt;
    const shard_columns_t *c = shard_columns(e->sh);
    if (!c->planes) { /* version 2: its planes are made on the host until a device kernel makes them */
        snprintf(w->dev_why, sizeof w->dev_why, "%s is a version-2 shard (positions only): its planes and masks "
                 "are made on the host", e->rel);
        return -1;
    }
    int64_t R = shard_rows(e->sh), nnz = shard_nnz(e->sh);
    int64_t sz[9] = {col_bytes(R, f->planes_bytes), col_bytes(R, (int64_t)sizeof(float) * f->hand_n),
                     col_bytes(R, f->legal_bytes),  col_bytes(nnz, sizeof(uint16_t)),
                     col_bytes(nnz, sizeof(float)), col_bytes(R, 1),
                     col_bytes(R, sizeof(float)),   c->moves_left ? col_bytes(R, sizeof(int16_t)) : 0,
                     col_bytes(R, sizeof(uint16_t))};
    int64_t total = 0;
    for (int i = 0; i < 9; i++) total += sz[i];
    if (w->dev_bytes + total > w->dev_cap) {
        snprintf(w->dev_why, sizeof w->dev_why, "over the cap of %" PRId64 " MiB", w->dev_cap >> 20);
        return -1;
    }
    uint8_t *d = be->buf_alloc(be, (size_t)total);
    if (!d) {
        snprintf(w->dev_why, sizeof w->dev_why, "out of memory allocating %" PRId64 " MiB for %s",
                 (total + (1 << 20) - 1) >> 20, e->rel);
        return -1;
    }
    const void *src[9] = {c->planes, c->hand, c->legal, c->policy_label, e->prob ? e->prob : c->policy_prob, c->result,
                          e->q ? e->q : c->root_q, c->moves_left, e->label};
    int64_t used[9] = {R * f->planes_bytes, R * (int64_t)sizeof(float) * f->hand_n, R * f->legal_bytes,
                       nnz * (int64_t)sizeof(uint16_t), nnz * (int64_t)sizeof(float), R, R * (int64_t)sizeof(float),
                       c->moves_left ? R * (int64_t)sizeof(int16_t) : 0, R * (int64_t)sizeof(uint16_t)};
    uint8_t *at[9];
    int64_t off = 0;
    for (int i = 0; i < 9; i++) {
        at[i] = d + off;
        if (used[i] > 0) be->upload(be, at[i], src[i], (size_t)used[i]);
        off += sz[i];
    }
    e->dev = d;
    e->dev_bytes = total;
    e->cols = (nn_rows_src_t){at[0], (const float *)at[1], at[2], (const uint16_t *)at[3], (const float *)at[4],
                              (const int8_t *)at[5], (const float *)at[6],
                              c->moves_left ? (const int16_t *)at[7] : NULL, (const uint16_t *)at[8]};
    w->dev_bytes += total;
    const char *be_err = nn_backend_error(be);
    if (be_err) {
        snprintf(w->dev_why, sizeof w->dev_why, "%s", be_err);
        return -1;
    }
    return 0;
}

/* After a select: every shard of the window resident, and the table of
 * segments uploaded. 0, or -1 with w->dev_why. */
static int resident_update(train_window_t *w) {
    nn_backend_t *be = w->be;
    for (int32_t i = 0; i < w->nents; i++) {
        ent_t *e = &w->ents[i];
        if (e->used && !e->bad && !e->dev && resident_load(w, e) != 0) return -1;
    }
    if (w->nsegs > w->cap_srcs) {
        int32_t cap = w->nsegs > 2 * w->cap_srcs ? w->nsegs : 2 * w->cap_srcs;
        be->buf_free(be, w->srcs);
        w->cap_srcs = 0;
        if (!(w->srcs = be->buf_alloc(be, sizeof(nn_rows_src_t) * (size_t)cap))) {
            snprintf(w->dev_why, sizeof w->dev_why, "out of memory for the table of %d shards", cap);
            return -1;
        }
        w->cap_srcs = cap;
    }
    nn_rows_src_t *t = malloc(sizeof(nn_rows_src_t) * (size_t)(w->nsegs ? w->nsegs : 1));
    if (!t) {
        snprintf(w->dev_why, sizeof w->dev_why, "out of host memory");
        return -1;
    }
    for (int32_t i = 0; i < w->nsegs; i++) t[i] = w->ents[ent_find(w, w->segs[i].id)].cols;
    if (w->nsegs) be->upload(be, w->srcs, t, sizeof(nn_rows_src_t) * (size_t)w->nsegs);
    free(t);
    return 0;
}

int train_window_resident(train_window_t *w, nn_backend_t *be, int64_t cap_bytes, char *err, size_t errlen) {
    if (!be) {
        resident_off(w);
        return 0;
    }
    if (!be->gather_rows) {
        set_err(err, errlen, "%s: the %s backend cannot gather training rows on its device", w->run_dir, be->name);
        return -1;
    }
    resident_off(w);
    w->be = be;
    w->dev_cap = cap_bytes > 0 ? cap_bytes : INT64_MAX;
    return 0;
}

int train_window_is_resident(const train_window_t *w) { return w->be != NULL; }

int64_t train_window_resident_bytes(const train_window_t *w) { return w->dev_bytes; }

int32_t train_window_shards(const train_window_t *w) { return w->nsegs; }

static inline uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t train_key(uint64_t seed, int64_t a, int64_t b) {
    uint64_t s = seed;
    uint64_t k = splitmix(&s);
    s = k ^ (uint64_t)a;
    k = splitmix(&s);
    s = k ^ (uint64_t)b;
    return splitmix(&s);
}

/* Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection). */
static uint64_t below(uint64_t *s, uint64_t n) {
    for (;;) {
        uint64_t x = splitmix(s);
        __uint128_t m = (__uint128_t)x * n;
        uint64_t lo = (uint64_t)m;
        if (lo >= n || lo >= (uint64_t)(-n) % n) return (uint64_t)(m >> 64);
    }
}

/* A window row drawn with probability weight / total weight (surprise_weights). */
static int64_t weighted_row(const train_window_t *w, uint64_t *s) {
    double total = w->cum[w->positions - 1], u;
    do u = (double)(splitmix(s) >> 11) * 0x1.0p-53 * total;
    while (u >= total);
    int64_t lo = 0, hi = w->positions - 1; /* the first row whose cumulative weight is above u */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (w->cum[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* A keyed bijection of [0, 2^(2 half)) (a 4-round Feistel network), the permutation of an epoch. */
static uint64_t feistel(uint64_t x, int half, uint64_t key) {
    uint64_t mask = (1ULL << half) - 1, l = x >> half, r = x & mask;
    for (int round = 0; round < 4; round++) {
        uint64_t z = key ^ (r * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)round << 56;
        uint64_t f = splitmix(&z) & mask;
        uint64_t t = r;
        r = l ^ f;
        l = t;
    }
    return l << half | r;
}

/* Position g of the whole run of epochs (g = step * B + b): epoch g / P, its place g % P in that epoch's
 * shuffled order (P = the window's positions; cycle walking keeps the permutation inside [0, P)). */
static int64_t epoch_row(const train_window_t *w, int64_t g) {
    uint64_t P = (uint64_t)w->positions, e = (uint64_t)g / P, i = (uint64_t)g % P;
    int half = 1;
    while ((1ULL << (2 * half)) < P) half++;
    uint64_t key = w->epoch_seed ^ (e + 1) * 0xd1b54a32d192ed03ULL;
    do i = feistel(i, half, key);
    while (i >= P);
    return (int64_t)i;
}

static int pick_cmp(const void *a, const void *b) {
    const pick_t *x = a, *y = b;
    if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* w->picks[0..B) = B rows drawn by key, sorted by (segment, row): 0, or -1 with err. */
static int pick_rows(train_window_t *w, uint64_t key, int32_t B, char *err, size_t errlen) {
    if (w->positions <= 0 || w->nsegs == 0) {
        set_err(err, errlen, "%s: the training window is empty", w->run_dir);
        return -1;
    }
    if (B > w->cap_picks) {
        pick_t *p = realloc(w->picks, sizeof(pick_t) * (size_t)B);
        if (p) w->picks = p;
        int64_t *r = realloc(w->rows, sizeof(int64_t) * (size_t)B);
        if (r) w->rows = r;
        if (!p || !r) {
            set_err(err, errlen, "%s: training window: out of memory", w->run_dir);
            return -1;
        }
        w->cap_picks = B;
    }
    uint64_t s = key;
    for (int32_t b = 0; b < B; b++) {
        int64_t g = w->epochs && (key >> 63) ? epoch_row(w, (int64_t)(key & ~(1ULL << 63)) * B + b)
                    : w->weighted          ? weighted_row(w, &s)
                                           : (int64_t)below(&s, (uint64_t)w->positions);
        int32_t lo = 0, hi = w->nsegs - 1; /* last segment with prefix <= g */
        while (lo < hi) {
            int32_t mid = lo + (hi - lo + 1) / 2;
            if (w->segs[mid].prefix <= g) lo = mid;
            else hi = mid - 1;
        }
        w->picks[b] = (pick_t){.seg = lo, .row = w->segs[lo].begin + (g - w->segs[lo].prefix)};
    }
    w->npicks = B;
    qsort(w->picks, (size_t)B, sizeof(pick_t), pick_cmp);
    return 0;
}

/* Opens the shards of the segments w->picks draws from that are not open yet. A shard that turns out bad
 * (reported once) leaves the window: its segment is dropped, the prefixes recomputed and *again set, for the
 * caller to draw its batch again from the window as it now is. 0, or -1 with err (out of memory, or the
 * window is empty now). */
static int segs_open(train_window_t *w, int *again, char *err, size_t errlen) {
    *again = 0;
    int32_t last = -1;
    for (int32_t b = 0; b < w->cap_picks && b < w->npicks; b++) {
        int32_t i = w->picks[b].seg;
        if (i == last || w->segs[i].sh) continue;
        last = i;
        seg_t *sg = &w->segs[i];
        ent_t *e = ent_get(w, &sg->row);
        if (!e) {
            set_err(err, errlen, "%s: training window: out of memory", w->run_dir);
            return -1;
        }
        e->used = 1;
        if (e->bad || shard_rows(e->sh) < sg->begin + sg->count) {
            e->bad = 1;
            sg->count = 0; /* dropped below */
            *again = 1;
            continue;
        }
        sg->sh = e->sh, sg->q = e->q, sg->prob = e->prob, sg->label = e->label;
    }
    if (!*again) return 0;
    int32_t k = 0;
    int64_t pre = 0;
    for (int32_t i = 0; i < w->nsegs; i++) {
        if (w->segs[i].count == 0) continue;
        w->segs[k] = w->segs[i];
        w->segs[k].prefix = pre;
        pre += w->segs[k++].count;
    }
    w->nsegs = k;
    w->positions = pre;
    if (pre <= 0) {
        set_err(err, errlen, "%s: the training window is empty: every shard in it is bad", w->run_dir);
        return -1;
    }
    return 0;
}

int train_window_sample(train_window_t *w, uint64_t key, int32_t B, shard_batch_t *batch, char *err,
                        size_t errlen) {
    shard_batch_clear(batch);
    if (B <= 0 || B > batch->cap) {
        set_err(err, errlen, "%s: batch of %d rows does not fit the buffers (%d)", w->run_dir, B, batch->cap);
        return -1;
    }
    if (pick_rows(w, key, B, err, errlen) != 0) return -1;
    int again = 0;
    if (segs_open(w, &again, err, errlen) != 0) return -1;
    if (again) return train_window_sample(w, key, B, batch, err, errlen); /* a bad shard left the window */
    for (int32_t b = 0; b < B;) {
        int32_t e = b;
        while (e < B && w->picks[e].seg == w->picks[b].seg) {
            w->rows[e - b] = w->picks[e].row;
            e++;
        }
        const seg_t *sg = &w->segs[w->picks[b].seg];
        int32_t at = batch->B;
        if (labels_for(sg, w->rows, e - b) != 0) {
            set_err(err, errlen, "%s: training batch: out of memory", w->run_dir);
            return -1;
        }
        if (shard_row_batch_labels(sg->sh, sg->label, w->rows, e - b, batch, err, errlen) != 0) return -1;
        if (sg->q)
            for (int32_t i = 0; i < e - b; i++) batch->root_q[at + i] = sg->q[w->rows[i]];
        if (sg->prob)
            for (int32_t i = 0; i < e - b; i++) {
                int64_t pb, pe;
                shard_row_policy(sg->sh, w->rows[i], &pb, &pe);
                if (pe > pb)
                    memcpy(batch->policy_prob + batch->policy_offsets[at + i], sg->prob + pb,
                           sizeof(float) * (size_t)(pe - pb));
            }
        b = e;
    }
    return train_batch_expand(batch, err, errlen);
}

int train_batch_expand(shard_batch_t *b, char *err, size_t errlen) {
    if (b->pending == 0) return 0;
    const shard_format_t *f = &b->fmt;
    if (f->planes_bytes != ENC_PACKED_BYTES || f->hand_n != ENC_HAND || f->legal_bytes != ENC_LEGAL_BYTES ||
        f->features_version != ENC_FEATURES_VERSION) {
        set_err(err, errlen, "a batch of features_version %d (widths %d/%d/%d) cannot be made from positions: this "
                "build makes features_version %d (%d/%d/%d)", f->features_version, f->planes_bytes, f->hand_n,
                f->legal_bytes, ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES);
        return -1;
    }
    pos_t *pos = malloc(sizeof *pos);
    if (!pos) {
        set_err(err, errlen, "training batch: out of memory");
        return -1;
    }
    int rc = 0;
    for (int32_t j = 0; j < b->B && rc == 0; j++) {
        if (!b->expand[j]) continue;
        char why[256];
        if (shard_hcp_position(b->position + (size_t)j * SHARD_HCP_BYTES, 1, pos, why, sizeof why) != 0) {
            set_err(err, errlen, "training batch: row %d: %s", j, why);
            rc = -1;
            break;
        }
        encode_position(pos, b->planes + (size_t)j * ENC_PACKED_BYTES, b->hand + (size_t)j * ENC_HAND);
        encode_legal_mask(pos, b->legal + (size_t)j * ENC_LEGAL_BYTES);
        b->expand[j] = 0;
    }
    if (rc == 0) b->pending = 0;
    free(pos);
    return rc;
}

int train_window_gather(train_window_t *w, uint64_t key, int32_t B, nn_optim_t *tr, nn_batch_t *bt, char *err,
                        size_t errlen) {
    memset(bt, 0, sizeof *bt);
    nn_backend_t *be = w->be;
    nn_train_staging_t st;
    int32_t cap = 0;
    nn_optim_staging(tr, &st, &cap);
    if (!be || be != nn_net_backend(nn_optim_net(tr))) {
        set_err(err, errlen, "%s: the training window is not resident on the trainer's backend", w->run_dir);
        return -1;
    }
    if (B <= 0 || B > cap) {
        set_err(err, errlen, "%s: batch of %d rows does not fit the trainer (%d)", w->run_dir, B, cap);
        return -1;
    }
    if (pick_rows(w, key, B, err, errlen) != 0) return -1;
    if (B > w->cap_refs) {
        be->buf_free(be, w->refs_dev);
        free(w->refs_host);
        free(w->offs_host);
        w->refs_dev = be->buf_alloc(be, sizeof(nn_row_ref_t) * 2 * (size_t)B);
        w->refs_host = malloc(sizeof(nn_row_ref_t) * 2 * (size_t)B);
        w->offs_host = malloc(sizeof(uint32_t) * 2 * (size_t)(B + 1));
        w->cap_refs = w->refs_dev && w->refs_host && w->offs_host ? B : 0;
        if (!w->cap_refs) {
            set_err(err, errlen, "%s: training window: out of memory for a batch of %d rows", w->run_dir, B);
            return -1;
        }
    }
    uint32_t off = 0;
    for (int32_t b = 0; b < B; b++) {
        const pick_t *p = &w->picks[b];
        int64_t pb, pe;
        shard_row_policy(w->segs[p->seg].sh, p->row, &pb, &pe);
        w->refs_host[b] = (nn_row_ref_t){.src = p->seg, .row = (uint32_t)p->row, .policy_begin = (uint32_t)pb};
        w->offs_host[b] = off;
        off += (uint32_t)(pe - pb);
    }
    w->offs_host[B] = off;
    const shard_format_t *f = &w->fmt;
    be->upload(be, w->refs_dev, w->refs_host, sizeof(nn_row_ref_t) * (size_t)B);
    be->upload(be, st.offsets, w->offs_host, sizeof(uint32_t) * (size_t)(B + 1));
    be->gather_rows(be, w->srcs, w->refs_dev, st.offsets, B, f->planes_bytes, f->hand_n, f->legal_bytes, st.planes,
                    st.hand, st.legal, st.labels, st.probs, st.result, st.q);
    bt->B = B;
    bt->staged = 1;
    bt->policy_offsets = w->offs_host;
    if (be->gather_heads && (st.moves_left || st.opp_offsets)) { /* a net with the optional heads: their targets */
        nn_row_ref_t *orefs = w->refs_host + B;
        uint32_t *ooffs = w->offs_host + B + 1, ooff = 0;
        for (int32_t b = 0; st.opp_offsets && b < B; b++) { /* the reply: the next row's policy target */
            const pick_t *p = &w->picks[b];
            const shard_t *sh = w->segs[p->seg].sh;
            int64_t rr = shard_row_reply(sh, w->segs[p->seg].label, p->row), pb = 0, pe = 0;
            if (rr >= 0) shard_row_policy(sh, rr, &pb, &pe);
            int onehot = rr >= 0 && pe == pb; /* no policy target there: the move played (shard_row_reply) */
            orefs[b] = (nn_row_ref_t){.src = p->seg, .row = (uint32_t)(rr >= 0 ? rr : 0), .policy_begin = (uint32_t)pb,
                                      .onehot = (uint32_t)onehot};
            ooffs[b] = ooff;
            ooff += onehot ? 1u : (uint32_t)(pe - pb);
        }
        ooffs[B] = ooff;
        if (st.opp_offsets) {
            be->upload(be, w->refs_dev + B, orefs, sizeof(nn_row_ref_t) * (size_t)B);
            be->upload(be, st.opp_offsets, ooffs, sizeof(uint32_t) * (size_t)(B + 1));
        }
        be->gather_heads(be, w->srcs, w->refs_dev, st.opp_offsets ? w->refs_dev + B : NULL, st.opp_offsets, B,
                         st.moves_left, st.opp_labels, st.opp_probs);
        bt->moves_left = st.moves_left; /* staged: the staging holds them (the pointer is not read) */
        bt->opp_offsets = st.opp_offsets ? ooffs : NULL;
    }
    return 0;
}
