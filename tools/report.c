/* report.c - one self-contained HTML page about a run, from its koma.db.
 *
 *   report RUN_DIR [-o FILE]        (default RUN_DIR/report.html)
 *   report --db FILE -o FILE
 *
 * Owns: presentation: the charts are inline SVG drawn here (no network, no
 * script library; the page has no script at all, tooltips are SVG <title>s),
 * the tables, the "no data yet" placeholders of an empty or partial run.
 * Does not own: any figure (data/db.h reads them; the Elo ladder is
 * match/referee.h's ref_elo_ladder).
 *
 * Sections: training losses and accuracies by step (policy/value/legal/total
 * loss, policy accuracy, legal-move F1, learning rate), Elo by cycle (the
 * ladder with its 95% intervals, and every match, against other nets or
 * other engines, with its games and how they ended; a match that never
 * finished is marked so),
 * self-play throughput by cycle (positions/s, evaluations/s, average batch,
 * device busy %), false resignations by cycle (chart and table, with the
 * resign threshold in use), game lengths (histogram of plies), how games ended
 * (reasons, split by winner), the models table. Long runs are summarised:
 * training steps are averaged into at most 600 buckets per chart.
 *
 * Exit status: 0 written, 1 unreadable database or unwritable output, 2 usage.
 */
#include "compat/version.h"
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "data/db.h"
#include "data/run.h"
#include "match/rating.h"
#include "engine/rules.h"
#include "match/referee.h"
#include "tools/report_games.h"
#include "tools/strbuf.h"

/* Text with &, <, >, " escaped. */
static void sb_esc(sb_t *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': sb_printf(b, "&amp;"); break;
        case '<': sb_printf(b, "&lt;"); break;
        case '>': sb_printf(b, "&gt;"); break;
        case '"': sb_printf(b, "&quot;"); break;
        default: sb_printf(b, "%c", *s);
        }
    }
}

/* ---- numbers ------------------------------------------------------------------------ */
/* A short label for v, with as many decimals as the tick step needs. */
static void fmt_num(char *buf, size_t len, double v, double step) {
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, len, "%s", isnan(v) ? "-" : v > 0 ? "+inf" : "-inf");
    else if (a >= 1e6 && step >= 1e5) snprintf(buf, len, "%.*fM", step >= 1e6 ? 0 : 1, v / 1e6);
    else if (a >= 1e4 && step >= 1e3) snprintf(buf, len, "%.*fk", step >= 1e3 * 10 ? 0 : 1, v / 1e3);
    else {
        int dec = step > 0 && step < 1 ? (int)ceil(-log10(step) - 1e-9) : 0;
        if (dec > 6) dec = 6;
        snprintf(buf, len, "%.*f", dec, v);
    }
    if (strcmp(buf, "-0") == 0 || strncmp(buf, "-0.0", 4) == 0) {
        int zero = 1;
        for (const char *p = buf + 1; *p; p++)
            if (*p != '0' && *p != '.') zero = 0;
        if (zero) memmove(buf, buf + 1, strlen(buf));
    }
}

static double nice_step(double range, int target) {
    if (!(range > 0)) return 1;
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    return nf * mag;
}

/* ---- charts -------------------------------------------------------------------------- */
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"};

typedef struct {
    const char *name;
    const char *color;
    int32_t n;
    const double *x, *y;   /* NAN y: a gap */
    const double *lo, *hi; /* error bars (may be +-inf: drawn to the edge with an arrow), or NULL */
    int markers;           /* dots on the points */
} series_t;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int w, h;
    int y_zero;        /* include 0 in the y range */
    double ymin, ymax; /* fixed range where finite */
    int x_int;         /* x ticks on integers only (cycles) */
    const char *note;  /* a line under the chart, or NULL */
} chart_t;

/* A long run's charts and tables stay small (the page's size bound, report_games.h): a series of more
 * points than this is drawn without a marker (and tooltip) on each point and with its interval as a
 * band, and a table of more rows shows its newest TABLE_ROWS_MAX. */
#define MARKERS_MAX 150
#define TABLE_ROWS_MAX 60

/* Widths in pixels of the title (14px, bold) and note (11px) fonts, per
 * character, estimated on the generous side (the page names no font). */
#define TITLE_CHAR_PX 8.0
#define NOTE_CHAR_PX 6.0

/* The chart's note (top right), if any, and the end of its <svg>. The note
 * shares the title's line when both fit, else it goes on a line of its own
 * under the title (above the plot), so it is never drawn over the title. */
static void chart_end(sb_t *o, const chart_t *c) {
    if (c->note) {
        double need = 12 + TITLE_CHAR_PX * (double)strlen(c->title) + 16 + NOTE_CHAR_PX * (double)strlen(c->note) + 12;
        sb_printf(o, "<text x=\"%d\" y=\"%d\" class=\"small\" text-anchor=\"end\">", c->w - 12,
                  need <= c->w ? 22 : 39);
        sb_esc(o, c->note);
        sb_printf(o, "</text>");
    }
    sb_printf(o, "</svg>\n");
}

static void no_data(sb_t *o, const chart_t *c, const char *why) {
    sb_printf(o, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", c->w, c->h,
              c->w, c->h);
    sb_printf(o, "<text x=\"12\" y=\"22\" class=\"title\">");
    sb_esc(o, c->title);
    sb_printf(o, "</text><rect x=\"12\" y=\"34\" width=\"%d\" height=\"%d\" class=\"empty\"/>", c->w - 24, c->h - 46);
    sb_printf(o, "<text x=\"%d\" y=\"%d\" class=\"nodata\" text-anchor=\"middle\">no data yet</text>", c->w / 2,
              c->h / 2 + 10);
    if (why) {
        sb_printf(o, "<text x=\"%d\" y=\"%d\" class=\"small\" text-anchor=\"middle\">", c->w / 2, c->h / 2 + 32);
        sb_esc(o, why);
        sb_printf(o, "</text>");
    }
    sb_printf(o, "</svg>\n");
}

/* A line chart of ns series (axes, ticks, grid, legend, optional error bars).
 * Renders "no data yet" when no series has a finite point. */
static void line_chart(sb_t *o, const chart_t *c, const series_t *s, int ns, const char *empty_why) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    int points = 0;
    for (int k = 0; k < ns; k++)
        for (int32_t i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
            points++;
            x0 = fmin(x0, s[k].x[i]), x1 = fmax(x1, s[k].x[i]);
            y0 = fmin(y0, s[k].y[i]), y1 = fmax(y1, s[k].y[i]);
            if (s[k].lo && isfinite(s[k].lo[i])) y0 = fmin(y0, s[k].lo[i]);
            if (s[k].hi && isfinite(s[k].hi[i])) y1 = fmax(y1, s[k].hi[i]);
        }
    if (points == 0) {
        no_data(o, c, empty_why);
        return;
    }
    if (c->y_zero) y0 = fmin(y0, 0), y1 = fmax(y1, 0);
    if (isfinite(c->ymin)) y0 = c->ymin;
    if (isfinite(c->ymax)) y1 = c->ymax;
    if (y1 - y0 < 1e-12) y0 -= 1, y1 += 1;
    if (x1 - x0 < 1e-12) { /* one x value: an axis around it, never below 0 for data that is not */
        int nonneg = x0 >= 0;
        x0 -= 1, x1 += 1;
        if (nonneg && x0 < 0) x1 -= x0, x0 = 0;
    }
    double ys = nice_step(y1 - y0, 5), xs = nice_step(x1 - x0, 7);
    if (c->x_int && xs < 1) xs = 1;
    if (!isfinite(c->ymin)) y0 = floor(y0 / ys + 1e-9) * ys;
    if (!isfinite(c->ymax)) y1 = ceil(y1 / ys - 1e-9) * ys;
    if (c->x_int) {
        x0 -= 0.5, x1 += 0.5;
    } else { /* the axis spans whole ticks */
        x0 = floor(x0 / xs + 1e-9) * xs;
        x1 = ceil(x1 / xs - 1e-9) * xs;
    }
    const int ml = 64, mr = 18, mt = 46, mb = 46;
    const int pw = c->w - ml - mr, ph = c->h - mt - mb;
