/* rating.c - the joint maximum-likelihood rating list; see rating.h. */
#include "match/rating.h"
#include "compat/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN10_400 (2.302585092994046 / 400.0) /* Elo -> natural log-odds */
#define MAX_NEWTON 100

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Inverts the m x m matrix a (row-major) in place: Gauss-Jordan on [a | I]
 * with partial pivoting. 0, or -1 when it is singular or out of memory. */
static int invert(double *a, int32_t m) {
    size_t w = 2 * (size_t)m;
    double *t = malloc(sizeof(double) * w * (size_t)(m > 0 ? m : 1));
    if (!t) return -1;
    for (int32_t r = 0; r < m; r++)
        for (int32_t k = 0; k < m; k++) {
            t[r * w + (size_t)k] = a[(size_t)r * m + k];
            t[r * w + (size_t)m + (size_t)k] = r == k ? 1.0 : 0.0;
        }
    int rc = 0;
    for (int32_t c = 0; c < m && rc == 0; c++) {
        int32_t p = c;
        for (int32_t r = c + 1; r < m; r++)
            if (fabs(t[r * w + (size_t)c]) > fabs(t[p * w + (size_t)c])) p = r;
        if (fabs(t[p * w + (size_t)c]) < 1e-300) {
            rc = -1;
            break;
        }
        if (p != c)
            for (size_t k = 0; k < w; k++) {
                double s = t[(size_t)c * w + k];
                t[(size_t)c * w + k] = t[(size_t)p * w + k];
                t[(size_t)p * w + k] = s;
            }
        double piv = t[(size_t)c * w + (size_t)c];
        for (size_t k = 0; k < w; k++) t[(size_t)c * w + k] /= piv;
        for (int32_t r = 0; r < m; r++) {
            double f = t[(size_t)r * w + (size_t)c];
            if (r == c || f == 0.0) continue;
            for (size_t k = 0; k < w; k++) t[(size_t)r * w + k] -= f * t[(size_t)c * w + k];
        }
    }
    if (rc == 0)
        for (int32_t r = 0; r < m; r++)
            for (int32_t k = 0; k < m; k++) a[(size_t)r * m + k] = t[(size_t)r * w + (size_t)m + (size_t)k];
    free(t);
    return rc;
}

/* Players joined to the anchor by games: idx[i] = row in the free block, -1
 * for the anchor, -2 for players out of reach. Returns the block's size. */
static int32_t reach(int32_t n, const rating_pair_t *pairs, int32_t np, int32_t anchor, int32_t *idx) {
    for (int32_t i = 0; i < n; i++) idx[i] = -2;
    idx[anchor] = -1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t k = 0; k < np; k++) {
            const rating_pair_t *p = &pairs[k];
            if (p->games <= 0) continue;
            if (idx[p->a] != -2 && idx[p->b] == -2) idx[p->b] = 0, changed = 1;
            if (idx[p->b] != -2 && idx[p->a] == -2) idx[p->a] = 0, changed = 1;
        }
    }
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (idx[i] == 0 && i != anchor) idx[i] = m++;
    return m;
}

/* Gradient g and negated Hessian h of the log-likelihood (prior included)
 * at log-odds ratings x, over the free block. */
static void derivatives(const double *x, const rating_pair_t *pairs, int32_t np, const int32_t *idx, int32_t m,
                        double *g, double *h) {
    memset(g, 0, sizeof(double) * (size_t)m);
    memset(h, 0, sizeof(double) * (size_t)m * (size_t)m);
    for (int32_t k = 0; k < np; k++) {
        const rating_pair_t *p = &pairs[k];
        if (p->games <= 0 || idx[p->a] == -2) continue;
        double n = p->games + 1.0, s = p->points_a + 0.5; /* one virtual draw */
        double q = sigmoid(x[p->a] - x[p->b]);
        double gd = s - n * q, w = n * q * (1.0 - q);
        int32_t ia = idx[p->a], ib = idx[p->b];
        if (ia >= 0) g[ia] += gd, h[(size_t)ia * m + ia] += w;
        if (ib >= 0) g[ib] -= gd, h[(size_t)ib * m + ib] += w;
        if (ia >= 0 && ib >= 0) h[(size_t)ia * m + ib] -= w, h[(size_t)ib * m + ia] -= w;
    }
}

