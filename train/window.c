/* window.c - the training window: shard cache, window choice, sampling. See window.h. */
#include "train/window.h"
#include "compat/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

/* One shard known to the cache. */
typedef struct {
    int64_t id;             /* shards.id */
    char rel[DB_PATH_MAX];  /* run-relative path */
    shard_t *sh;            /* NULL when bad */
    int bad;                /* reported once, never retried */
    int used;               /* in the current window */
} ent_t;

/* A contiguous piece of the window: rows [begin, begin + count) of one shard. */
typedef struct {
    const shard_t *sh;
    int64_t begin, count;
    int64_t prefix;         /* window rows before this segment */
} seg_t;

typedef struct {
    int32_t seg;
    int64_t row;
} pick_t;

struct train_window {
    char run_dir[1024];
    shard_format_t fmt;
    train_log_fn log;
    void *log_user;
    ent_t *ents;            /* sorted by id */
    int32_t nents, capents;
    seg_t *segs;            /* oldest first */
    int32_t nsegs, capsegs;
    int64_t positions;
    pick_t *picks;          /* (cap_picks) sampling scratch */
    int64_t *rows;          /* (cap_picks) */
    int32_t cap_picks;
};

static void wlog(train_window_t *w, const char *fmt, ...) {
    char line[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (w->log) w->log(w->log_user, line);
    else fprintf(stderr, "train: %s\n", line);
}

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
    w->log = log;
    w->log_user = log_user;
    return w;
}

void train_window_free(train_window_t *w) {
    if (!w) return;
    for (int32_t i = 0; i < w->nents; i++) shard_close(w->ents[i].sh);
    free(w->ents);
    free(w->segs);
    free(w->picks);
    free(w->rows);
    free(w);
}

int64_t train_window_count(const db_shard_t *list, int32_t n, int32_t fv, int64_t lo, int64_t hi) {
    int64_t rows = 0;
    for (int32_t i = 0; i < n; i++) {
        if (list[i].features_version != fv) continue;
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
        wlog(w, "skipping bad shard %s: %s", s->path, err);
    }
    return e;
}

int train_window_select(train_window_t *w, const db_shard_t *list, int32_t n, int64_t max_cycle, int64_t want,
                        int64_t *positions, int32_t *bad, char *err, size_t errlen) {
    *positions = 0;
    *bad = 0;
    for (int32_t i = 0; i < w->nents; i++) w->ents[i].used = 0;
    w->nsegs = 0;
    w->positions = 0;
    int64_t got = 0;
    for (int32_t i = n - 1; i >= 0 && (want <= 0 || got < want); i--) {
        const db_shard_t *s = &list[i];
        if (s->features_version != w->fmt.features_version) continue;
        if (max_cycle >= 0 && s->cycle > max_cycle) continue;
        if (s->rows <= 0) continue;
        ent_t *e = ent_get(w, s);
        if (!e) {
            set_err(err, errlen, "%s: training window: out of memory", w->run_dir);
            return -1;
        }
        if (e->bad) {
            (*bad)++;
            continue;
        }
        e->used = 1;
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
        int64_t rows = shard_rows(e->sh), take = rows;
        if (want > 0 && got + take > want) take = want - got;
        w->segs[w->nsegs++] = (seg_t){.sh = e->sh, .begin = rows - take, .count = take};
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
            shard_close(e->sh);
            continue;
        }
        w->ents[k++] = *e;
    }
    w->nents = k;
    *positions = pre;
    return 0;
}

int64_t train_window_positions(const train_window_t *w) { return w->positions; }
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

static int pick_cmp(const void *a, const void *b) {
    const pick_t *x = a, *y = b;
    if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

int train_window_sample(train_window_t *w, uint64_t key, int32_t B, shard_batch_t *batch, char *err,
                        size_t errlen) {
    shard_batch_clear(batch);
    if (w->positions <= 0 || w->nsegs == 0) {
        set_err(err, errlen, "%s: the training window is empty", w->run_dir);
        return -1;
    }
    if (B <= 0 || B > batch->cap) {
        set_err(err, errlen, "%s: batch of %d rows does not fit the buffers (%d)", w->run_dir, B, batch->cap);
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
        int64_t g = (int64_t)below(&s, (uint64_t)w->positions);
        int32_t lo = 0, hi = w->nsegs - 1; /* last segment with prefix <= g */
        while (lo < hi) {
            int32_t mid = lo + (hi - lo + 1) / 2;
            if (w->segs[mid].prefix <= g) lo = mid;
            else hi = mid - 1;
        }
        w->picks[b] = (pick_t){.seg = lo, .row = w->segs[lo].begin + (g - w->segs[lo].prefix)};
    }
    qsort(w->picks, (size_t)B, sizeof(pick_t), pick_cmp);
    for (int32_t b = 0; b < B;) {
        int32_t e = b;
        while (e < B && w->picks[e].seg == w->picks[b].seg) {
            w->rows[e - b] = w->picks[e].row;
            e++;
        }
        if (shard_row_batch(w->segs[w->picks[b].seg].sh, w->rows, e - b, batch, err, errlen) != 0) return -1;
        b = e;
    }
    return 0;
}