#define PX(v) (ml + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (mt + ph - ((v) - y0) / (y1 - y0) * ph)
    sb_printf(o, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", c->w, c->h,
              c->w, c->h);
    sb_printf(o, "<text x=\"12\" y=\"22\" class=\"title\">");
    sb_esc(o, c->title);
    sb_printf(o, "</text>");
    /* legend, left to right under the title */
    double lx = ml;
    for (int k = 0; k < ns && ns > 1; k++) {
        sb_printf(o, "<line x1=\"%.1f\" y1=\"33\" x2=\"%.1f\" y2=\"33\" stroke=\"%s\" stroke-width=\"3\"/>", lx, lx + 16,
                  s[k].color);
        sb_printf(o, "<text x=\"%.1f\" y=\"37\" class=\"legend\">", lx + 20);
        sb_esc(o, s[k].name);
        sb_printf(o, "</text>");
        lx += 20 + 7.0 * (double)strlen(s[k].name) + 18;
    }
    /* grid and y ticks */
    char lab[32];
    for (double v = ceil(y0 / ys - 1e-9) * ys; v <= y1 + ys * 1e-6; v += ys) {
        double py = PY(v);
        fmt_num(lab, sizeof lab, fabs(v) < ys * 1e-6 ? 0 : v, ys);
        sb_printf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>", ml, py, ml + pw, py);
        sb_printf(o, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>", ml - 6, py + 4, lab);
    }
    /* x ticks */
    for (double v = ceil(x0 / xs - 1e-9) * xs; v <= x1 + xs * 1e-6; v += xs) {
        double px = PX(v);
        fmt_num(lab, sizeof lab, v, xs);
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"axis\"/>", px, mt + ph, px, mt + ph + 4);
        sb_printf(o, "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">%s</text>", px, mt + ph + 17, lab);
    }
    sb_printf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>", ml, mt, pw, ph);
    if (y0 < 0 && y1 > 0)
        sb_printf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"zero\"/>", ml, PY(0.0), ml + pw, PY(0.0));
    /* axis labels */
    sb_printf(o, "<text x=\"%d\" y=\"%d\" class=\"axlabel\" text-anchor=\"middle\">", ml + pw / 2, c->h - 8);
    sb_esc(o, c->xlabel);
    sb_printf(o, "</text><text class=\"axlabel\" text-anchor=\"middle\" transform=\"translate(14 %d) rotate(-90)\">",
              mt + ph / 2);
    sb_esc(o, c->ylabel);
    sb_printf(o, "</text>");
    /* series, clipped to the plot area */
    static int clip_id;
    clip_id++;
    /* (a marker's radius of slack around the plot, so points on its edge stay round) */
    sb_printf(o, "<clipPath id=\"c%d\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/></clipPath>", clip_id,
              ml - 4, mt - 4, pw + 8, ph + 8);
    sb_printf(o, "<g clip-path=\"url(#c%d)\">", clip_id);
    for (int k = 0; k < ns; k++) {
        const series_t *q = &s[k];
        if (q->lo && q->hi && q->n > MARKERS_MAX) { /* the intervals as one band: hi left to right, lo back */
            int pts = 0;
            for (int32_t i = 0; i < q->n; i++)
                pts += isfinite(q->x[i]) && isfinite(q->y[i]) && !isnan(q->lo[i]) && !isnan(q->hi[i]);
            if (pts > 1) {
                sb_printf(o, "<polygon fill=\"%s\" opacity=\"0.18\" points=\"", q->color);
                for (int pass = 0; pass < 2; pass++)
                    for (int32_t k = 0; k < q->n; k++) {
                        int32_t i = pass ? q->n - 1 - k : k;
                        if (!isfinite(q->x[i]) || !isfinite(q->y[i]) || isnan(q->lo[i]) || isnan(q->hi[i])) continue;
                        double v = pass ? q->lo[i] : q->hi[i];
                        double py = isfinite(v) ? PY(v) : v < 0 ? mt + ph + 2 : mt - 2;
                        sb_printf(o, "%.1f,%.1f ", PX(q->x[i]), py);
                    }
                sb_printf(o, "\"/>");
            }
        } else if (q->lo && q->hi) { /* error bars */
            for (int32_t i = 0; i < q->n; i++) {
                if (!isfinite(q->y[i])) continue;
                double lo = q->lo[i], hi = q->hi[i];
                if (isnan(lo) || isnan(hi)) continue;
                double plo = isfinite(lo) ? PY(lo) : mt + ph + 2, phi = isfinite(hi) ? PY(hi) : mt - 2;
                double px = PX(q->x[i]);
                sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" class=\"err\"/>", px,
                          plo, px, phi, q->color);
                if (isfinite(lo))
                    sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" class=\"err\"/>",
                              px - 4, plo, px + 4, plo, q->color);
                if (isfinite(hi))
                    sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" class=\"err\"/>",
                              px - 4, phi, px + 4, phi, q->color);
            }
        }
        int open = 0;
        for (int32_t i = 0; i < q->n; i++) {
            if (!isfinite(q->x[i]) || !isfinite(q->y[i])) {
                if (open) sb_printf(o, "\"/>");
                open = 0;
                continue;
            }
            if (!open) sb_printf(o, "<polyline fill=\"none\" stroke=\"%s\" class=\"line\" points=\"", q->color);
            sb_printf(o, "%.1f,%.1f ", PX(q->x[i]), PY(q->y[i]));
            open = 1;
        }
        if (open) sb_printf(o, "\"/>");
        if ((q->markers || q->n < 40) && q->n <= MARKERS_MAX) {
            for (int32_t i = 0; i < q->n; i++) {
                if (!isfinite(q->x[i]) || !isfinite(q->y[i])) continue;
                sb_printf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", PX(q->x[i]), PY(q->y[i]),
                          q->color);
                sb_esc(o, q->name);
                char a[32], b[32];
                fmt_num(a, sizeof a, q->x[i], c->x_int ? 1 : xs / 100);
                fmt_num(b, sizeof b, q->y[i], ys / 100);
                sb_printf(o, ": %s = %s", a, b);
                if (q->lo && q->hi) {
                    char l[32], h[32];
                    fmt_num(l, sizeof l, q->lo[i], ys / 10);
                    fmt_num(h, sizeof h, q->hi[i], ys / 10);
                    sb_printf(o, " [%s, %s]", l, h);
                }
                sb_printf(o, "</title></circle>");
            }
        }
    }
    sb_printf(o, "</g>");
    chart_end(o, c);
#undef PX
#undef PY
}