int rating_fit(rating_player_t *pl, int32_t n, const rating_pair_t *pairs, int32_t np, int32_t anchor, char *err,
               size_t errlen) {
    if (n <= 0 || anchor < 0 || anchor >= n || np < 0 || (np > 0 && !pairs)) {
        set_err(err, errlen, "rating: bad arguments (%d players, anchor %d, %d pairs)", n, anchor, np);
        return -1;
    }
    for (int32_t k = 0; k < np; k++)
        if (pairs[k].a < 0 || pairs[k].a >= n || pairs[k].b < 0 || pairs[k].b >= n || pairs[k].a == pairs[k].b ||
            pairs[k].points_a < 0 || pairs[k].points_a > pairs[k].games) {
            set_err(err, errlen, "rating: pair %d is not two different players with a score within its games", k);
            return -1;
        }
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
    double *x = calloc((size_t)n, sizeof(double));
    if (!idx || !x) {
        free(idx), free(x);
        set_err(err, errlen, "rating: out of memory");
        return -1;
    }
    int32_t m = reach(n, pairs, np, anchor, idx);
    size_t mm = (size_t)(m > 0 ? m : 1);
    double *g = malloc(sizeof(double) * mm), *h = malloc(sizeof(double) * mm * mm);
    int rc = g && h ? 0 : -1;
    if (rc) set_err(err, errlen, "rating: out of memory for %d players", m);
    int converged = m == 0;
    for (int it = 0; rc == 0 && !converged && it < MAX_NEWTON; it++) {
        derivatives(x, pairs, np, idx, m, g, h);
        if (invert(h, m) != 0) {
            set_err(err, errlen, "rating: singular information matrix");
            rc = -1;
            break;
        }
        double step = 0;
        for (int32_t i = 0; i < n; i++) {
            if (idx[i] < 0) continue;
            double d = 0;
            for (int32_t j = 0; j < m; j++) d += h[(size_t)idx[i] * m + j] * g[j];
            if (d > 2.0) d = 2.0; /* damped: never more than 2 log-odds (~350 Elo) at once */
            if (d < -2.0) d = -2.0;
            x[i] += d;
            if (fabs(d) > step) step = fabs(d);
        }
        converged = step < 1e-10;
    }
    if (rc == 0 && !converged) {
        set_err(err, errlen, "rating: no convergence in %d Newton steps", MAX_NEWTON);
        rc = -1;
    }
    if (rc == 0 && m > 0) { /* the covariance at the optimum */
        derivatives(x, pairs, np, idx, m, g, h);
        if (invert(h, m) != 0) {
            set_err(err, errlen, "rating: singular information matrix");
            rc = -1;
        }
    }
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        if (idx[i] == -2) {
            pl[i].elo = pl[i].lo = pl[i].hi = NAN;
        } else if (idx[i] == -1) {
            pl[i].elo = pl[i].lo = pl[i].hi = 0.0;
        } else {
            double se = sqrt(h[(size_t)idx[i] * m + idx[i]]) / LN10_400;
            pl[i].elo = x[i] / LN10_400;
            pl[i].lo = pl[i].elo - 1.959964 * se;
            pl[i].hi = pl[i].elo + 1.959964 * se;
        }
    }
    for (int32_t i = 0; rc == 0 && i < n; i++) pl[i].games = 0;
    for (int32_t k = 0; rc == 0 && k < np; k++) pl[pairs[k].a].games += pairs[k].games, pl[pairs[k].b].games += pairs[k].games;
    free(g), free(h), free(idx), free(x);
    return rc;
}

/* ---- the run's matches --------------------------------------------------------------- */

typedef struct {
    rating_player_t *p;
    int32_t n, cap;
    rating_pair_t *pairs;
    int32_t np, cap_pairs;
} list_t;

/* usi-match names its players "engine1: NAME" / "engine2: NAME" (the seat
 * it had); an outside engine is one player whichever seat it had and
 * whichever program stored its games (the gauntlet stores its label
 * alone), so the seat goes. */
static const char *engine_name(const char *name) {
    if (name && strncmp(name, "engine", 6) == 0 && (name[6] == '1' || name[6] == '2') && name[7] == ':' &&
        name[8] == ' ' && name[9])
        return name + 9;
    return name;
}

static int32_t player(list_t *l, db_t *db, int64_t model_id, const char *name) {
    name = engine_name(name);
    for (int32_t i = 0; i < l->n; i++)
        if (model_id ? l->p[i].model_id == model_id : (l->p[i].model_id == 0 && strcmp(l->p[i].name, name) == 0))
            return i;
    if (l->n == l->cap) {
        int32_t cap = l->cap ? 2 * l->cap : 16;
        rating_player_t *q = realloc(l->p, sizeof *q * (size_t)cap);
        if (!q) return -1;
        l->p = q, l->cap = cap;
    }
    rating_player_t *p = &l->p[l->n];
    memset(p, 0, sizeof *p);
    p->model_id = model_id;
    p->cycle = -1;
    snprintf(p->name, sizeof p->name, "%s", name && name[0] ? name : "?");
    db_model_t m;
    if (model_id && db_model_get(db, model_id, &m) == DB_OK) {
        p->cycle = m.cycle;
        snprintf(p->name, sizeof p->name, "cycle %d", m.cycle);
    }
    return l->n++;
}