/* Vertical bars: counts[i] over bins [edges[i], edges[i+1]). */
static void histogram(sb_t *o, const chart_t *c, const double *edges, const int64_t *counts, int nb, const char *color,
                      const char *empty_why) {
    int64_t maxc = 0, total = 0;
    for (int i = 0; i < nb; i++) maxc = counts[i] > maxc ? counts[i] : maxc, total += counts[i];
    if (total == 0) {
        no_data(o, c, empty_why);
        return;
    }
    const int ml = 64, mr = 18, mt = 46, mb = 46;
    const int pw = c->w - ml - mr, ph = c->h - mt - mb;
    double x0 = edges[0], x1 = edges[nb], ys = nice_step((double)maxc, 5), y1 = ceil((double)maxc / ys) * ys;
    double xs = nice_step(x1 - x0, 8);
#define PX(v) (ml + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (mt + ph - (v) / y1 * ph)
    sb_printf(o, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", c->w, c->h,
              c->w, c->h);
    sb_printf(o, "<text x=\"12\" y=\"22\" class=\"title\">");
    sb_esc(o, c->title);
    sb_printf(o, "</text>");
    char lab[32];
    for (double v = 0; v <= y1 + ys * 1e-6; v += ys) {
        fmt_num(lab, sizeof lab, v, ys);
        sb_printf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>", ml, PY(v), ml + pw, PY(v));
        sb_printf(o, "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>", ml - 6, PY(v) + 4, lab);
    }
    for (int i = 0; i < nb; i++) {
        if (!counts[i]) continue;
        double a = PX(edges[i]), b = PX(edges[i + 1]);
        sb_printf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" class=\"bar\">", a + 0.5,
                  PY((double)counts[i]), b - a - 1 > 0.5 ? b - a - 1 : 0.5, PY(0) - PY((double)counts[i]), color);
        sb_printf(o, "<title>%g-%g plies: %lld games</title></rect>", edges[i], edges[i + 1] - 1,
                  (long long)counts[i]);
    }
    for (double v = ceil(x0 / xs) * xs; v <= x1 + 1e-9; v += xs) {
        fmt_num(lab, sizeof lab, v, xs);
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"axis\"/>", PX(v), mt + ph, PX(v),
                  mt + ph + 4);
        sb_printf(o, "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">%s</text>", PX(v), mt + ph + 17,
                  lab);
    }
    sb_printf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>", ml, mt, pw, ph);
    sb_printf(o, "<text x=\"%d\" y=\"%d\" class=\"axlabel\" text-anchor=\"middle\">", ml + pw / 2, c->h - 8);
    sb_esc(o, c->xlabel);
    sb_printf(o, "</text><text class=\"axlabel\" text-anchor=\"middle\" transform=\"translate(14 %d) rotate(-90)\">",
              mt + ph / 2);
    sb_esc(o, c->ylabel);
    sb_printf(o, "</text>");
    chart_end(o, c);
#undef PX
#undef PY
}

/* ---- what the report reads ---------------------------------------------------------------- */
enum { BUCKETS = 600, NMET = 9 };
enum { M_LOSS_POLICY, M_LOSS_VALUE, M_LOSS_LEGAL, M_LOSS_TOTAL, M_ACC_POLICY, M_ACC_LEGAL, M_ACC_VALUE, M_LR, M_GRAD };

typedef struct {
    int have_db;
    db_summary_t sum;
    /* training steps, averaged per bucket of `width` steps */
    int64_t width;
    int32_t nb;
    double bx[BUCKETS];                 /* mean step of the bucket */
    double by[NMET][BUCKETS];           /* mean of each metric (NAN: none) */
    int64_t steps;
    /* models */
    db_model_t *models;
    int32_t n_models;
    /* cycle metrics */
    db_cycle_metrics_t *cycles;
    int32_t n_cycles;
    /* games */
    int64_t games;
    int64_t plies_hist[64];
    double plies_edges[65];
    int32_t n_bins;
    int64_t reason_by[DB_REASON_NB][3]; /* [reason][black win, white win, draw] */
    int64_t max_plies;
    /* matches */
    db_match_t *matches;
    int32_t n_matches;
    ref_ladder_point_t *ladder;
    int32_t n_ladder;
    /* where the games were played (mpirun -np N selfplay) */
    db_rank_games_t *ranks;
    int32_t n_ranks;
    /* the games on the board (report_games.h) */
    rg_t *rg;
} report_run_t;

static int read_steps(db_t *db, report_run_t *r) {
    int64_t last = r->sum.last_step;
    if (last < 0) return 0;
    r->width = last / BUCKETS + 1;
    double sums[NMET][BUCKETS], sx[BUCKETS];
    int64_t cnt[NMET][BUCKETS], cx[BUCKETS];
    memset(sums, 0, sizeof sums);
    memset(cnt, 0, sizeof cnt);
    memset(sx, 0, sizeof sx);
    memset(cx, 0, sizeof cx);
    enum { CHUNK = 8192 };
    db_train_step_t *rows = malloc(sizeof *rows * CHUNK);
    if (!rows) return -1;
    int64_t from = 0;
    for (;;) {
        int32_t n = 0;
        if (db_train_steps_get(db, from, INT64_MAX, rows, CHUNK, &n) != DB_OK) {
            free(rows);
            return -1;
        }
        for (int32_t i = 0; i < n; i++) {
            const db_train_step_t *t = &rows[i];
            int64_t b = t->step / r->width;
            if (b < 0) continue;
            if (b >= BUCKETS) b = BUCKETS - 1;
            double v[NMET] = {t->loss_policy, t->loss_value, t->loss_legal, t->loss_total,
                              t->acc_policy,  t->acc_legal,  t->acc_value,  t->lr, t->grad_norm};
            for (int m = 0; m < NMET; m++)
                if (isfinite(v[m])) sums[m][b] += v[m], cnt[m][b]++;
            sx[b] += (double)t->step, cx[b]++;
            r->steps++;
        }
        if (n < CHUNK) break;
        from = rows[n - 1].step + 1;
    }
    free(rows);
    r->nb = 0;
    for (int b = 0; b < BUCKETS; b++) {
        if (!cx[b]) continue;
        r->bx[r->nb] = sx[b] / (double)cx[b];
        for (int m = 0; m < NMET; m++) r->by[m][r->nb] = cnt[m][b] ? sums[m][b] / (double)cnt[m][b] : NAN;
        r->nb++;
    }
    return 0;
}

/* The nets' joint ratings (match/rating.h) as points by cycle, cycle 0 = 0. */
static int read_ratings(db_t *db, report_run_t *r, char *err, size_t errlen) {
    rating_player_t *list = NULL;
    int32_t n = 0;
    if (rating_list(db, &list, &n, err, errlen) != DB_OK) return -1;
    r->ladder = calloc((size_t)n + 1, sizeof *r->ladder);
    if (!r->ladder) {
        free(list);
        set_err(err, errlen, "%s: out of memory", db_path(db));
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        if (list[i].cycle >= 0 && isfinite(list[i].elo))
            r->ladder[r->n_ladder++] = (ref_ladder_point_t){list[i].cycle, list[i].elo, list[i].lo, list[i].hi,
                                                            NAN, -1, 0, list[i].games};
    free(list);
    return 0;
}

static int read_run(db_t *db, report_run_t *r, char *err, size_t errlen) {
    if (db_summary(db, &r->sum) != DB_OK) goto fail;
    if (read_steps(db, r) != 0) goto fail;
    if (db_games_by_rank(db, &r->ranks, &r->n_ranks) != DB_OK) goto fail;
    int32_t max_cycle = r->sum.latest_cycle;
    /* models, cycle by cycle */
    if (r->sum.latest_cycle >= 0) {
        r->models = calloc((size_t)r->sum.latest_cycle + 1, sizeof *r->models);
        if (!r->models) goto oom;
        for (int32_t c = 0; c <= r->sum.latest_cycle; c++) {
            db_status_t st = db_model_by_cycle(db, c, &r->models[r->n_models]);
            if (st == DB_OK) r->n_models++;
            else if (st != DB_NOTFOUND) goto fail;
        }
    }
    /* games, shard by shard */
    db_shard_t *shards = NULL;
    int32_t ns = 0;
    if (db_shards_recent(db, 0, &shards, &ns) != DB_OK) goto fail;
    int64_t *plies = NULL, net_id = -1;
    size_t np = 0, capp = 0;
    int32_t net_cycle = -1;
    for (int32_t i = 0; i < ns; i++) {
        if (shards[i].cycle > max_cycle) max_cycle = shards[i].cycle;
        db_game_list_t gl = {0};
        if (db_games_of_shard(db, shards[i].id, &gl) != DB_OK) {
            free(shards);
            free(plies);
            goto fail;
        }
        for (int64_t k = 0; k < gl.n; k++) {
            const db_game_t *g = &gl.games[k];
            if (np == capp) {
                capp = capp ? 2 * capp : 4096;
                int64_t *p = realloc(plies, capp * sizeof *p);
                if (!p) {
                    db_game_list_free(&gl);
                    free(shards);
                    free(plies);
                    goto oom;
                }
                plies = p;
            }
            plies[np++] = g->plies;
            if (g->model_id != net_id) { /* the net that played it (games of a shard share it, mostly) */
                net_id = g->model_id, net_cycle = -1;
                for (int32_t m = 0; m < r->n_models && net_cycle < 0; m++)
                    if (r->models[m].id == net_id) net_cycle = r->models[m].cycle;
            }
            rg_see(r->rg, &shards[i], g, net_cycle >= 0 ? net_cycle : shards[i].cycle);
            if (g->plies > r->max_plies) r->max_plies = g->plies;
            int w = g->result > 0 ? 0 : g->result < 0 ? 1 : 2;
            if ((unsigned)g->reason < DB_REASON_NB) r->reason_by[g->reason][w]++;
        }
        db_game_list_free(&gl);
    }
    free(shards);
    r->games = (int64_t)np;
    if (np > 0) { /* bins of a round width, at most 40 of them */
        double top = (double)r->max_plies + 1, wbin = nice_step(top, 40);
        if (wbin < 1) wbin = 1;
        r->n_bins = (int32_t)ceil(top / wbin);
        if (r->n_bins > 64) r->n_bins = 64;
        for (int32_t i = 0; i <= r->n_bins; i++) r->plies_edges[i] = i * wbin;
        for (size_t i = 0; i < np; i++) {
            int32_t b = (int32_t)((double)plies[i] / wbin);
            if (b >= r->n_bins) b = r->n_bins - 1;
            r->plies_hist[b]++;
        }
    }
    free(plies);
    /* cycle metrics: every cycle up to the last one anything mentions, and a little past */
    r->cycles = calloc((size_t)max_cycle + 3, sizeof *r->cycles);
    if (!r->cycles) goto oom;
    for (int32_t c = 0; c <= max_cycle + 2; c++) {
        db_status_t st = db_cycle_metrics_get(db, c, &r->cycles[r->n_cycles]);
        if (st == DB_OK) r->n_cycles++;
        else if (st != DB_NOTFOUND) goto fail;
    }
    if (db_matches_list(db, -1, &r->matches, &r->n_matches) != DB_OK) goto fail;
    if (read_ratings(db, r, err, errlen) != 0) return -1;
    return 0;
oom:
    set_err(err, errlen, "%s: out of memory", db_path(db));
    return -1;
fail:
    set_err(err, errlen, "%s", db_errmsg(db));
    return -1;
}

/* The root search of the run's newest invocation ("gumbel", "puct"; "" unknown), from its stored config. */
static void run_search(db_t *db, char *out, size_t len) {
    db_run_t run;
    out[0] = 0;
    if (db_run_latest(db, &run) != DB_OK) return;
    for (const char *p = run.config; p && *p;) {
        while (*p == ' ' || *p == '\n' || *p == '"' || *p == '{' || *p == ',') p++;
        if (!strncmp(p, "search", 6) && (p[6] == ' ' || p[6] == '=' || p[6] == '"' || p[6] == ':')) {
            p += 6;
            while (*p == ' ' || *p == '=' || *p == '"' || *p == ':') p++;
            size_t n = 0;
            while (p[n] && p[n] != '\n' && p[n] != '"' && p[n] != ' ' && p[n] != ',' && n + 1 < len) n++;
            memcpy(out, p, n);
            out[n] = 0;
            break;
        }
        p = strchr(p, '\n');
    }
    db_run_clear(&run);
}

static void free_run(report_run_t *r) {
    free(r->models);
    free(r->cycles);
    free(r->matches);
    free(r->ladder);
    free(r->ranks);
    rg_free(r->rg);
}

/* ---- the page ------------------------------------------------------------------------------------ */
static const char *const css =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}"
    ".sub{color:#666;margin-bottom:12px}.grid{display:flex;flex-wrap:wrap;gap:12px}"
    ".stats{display:flex;flex-wrap:wrap;gap:8px 24px;margin:10px 0}.stats div{min-width:120px}"
    ".stats b{display:block;font-size:18px}.stats span{color:#666;font-size:12px}"
    "svg.chart{background:#fff;border:1px solid #e4e4e4;border-radius:4px}"
    "svg .title{font-size:14px;font-weight:600;fill:#222}svg .tick{font-size:11px;fill:#555}"
    "svg .axlabel{font-size:12px;fill:#333}svg .legend{font-size:12px;fill:#333}svg .small{font-size:11px;fill:#777}"
    "svg .nodata{font-size:16px;fill:#999}svg .grid{stroke:#eee}svg .axis{stroke:#999}"
    "svg .frame{fill:none;stroke:#bbb}svg .zero{stroke:#999;stroke-dasharray:4 3}svg .empty{fill:#fafafa;stroke:#eee}"
    "svg .line{stroke-width:1.8}svg .err{stroke-width:1.4;opacity:.7}svg .bar{opacity:.9}"
    "table{border-collapse:collapse;margin:6px 0;font-size:13px}th,td{padding:3px 10px;border-bottom:1px solid #eee;"
    "text-align:right}th{background:#f6f6f6;font-weight:600}td.l,th.l{text-align:left}.muted{color:#999}"
    ".swatch{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;vertical-align:middle}";

static void cell_num(sb_t *o, double v, const char *fmt) {
    if (isnan(v)) sb_printf(o, "<td class=\"muted\">-</td>");
    else if (isinf(v)) sb_printf(o, "<td>%sinf</td>", v > 0 ? "+" : "-");
    else {
        sb_printf(o, "<td>");
        sb_printf(o, fmt, v);
        sb_printf(o, "</td>");
    }
}

static void stat(sb_t *o, const char *label, const char *fmt, ...) PRINTF_LIKE(3, 4);
static void stat(sb_t *o, const char *label, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    sb_printf(o, "<div><b>");
    sb_esc(o, buf);
    sb_printf(o, "</b><span>%s</span></div>", label);
}

static void section_training(sb_t *o, const report_run_t *r) {
    sb_printf(o, "<h2>Training</h2><div class=\"grid\">");
    char note[96];
    if (r->width > 1) snprintf(note, sizeof note, "mean of every %lld steps", (long long)r->width);
    else note[0] = 0;
    chart_t c = {"Losses", "training step", "loss", 600, 330, 1, NAN, NAN, 0, note[0] ? note : NULL};
    series_t s[4] = {
        {"policy", palette[0], r->nb, r->bx, r->by[M_LOSS_POLICY], NULL, NULL, 0},
        {"value", palette[1], r->nb, r->bx, r->by[M_LOSS_VALUE], NULL, NULL, 0},
        {"legal", palette[2], r->nb, r->bx, r->by[M_LOSS_LEGAL], NULL, NULL, 0},
        {"total", palette[3], r->nb, r->bx, r->by[M_LOSS_TOTAL], NULL, NULL, 0},
    };
    line_chart(o, &c, s, 4, "the trainer has not logged a step");
    chart_t a = {"Accuracy", "training step", "fraction", 600, 330, 0, 0.0, 1.0, 0, note[0] ? note : NULL};
    series_t sa[3] = {
        {"policy top-1", palette[0], r->nb, r->bx, r->by[M_ACC_POLICY], NULL, NULL, 0},
        {"legal-move F1", palette[2], r->nb, r->bx, r->by[M_ACC_LEGAL], NULL, NULL, 0},
        {"value", palette[1], r->nb, r->bx, r->by[M_ACC_VALUE], NULL, NULL, 0},
    };
    int has_val = 0;
    for (int32_t i = 0; i < r->nb; i++) has_val |= isfinite(r->by[M_ACC_VALUE][i]);
    line_chart(o, &a, sa, has_val ? 3 : 2, "the trainer has not logged a step");
    chart_t l = {"Learning rate", "training step", "learning rate", 600, 260, 1, NAN, NAN, 0, NULL};
    series_t sl = {"lr", palette[4], r->nb, r->bx, r->by[M_LR], NULL, NULL, 0};
    line_chart(o, &l, &sl, 1, "the trainer has not logged a step");
    chart_t gn = {"Gradient norm (before clipping)", "training step", "norm", 600, 260, 1, NAN, NAN, 0,
                  note[0] ? note : NULL};
    series_t sg = {"grad norm", palette[5], r->nb, r->bx, r->by[M_GRAD], NULL, NULL, 0};
    line_chart(o, &gn, &sg, 1, "the trainer has not logged a step");
    sb_printf(o, "</div>");
}