static int add_pair(list_t *l, int32_t a, int32_t b, int32_t games, double points_a) {
    for (int32_t k = 0; k < l->np; k++) {
        rating_pair_t *p = &l->pairs[k];
        if (p->a == a && p->b == b) return p->games += games, p->points_a += points_a, 0;
        if (p->a == b && p->b == a) return p->games += games, p->points_a += games - points_a, 0;
    }
    if (l->np == l->cap_pairs) {
        int32_t cap = l->cap_pairs ? 2 * l->cap_pairs : 16;
        rating_pair_t *q = realloc(l->pairs, sizeof *q * (size_t)cap);
        if (!q) return -1;
        l->pairs = q, l->cap_pairs = cap;
    }
    l->pairs[l->np++] = (rating_pair_t){a, b, games, points_a};
    return 0;
}

static int by_cycle_then_name(const void *x, const void *y) {
    const rating_player_t *a = x, *b = y;
    if ((a->cycle >= 0) != (b->cycle >= 0)) return a->cycle >= 0 ? -1 : 1;
    if (a->cycle != b->cycle) return a->cycle < b->cycle ? -1 : 1;
    return strcmp(a->name, b->name);
}

db_status_t rating_list(db_t *db, rating_player_t **out, int32_t *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    db_match_t *ms = NULL;
    int32_t nm = 0;
    db_status_t st = db_matches_list(db, -1, &ms, &nm);
    if (st != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(db));
        return st;
    }
    list_t l = {0};
    int oom = 0;
    for (int32_t i = 0; i < nm && !oom; i++) {
        const db_match_t *m = &ms[i];
        int32_t games = m->wins + m->draws + m->losses;
        if (games <= 0 || !isfinite(m->elo)) continue; /* unfinished: counted once finished (rating.h) */
        const char *nb = m->engine_b[0] ? m->engine_b : m->opponent;
        int32_t a = player(&l, db, m->model_a, m->engine_a), b = player(&l, db, m->model_b, nb);
        if (a < 0 || b < 0) oom = 1;
        else if (a != b && add_pair(&l, a, b, games, m->wins + 0.5 * m->draws) != 0) oom = 1;
    }
    free(ms);
    if (oom) {
        free(l.p), free(l.pairs);
        set_err(err, errlen, "rating: out of memory");
        return DB_ERROR;
    }
    if (l.n == 0) return DB_OK;
    /* Sort the players, then renumber the pairs. */
    int64_t *key_id = malloc(sizeof(int64_t) * (size_t)l.n);
    char (*key_name)[DB_NAME_MAX] = malloc(sizeof *key_name * (size_t)l.n);
    int32_t *map = malloc(sizeof(int32_t) * (size_t)l.n);
    if (!key_id || !key_name || !map) {
        free(key_id), free(key_name), free(map), free(l.p), free(l.pairs);
        set_err(err, errlen, "rating: out of memory");
        return DB_ERROR;
    }
    for (int32_t i = 0; i < l.n; i++) key_id[i] = l.p[i].model_id, memcpy(key_name[i], l.p[i].name, DB_NAME_MAX);
    qsort(l.p, (size_t)l.n, sizeof *l.p, by_cycle_then_name);
    for (int32_t i = 0; i < l.n; i++)
        for (int32_t j = 0; j < l.n; j++)
            if (l.p[j].model_id == key_id[i] && strcmp(l.p[j].name, key_name[i]) == 0) map[i] = j;
    for (int32_t k = 0; k < l.np; k++) l.pairs[k].a = map[l.pairs[k].a], l.pairs[k].b = map[l.pairs[k].b];
    int32_t anchor = 0; /* cycle 0 when present: sorted first */
    int rc = rating_fit(l.p, l.n, l.pairs, l.np, anchor, err, errlen);
    free(key_id), free(key_name), free(map), free(l.pairs);
    if (rc != 0) {
        free(l.p);
        return DB_ERROR;
    }
    *out = l.p;
    *n = l.n;
    return DB_OK;
}

const rating_player_t *rating_of_cycle(const rating_player_t *list, int32_t n, int32_t cycle) {
    for (int32_t i = 0; list && i < n; i++)
        if (list[i].cycle == cycle) return &list[i];
    return NULL;
}