/* Within one selfplay session a cycle starts the moment the one before it
 * finishes; a longer pause between them is the run standing still (stopped
 * and resumed later), which an hours axis should not count. */
#define RESUME_GAP_S 60.0

/* The run's first start (NAN if no cycle is timed), and in off[k] the time
 * it stood still before cycles[k], which are in cycle order. */
static double run_clock(const db_cycle_metrics_t *c, int32_t n, double *off) {
    double t0 = NAN, last = NAN, idle = 0.0;
    for (int32_t k = 0; k < n; k++) {
        if (isfinite(c[k].started)) {
            if (!(c[k].started >= t0)) t0 = c[k].started;
            if (c[k].started - last > RESUME_GAP_S) idle += c[k].started - last;
        }
        off[k] = idle;
        if (isfinite(c[k].finished)) last = c[k].finished;
    }
    return t0;
}

/* How many of n rows a table leaves out (all but the newest TABLE_ROWS_MAX), with a row saying so. */
static int32_t table_skip(sb_t *o, int32_t n, int cols, const char *what) {
    if (n <= TABLE_ROWS_MAX) return 0;
    sb_printf(o, "<tr><td class=\"l muted\" colspan=\"%d\">%d earlier %s not shown (koma.db holds them all)</td></tr>",
              cols, n - TABLE_ROWS_MAX, what);
    return n - TABLE_ROWS_MAX;
}

static void section_elo(sb_t *o, const report_run_t *r) {
    sb_printf(o, "<h2>Strength</h2><div class=\"grid\">");
    double *x = calloc((size_t)r->n_ladder + 1, sizeof(double) * 4);
    if (x) {
        double *y = x + r->n_ladder + 1, *lo = y + r->n_ladder + 1, *hi = lo + r->n_ladder + 1;
        for (int32_t i = 0; i < r->n_ladder; i++) {
            x[i] = r->ladder[i].cycle;
            y[i] = r->ladder[i].elo;
            lo[i] = r->ladder[i].elo_lo;
            hi[i] = r->ladder[i].elo_hi;
        }
        chart_t c = {"Elo by cycle (cycle 0 = 0, 95% interval)", "cycle", "Elo", 600, 330, 1, NAN, NAN, 1,
                     "one joint fit over every match of the run"};
        series_t s = {"Elo", palette[0], r->n_ladder, x, y, lo, hi, 1};
        line_chart(o, &c, &s, 1, "no evaluation match between two nets of this run yet");
        /* The same ratings against the hours the run has been running: each
         * net at the end of the cycle that made it (its cycle_metrics row). */
        double *off = malloc(((size_t)r->n_cycles + 1) * sizeof *off);
        double t0 = off ? run_clock(r->cycles, r->n_cycles, off) : NAN;
        int32_t n = 0;
        for (int32_t i = 0; i < r->n_ladder && isfinite(t0); i++)
            for (int32_t k = 0; k < r->n_cycles; k++) {
                const db_cycle_metrics_t *m = &r->cycles[k];
                if (m->cycle != r->ladder[i].cycle || !isfinite(m->finished)) continue;
                double tr = isfinite(m->train_s) ? m->train_s : 0.0;
                x[n] = (m->finished + tr - t0 - off[k]) / 3600.0;
                y[n] = r->ladder[i].elo, lo[n] = r->ladder[i].elo_lo, hi[n] = r->ladder[i].elo_hi;
                n++;
            }
        free(off);
        chart_t ch = {"Elo by hours of running (cycle 0 = 0, 95% interval)", "hours", "Elo", 600, 330, 1, NAN, NAN, 0,
                      "each net when its cycle was done; pauses between sessions left out"};
        series_t sh = {"Elo", palette[1], n, x, y, lo, hi, 1};
        line_chart(o, &ch, &sh, 1, "no rated net with timed cycles yet");
        free(x);
    }
    sb_printf(o, "</div>");
    /* the ladder and every match as a table: A is a net of the run (its
     * cycle) or another engine (cycle "-"), named as in its games */
    if (r->n_matches > 0) {
        sb_printf(o, "<table><tr><th>match</th><th>cycle</th><th class=\"l\">player A</th><th class=\"l\">opponent</th>"
                     "<th>games</th><th>W</th><th>D</th><th>L</th><th>Elo</th><th>95%% interval</th>"
                     "<th class=\"l\">settings</th><th class=\"l\">when</th></tr>");
        for (int32_t i = table_skip(o, r->n_matches, 12, "matches"); i < r->n_matches; i++) {
            const db_match_t *m = &r->matches[i];
            sb_printf(o, "<tr><td>%lld</td>", (long long)m->id);
            if (m->cycle >= 0) sb_printf(o, "<td>%d</td>", m->cycle);
            else sb_printf(o, "<td>-</td>");
            sb_printf(o, "<td class=\"l\">");
            sb_esc(o, m->engine_a[0] ? m->engine_a : m->model_a ? "net" : "?");
            sb_printf(o, "</td><td class=\"l\">");
            int found = 0;
            for (int32_t k = 0; k < r->n_models && m->model_b; k++)
                if (r->models[k].id == m->model_b) {
                    sb_printf(o, "cycle %d", r->models[k].cycle);
                    found = 1;
                }
            if (!found) sb_esc(o, m->opponent[0] ? m->opponent : m->engine_b[0] ? m->engine_b : "?");
            sb_printf(o, "</td><td>%lld</td><td>%d</td><td>%d</td><td>%d</td>", (long long)m->games, m->wins, m->draws,
                      m->losses);
            cell_num(o, m->elo, "%+.0f");
            if (isnan(m->elo) && m->games > 0) { /* games and no Elo: it never finished (data/db.h) */
                sb_printf(o, "<td class=\"muted\">unfinished</td><td class=\"l\">");
            } else {
                char a[32], b[32];
                fmt_num(a, sizeof a, m->elo_lo, 1);
                fmt_num(b, sizeof b, m->elo_hi, 1);
                sb_printf(o, "<td>[%s, %s]</td><td class=\"l\">", a, b);
            }
            sb_esc(o, m->settings);
            sb_printf(o, "</td><td class=\"l\">");
            sb_esc(o, m->created);
            sb_printf(o, "</td></tr>");
        }
        sb_printf(o, "</table>");
    }
    /* match games are not self-play games: counted here, not in the charts below */
    if (r->sum.match_games > 0) {
        sb_printf(o, "<p class=\"muted\">%lld match games, ended by", (long long)r->sum.match_games);
        int any = 0;
        for (int k = 0; k < DB_REASON_NB; k++)
            if (r->sum.match_reasons[k])
                sb_printf(o, "%s %s %lld", any++ ? "," : "", db_reason_name((db_reason_t)k),
                          (long long)r->sum.match_reasons[k]);
        sb_printf(o, "</p>");
    }
}

/* The resign threshold(s) of the cycles that recorded one, in words. */
static void resign_threshold_text(const report_run_t *r, char *buf, size_t len) {
    double lo = INFINITY, hi = -INFINITY;
    for (int32_t i = 0; i < r->n_cycles; i++) {
        double t = r->cycles[i].resign_threshold;
        if (isfinite(t)) lo = fmin(lo, t), hi = fmax(hi, t);
    }
    if (!isfinite(lo)) snprintf(buf, len, "resign threshold not recorded");
    else if (hi <= 0.0) snprintf(buf, len, "resignation off");
    else if (lo == hi) snprintf(buf, len, "resign threshold %.2f", lo);
    else snprintf(buf, len, "resign threshold %.2f to %.2f", lo, hi);
}

/* False resignations by cycle: of the no-resign games in which a side fell
 * below the threshold (it would have resigned), the share it did not lose;
 * and how often a no-resign game got there at all. */
static void section_resign(sb_t *o, const report_run_t *r) {
    int32_t n = r->n_cycles;
    double *buf = calloc((size_t)n + 1, sizeof(double) * 3);
    if (!buf) return;
    double *x = buf, *rate = x + n + 1, *would = rate + n + 1;
    for (int32_t i = 0; i < n; i++) {
        const db_cycle_metrics_t *m = &r->cycles[i];
        x[i] = m->cycle;
        rate[i] = m->would_resign > 0 && m->false_resign >= 0
                      ? 100.0 * (double)m->false_resign / (double)m->would_resign
                      : NAN;
        would[i] = m->no_resign_games > 0 && m->would_resign >= 0
                       ? 100.0 * (double)m->would_resign / (double)m->no_resign_games
                       : NAN;
    }
    char note[96];
    resign_threshold_text(r, note, sizeof note);
    chart_t c = {"False resignations in no-resign games", "cycle", "%", 600, 260, 1, 0, 100, 1, note};
    series_t s[2] = {{"false, % of would-be", palette[1], n, x, rate, NULL, NULL, 1},
                     {"would-be, % of no-resign", "#999999", n, x, would, NULL, NULL, 1}};
    line_chart(o, &c, s, 2, "no cycle has recorded no-resign games (--no-resign-fraction)");
    free(buf);
}

/* The same figures as a table, cycles that recorded them only. */
static void resign_table(sb_t *o, const report_run_t *r) {
    int any = 0;
    for (int32_t i = 0; i < r->n_cycles; i++) any |= r->cycles[i].no_resign_games >= 0;
    if (!any) return;
    sb_printf(o, "<table><tr><th>cycle</th><th>games</th><th>no-resign games</th><th>would have resigned</th>"
                 "<th>false resignations</th><th>false-resignation rate</th><th>resign threshold</th></tr>");
    int32_t rows = 0;
    for (int32_t i = 0; i < r->n_cycles; i++) rows += r->cycles[i].no_resign_games >= 0;
    int32_t skip = table_skip(o, rows, 7, "cycles");
    for (int32_t i = 0; i < r->n_cycles; i++) {
        const db_cycle_metrics_t *m = &r->cycles[i];
        if (m->no_resign_games < 0 || skip-- > 0) continue;
        sb_printf(o, "<tr><td>%d</td><td>%lld</td><td>%lld</td>", m->cycle,
                  (long long)(m->black_wins + m->white_wins + m->draws), (long long)m->no_resign_games);
        if (m->would_resign >= 0) sb_printf(o, "<td>%lld</td>", (long long)m->would_resign);
        else sb_printf(o, "<td class=\"muted\">-</td>");
        if (m->false_resign >= 0) sb_printf(o, "<td>%lld</td>", (long long)m->false_resign);
        else sb_printf(o, "<td class=\"muted\">-</td>");
        cell_num(o, m->would_resign > 0 && m->false_resign >= 0
                        ? 100.0 * (double)m->false_resign / (double)m->would_resign
                        : NAN,
                 "%.1f%%");
        if (isfinite(m->resign_threshold) && m->resign_threshold <= 0.0) sb_printf(o, "<td>off</td>");
        else cell_num(o, m->resign_threshold, "%.2f");
        sb_printf(o, "</tr>");
    }
    sb_printf(o, "</table>");
}

/* One row per rank that played games (shown for runs of more than one rank). */
static void ranks_table(sb_t *o, const report_run_t *r) {
    if (r->n_ranks < 2) return;
    sb_printf(o, "<h3>Ranks</h3><table><tr><th>rank</th><th>host</th><th>games</th><th>positions</th>"
                 "<th>positions/s (first to last game)</th><th>first game</th><th>last game</th></tr>");
    for (int32_t i = 0; i < r->n_ranks; i++) {
        const db_rank_games_t *k = &r->ranks[i];
        sb_printf(o, "<tr><td>%d</td><td>", k->rank);
        sb_esc(o, k->host);
        sb_printf(o, "</td><td>%lld</td><td>%lld</td>", (long long)k->games, (long long)k->positions);
        cell_num(o, k->seconds > 0 ? (double)k->positions / k->seconds : NAN, "%.1f");
        sb_printf(o, "<td>");
        sb_esc(o, k->first);
        sb_printf(o, "</td><td>");
        sb_esc(o, k->last);
        sb_printf(o, "</td></tr>");
    }
    sb_printf(o, "</table>");
}

static void section_selfplay(sb_t *o, const report_run_t *r) {
    sb_printf(o, "<h2>Self-play</h2><div class=\"grid\">");
    int32_t n = r->n_cycles;
    double *buf = calloc((size_t)n + 1, sizeof(double) * 9);
    if (!buf) return;
    double *x = buf, *pps = x + n + 1, *eps = pps + n + 1, *bat = eps + n + 1, *busy = bat + n + 1;
    double *bw = busy + n + 1, *ww = bw + n + 1, *dr = ww + n + 1, *pl = dr + n + 1;
    for (int32_t i = 0; i < n; i++) {
        const db_cycle_metrics_t *m = &r->cycles[i];
        x[i] = m->cycle;
        pps[i] = m->positions_per_s;
        eps[i] = m->evals_per_s;
        bat[i] = m->avg_batch;
        busy[i] = m->busy_pct;
        double g = (double)(m->black_wins + m->white_wins + m->draws);
        bw[i] = g > 0 ? 100.0 * (double)m->black_wins / g : NAN;
        ww[i] = g > 0 ? 100.0 * (double)m->white_wins / g : NAN;
        dr[i] = g > 0 ? 100.0 * (double)m->draws / g : NAN;
        pl[i] = m->avg_plies;
    }
    const char *why = "no self-play cycle has been recorded";
    chart_t c1 = {"Positions per second", "cycle", "positions/s", 600, 260, 1, NAN, NAN, 1, NULL};
    series_t s1 = {"positions/s", palette[0], n, x, pps, NULL, NULL, 1};
    line_chart(o, &c1, &s1, 1, why);
    chart_t c2 = {"Network evaluations per second", "cycle", "evaluations/s", 600, 260, 1, NAN, NAN, 1, NULL};
    series_t s2 = {"evals/s", palette[1], n, x, eps, NULL, NULL, 1};
    line_chart(o, &c2, &s2, 1, why);
    chart_t c3 = {"Average inference batch", "cycle", "positions per batch", 600, 260, 1, NAN, NAN, 1, NULL};
    series_t s3 = {"avg batch", palette[2], n, x, bat, NULL, NULL, 1};
    line_chart(o, &c3, &s3, 1, why);
    chart_t c4 = {"Inference device busy", "cycle", "busy %", 600, 260, 1, 0, 100, 1, NULL};
    series_t s4 = {"busy %", palette[3], n, x, busy, NULL, NULL, 1};
    line_chart(o, &c4, &s4, 1, why);
    chart_t c5 = {"Self-play results", "cycle", "% of the cycle's games", 600, 260, 1, 0, 100, 1, NULL};
    series_t s5[3] = {{"Black won", "#333333", n, x, bw, NULL, NULL, 1},
                      {"White won", "#999999", n, x, ww, NULL, NULL, 1},
                      {"draw", palette[0], n, x, dr, NULL, NULL, 1}};
    line_chart(o, &c5, s5, 3, why);
    chart_t c6 = {"Average game length", "cycle", "plies", 600, 260, 1, NAN, NAN, 1, NULL};
    series_t s6 = {"plies", palette[6], n, x, pl, NULL, NULL, 1};
    line_chart(o, &c6, &s6, 1, why);
    free(buf);
    section_resign(o, r);
    sb_printf(o, "</div>");
    resign_table(o, r);
    ranks_table(o, r);
}

static void section_games(sb_t *o, const report_run_t *r) {
    sb_printf(o, "<h2>Games</h2><div class=\"grid\">");
    char note[96];
    snprintf(note, sizeof note, "%lld self-play games", (long long)r->games);
    chart_t h = {"Game length", "plies", "games", 600, 330, 1, NAN, NAN, 1, r->games ? note : NULL};
    histogram(o, &h, r->plies_edges, r->plies_hist, r->n_bins, palette[0], "no game has been recorded");
    /* how games ended: one row per reason, split by winner */
    const int w = 600, rowh = 26, top = 58;
    int rows = 0;
    int64_t maxr = 0;
    for (int k = 0; k < DB_REASON_NB; k++) {
        int64_t t = r->reason_by[k][0] + r->reason_by[k][1] + r->reason_by[k][2];
        if (t) rows++;
        if (t > maxr) maxr = t;
    }
    chart_t e = {"How games ended", "", "", w, 330, 0, NAN, NAN, 0, NULL};
    if (rows == 0) {
        no_data(o, &e, "no game has been recorded");
    } else {
        int hgt = top + rows * rowh + 28;
        if (hgt < 330) hgt = 330; /* as tall as the histogram beside it */
        const int ml = 130, mr = 70, pw = w - ml - mr;
        static const char *const outcome[3] = {"Black won", "White won", "draw"};
        static const char *const col[3] = {"#333333", "#c8c8c8", "#7fb3d5"};
        sb_printf(o, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", w, hgt, w,
                  hgt);
        sb_printf(o, "<text x=\"12\" y=\"22\" class=\"title\">How games ended</text>");
        double lx = ml;
        for (int k = 0; k < 3; k++) {
            sb_printf(o, "<rect x=\"%.1f\" y=\"29\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#888\" "
                         "stroke-width=\"0.5\"/><text x=\"%.1f\" y=\"39\" class=\"legend\">%s</text>",
                      lx, col[k], lx + 16, outcome[k]);
            lx += 16 + 7.5 * (double)strlen(outcome[k]) + 20;
        }
        int row = 0;
        for (int k = 0; k < DB_REASON_NB; k++) {
            int64_t t = r->reason_by[k][0] + r->reason_by[k][1] + r->reason_by[k][2];
            if (!t) continue;
            int y = top + row * rowh;
            sb_printf(o, "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"end\">%s</text>", ml - 8, y + 15,
                      db_reason_name((db_reason_t)k));
            double x = ml;
            for (int j = 0; j < 3; j++) {
                if (!r->reason_by[k][j]) continue;
                double bw = (double)r->reason_by[k][j] / (double)maxr * pw;
                sb_printf(o, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s, %s: %lld"
                             "</title></rect>",
                          x, y + 3, bw, rowh - 6, col[j], db_reason_name((db_reason_t)k), outcome[j],
                          (long long)r->reason_by[k][j]);
                x += bw;
            }
            sb_printf(o, "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%lld (%.0f%%)</text>", x + 6, y + 15, (long long)t,
                      100.0 * (double)t / (double)(r->games ? r->games : 1));
            row++;
        }
        sb_printf(o, "</svg>\n");
    }
    sb_printf(o, "</div>");
    /* the same as a table, with colours */
    if (rows) {
        sb_printf(o, "<table><tr><th class=\"l\">reason</th><th>Black won</th><th>White won</th><th>draw</th>"
                     "<th>all</th></tr>");
        for (int k = 0; k < DB_REASON_NB; k++) {
            int64_t t = r->reason_by[k][0] + r->reason_by[k][1] + r->reason_by[k][2];
            if (!t) continue;
            sb_printf(o, "<tr><td class=\"l\">%s</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td></tr>",
                      db_reason_name((db_reason_t)k), (long long)r->reason_by[k][0], (long long)r->reason_by[k][1],
                      (long long)r->reason_by[k][2], (long long)t);
        }
        sb_printf(o, "</table>");
    }
}

static void section_models(sb_t *o, const report_run_t *r) {
    sb_printf(o, "<h2>Models</h2>");
    if (r->n_models == 0) {
        sb_printf(o, "<p class=\"muted\">no data yet: no net has been published</p>");
        return;
    }
    sb_printf(o, "<table><tr><th>cycle</th><th class=\"l\">file</th><th class=\"l\">net</th><th>train steps</th>"
                 "<th>samples</th><th>policy loss</th><th>value loss</th><th>legal loss</th><th>total</th><th>Elo</th>"
                 "<th class=\"l\">published</th></tr>");
    for (int32_t i = table_skip(o, r->n_models, 11, "models"); i < r->n_models; i++) {
        const db_model_t *m = &r->models[i];
        sb_printf(o, "<tr><td>%d</td><td class=\"l\">", m->cycle);
        sb_esc(o, m->path);
        sb_printf(o, "</td><td class=\"l\">");
        sb_esc(o, m->arch);
        sb_printf(o, "</td><td>%lld</td><td>%lld</td>", (long long)m->train_steps, (long long)m->train_samples);
        cell_num(o, m->loss_policy, "%.4f");
        cell_num(o, m->loss_value, "%.4f");
        cell_num(o, m->loss_legal, "%.4f");
        cell_num(o, m->loss_total, "%.4f");
        double elo = NAN;
        for (int32_t k = 0; k < r->n_ladder; k++)
            if (r->ladder[k].cycle == m->cycle) elo = r->ladder[k].elo;
        cell_num(o, elo, "%+.0f");
        sb_printf(o, "<td class=\"l\">");
        sb_esc(o, m->created);
        sb_printf(o, "</td></tr>");
    }
    sb_printf(o, "</table>");
}

/* Who wrote the page and whether the run was going then (selfplay's --live / --final writes). */
typedef enum { BY_HAND, BY_LIVE, BY_FINAL } written_by_t;

static void render(sb_t *o, const char *title, const report_run_t *r, const char *note, written_by_t by) {
    char now[64];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
    sb_printf(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Koma run report: ");
    sb_esc(o, title);
    sb_printf(o, "</title><meta name=\"viewport\" content=\"width=device-width\"><style>%s</style></head><body>\n", css);
    sb_printf(o, "<h1>Koma run: ");
    sb_esc(o, title);
    sb_printf(o, "</h1><div class=\"sub\" id=\"written\">report written %s", now);
    if (by == BY_LIVE)
        sb_printf(o, " by selfplay while the run was going (it rewrites this page after each evaluated cycle: "
                     "reload to follow the run)");
    else if (by == BY_FINAL) sb_printf(o, " by selfplay as the run stopped (not going when written)");
    else sb_printf(o, " by report");
    if (r->sum.first_run[0]) {
        sb_printf(o, "; run started ");
        sb_esc(o, r->sum.first_run);
        sb_printf(o, ", last resumed ");
        sb_esc(o, r->sum.last_run);
    }
    sb_printf(o, "</div>");
    if (note) {
        sb_printf(o, "<p class=\"muted\">");
        sb_esc(o, note);
        sb_printf(o, "</p>");
    }
    sb_printf(o, "<div class=\"stats\">");
    if (r->sum.latest_cycle >= 0) stat(o, "latest cycle", "%d", r->sum.latest_cycle);
    else stat(o, "latest cycle", "-");
    stat(o, "self-play games", "%lld", (long long)r->sum.games);
    if (r->sum.match_games > 0) stat(o, "match games", "%lld", (long long)r->sum.match_games);
    stat(o, "positions", "%lld", (long long)r->sum.positions);
    /* the trainer numbers its steps from 1 (nn_metrics_t.step: the count after the step) */
    stat(o, "training steps", "%lld", (long long)(r->sum.last_step > 0 ? r->sum.last_step : 0));
    if (isfinite(r->sum.last_loss_total)) stat(o, "last total loss", "%.4f", r->sum.last_loss_total);
    else stat(o, "last total loss", "-");
    if (r->sum.games > 0) {
        stat(o, "Black / White / draw", "%.0f%% / %.0f%% / %.0f%%", 100.0 * (double)r->sum.black_wins / (double)r->sum.games,
             100.0 * (double)r->sum.white_wins / (double)r->sum.games, 100.0 * (double)r->sum.draws / (double)r->sum.games);
        stat(o, "average length", "%.1f plies", r->sum.avg_plies);
    }
    if (r->n_ladder > 0) {
        const ref_ladder_point_t *p = &r->ladder[r->n_ladder - 1];
        stat(o, "Elo (joint rating, cycle 0 = 0)", "%+.0f [%+.0f, %+.0f] at cycle %d", p->elo, p->elo_lo, p->elo_hi, p->cycle);
    }
    stat(o, "shard data", "%.1f MB", (double)r->sum.shard_bytes / 1e6);
    sb_printf(o, "</div>\n");
    rg_render(o, r->rg);
    section_training(o, r);
    section_elo(o, r);
    section_selfplay(o, r);
    section_games(o, r);
    section_models(o, r);
    sb_printf(o, "\n</body></html>\n");
}

/* The name this program was run as: report in the build, koma-report where
 * installed (compat/version.h); in usage, --version and every message. */
static const char *g_prog = "report";

static void usage(FILE *out) {
    fprintf(out,
            "usage: %s RUN_DIR [-o FILE] [--game ID]...\n"
            "       %s --db FILE -o FILE [--game ID]...\n"
            "Writes an HTML report of a run, one self-contained file (default\n"
            "RUN_DIR/report.html); --db reads a database file instead of a run (its\n"
            "shards are looked for beside it). The page shows chosen games on a board;\n"
            "--game ID adds one (ids as inspect and koma.db give them; match games < 0).\n"
            "--live / --final: the page says it was written by a running selfplay, or\n"
            "as the run stopped (selfplay passes them).\n",
            g_prog, g_prog);
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "report");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    const char *run = NULL, *dbfile = NULL, *out = NULL;
    int64_t named[RG_NAMED_MAX];
    int32_t n_named = 0;
    written_by_t by = BY_HAND;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--game") && i + 1 < argc) {
            char *end = NULL;
            long long id = strtoll(argv[++i], &end, 10);
            if (!end || *end || end == argv[i] || id == 0 || n_named == RG_NAMED_MAX) {
                fprintf(stderr, "%s: --game '%s': %s\n", g_prog, argv[i],
                        n_named == RG_NAMED_MAX ? "too many games named" : "not a game id (a non-zero integer)");
                return 2;
            }
            named[n_named++] = (int64_t)id;
        } else if (!strcmp(argv[i], "--live")) by = BY_LIVE;
        else if (!strcmp(argv[i], "--final")) by = BY_FINAL;
        else if (!strcmp(argv[i], "--db") && i + 1 < argc) dbfile = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !run) run = argv[i];
        else {
            fprintf(stderr, "%s: unknown or incomplete argument '%s'\n", g_prog, argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if ((run != NULL) == (dbfile != NULL) || (dbfile && !out)) {
        usage(stderr);
        return 2;
    }
    char dbp[1200], outp[1200], err[DB_ERR_MAX + 64];
    if (run) run_path(run, RUN_DB, dbp, sizeof dbp);
    else snprintf(dbp, sizeof dbp, "%s", dbfile);
    if (out) snprintf(outp, sizeof outp, "%s", out);
    else run_path(run, RUN_REPORT, outp, sizeof outp);
    /* Never a run's file (but the run's own report.html), a device or a directory (data/run.h), nor the database
     * read. */
    compat_file_id_t id_db, id_out;
    if (run_output_check_own(outp, run, RUN_REPORT, "report", "-o", err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    if (compat_file_id(dbp, &id_db) == 0 && compat_file_id(outp, &id_out) == 0 && compat_file_id_equal(&id_db, &id_out)) {
        fprintf(stderr, "%s: refusing to write report to %s: it is the database being reported (choose another -o)\n",
                g_prog, outp);
        return 1;
    }

    report_run_t *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        return 1;
    }
    r->sum.latest_cycle = -1;
    r->sum.last_step = -1;
    r->sum.last_loss_total = NAN;
    r->rg = rg_new(named, n_named);
    if (!r->rg) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        free(r);
        return 1;
    }
    const char *note = NULL;
    db_t *db = NULL;
    if (!compat_file_exists(dbp)) { /* nothing to report is an error, as for every tool */
        if (run && !compat_is_dir(run)) fprintf(stderr, "%s: %s: no such run directory\n", g_prog, run);
        else if (run)
            fprintf(stderr, "%s: %s: no koma.db: not a Koma run directory (nothing has been recorded there; "
                            "give the directory of a run)\n", g_prog, dbp);
        else fprintf(stderr, "%s: %s: no such file\n", g_prog, dbfile);
        rg_free(r->rg);
        free(r);
        return 1;
    } else {
        if (db_open(dbp, DB_OPEN_READONLY | DB_OPEN_MIGRATE, &db, err, sizeof err) == DB_OK && db_migrated_from(db))
            fprintf(stderr, "%s: %s: migrated from schema version %d to %d\n", g_prog, dbp, db_migrated_from(db),
                    db_schema_version(db));
        char base[1200], search[32];
        /* the directory the shards' paths start from: the run's, or the database file's */
        if (run) snprintf(base, sizeof base, "%s", run);
        else {
            snprintf(base, sizeof base, "%s", dbfile);
            char *slash = strrchr(base, '/'), *bs = strrchr(base, '\\');
            if (bs && (!slash || bs > slash)) slash = bs;
            if (slash) slash[slash == base ? 1 : 0] = 0;
            else snprintf(base, sizeof base, ".");
        }
        if (db) run_search(db, search, sizeof search);
        if (!db || read_run(db, r, err, sizeof err) != 0 || rg_finish(r->rg, db, base, search, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", g_prog, db ? (err[0] ? err : db_errmsg(db)) : err);
            db_close(db);
            free_run(r);
            free(r);
            return 1;
        }
        r->have_db = 1;
    }
    const char *title = run ? run : dbfile;
    sb_t o = {NULL, 0, 0, 0};
    render(&o, title, r, note, by);
    int rc = 0;
    if (o.oom) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        rc = 1;
    } else if (run_output_check_own(outp, run, RUN_REPORT, "report", "-o", err, sizeof err) != 0 ||
               compat_write_file_durable(outp, o.s, o.n, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        rc = 1;
    } else {
        printf("%s: %lld self-play games, %lld training steps, %d models, %d matches (%lld games); %d games on the "
               "board (%.0f kB of %.0f kB)\n",
               outp, (long long)r->sum.games, (long long)r->steps, r->n_models, r->n_matches,
               (long long)r->sum.match_games, rg_games(r->rg), (double)rg_bytes(r->rg) / 1e3, (double)o.n / 1e3);
    }
    free(o.s);
    db_close(db);
    free_run(r);
    free(r);
    return rc;
}
