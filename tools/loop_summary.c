/* loop_summary.c - `loop-summary`: what a stretch of `selfplay` did, in
 * figures, from the run it leaves: tools/gpu-checks.sh's `loop` stage prints
 * it after a timed loop on a lent GPU (and its CPU twin in the tests).
 *
 *   loop-summary RUN_DIR [--wall SECONDS] [--exit CODE]
 *
 * Reads RUN_DIR/koma.db (read-only) and RUN_DIR/log, writes nothing. Prints
 * one "key value  note" line per figure (keys in one column, values numbers
 * where they are figures; "n/a" when the run has none), then a table by cycle:
 *   cycles_published   models after the random first net (model 0)
 *   positions_per_s, evals_per_s, avg_batch, inference_busy_pct
 *                      cycle_metrics of the cycles whose self-play finished,
 *                      weighted by their self-play seconds
 *   trainer_samples_per_s  samples / seconds of the trained cycles' steps
 *                      (the trainer's "cycle C: N steps x B ... -> path" and
 *                      "cycle C: steps S s, device D s" log lines)
 *   samples_per_position   trained samples / new positions of those cycles,
 *                      against the run's configured --samples-per-position
 *                      (min/max-steps-per-cycle clamp it)
 *   device_s_inference     sum of busy x self-play seconds x workers (the
 *                      server's stopwatch: CUDA events over each forward)
 *   device_s_training      sum of the trainer stream's time over the steps
 *                      (CUDA events from a cycle's first step to its last)
 *   device_split       each as device seconds per wall second (inference over
 *                      the finished self-play cycles, training over the wall),
 *                      and their shares of the two
 *   run_committed      yes when no shard write is pending and every
 *                      registered model and shard file is there
 * --wall: the invocation's wall seconds (else the log's first to last line);
 * --exit: its exit status, named in the first line.
 *
 * Exit status: 0 printed, 1 the run cannot be read (the message names the
 * file), 2 usage. Owns: presentation only; the figures are the driver's,
 * the server's and the trainer's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "compat/version.h"
#include "data/db.h"
#include "data/run.h"

#define LS_MAX_CYCLES 4096

typedef struct {
    int have_metrics, have_model, have_train_line, have_device;
    db_cycle_metrics_t m;
    int64_t new_positions; /* rows of the cycle's shards */
    int64_t samples;       /* trained in this cycle: train_samples(c) - train_samples(c - 1) */
    int64_t steps, batch;
    double step_s, device_s, log_samples_per_s;
} cyc_t;

static void usage(FILE *out) {
    fprintf(out, "usage: loop-summary RUN_DIR [--wall SECONDS] [--exit CODE]\n"
                 "The figures of a selfplay loop from RUN_DIR/koma.db and RUN_DIR/log (read only):\n"
                 "cycles, positions/s, evaluations/s, batch, trainer samples/s, samples per\n"
                 "position against the configured value, device time of inference and training.\n");
}

/* "2026-12-02T00:16:21.060Z" or "2026-12-02 00:16:21" -> unix seconds, NAN when unreadable. */
static double iso_seconds(const char *s) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    double frac = 0;
    int y, mo, d, h, mi;
    double sec;
    if (sscanf(s, "%d-%d-%d%*[T ]%d:%d:%lf", &y, &mo, &d, &h, &mi, &sec) != 6) return NAN;
    tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi;
    tm.tm_sec = (int)sec;
    frac = sec - (int)sec;
#ifdef _WIN32
    time_t t = _mkgmtime(&tm);
#else
    time_t t = timegm(&tm);
#endif
    return (double)t + frac;
}

/* The value of `key = value` in the run's stored flags, or NAN. */
static double config_value(const char *config, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = config; p && *p;) {
        if (!strncmp(p, key, kl) && (p[kl] == ' ' || p[kl] == '=')) {
            const char *q = strchr(p, '=');
            if (q) return strtod(q + 1, NULL);
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NAN;
}

typedef struct {
    int workers;
    char backend[16];
    double first_t, last_t; /* timestamps of the first and last lines */
} log_facts_t;

/* The run log: inference workers, the trainer's lines per cycle. */
static void read_log(const char *path, cyc_t *cy, int32_t ncy, log_facts_t *lf) {
    FILE *f = fopen(path, "r");
    lf->workers = 0;
    lf->backend[0] = 0;
    lf->first_t = lf->last_t = NAN;
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        double t = iso_seconds(line);
        if (!isnan(t)) {
            if (isnan(lf->first_t)) lf->first_t = t;
            lf->last_t = t;
        }
        const char *p;
        /* "net: ... = 4x32, generation 1, cpu backend, 2 device worker(s)" */
        if ((p = strstr(line, " device worker(s)"))) {
            const char *q = p;
            while (q > line && q[-1] >= '0' && q[-1] <= '9') q--;
            lf->workers = atoi(q);
            const char *b = strstr(line, " backend, ");
            if (b) {
                const char *s = b;
                while (s > line && s[-1] != ' ') s--;
                snprintf(lf->backend, sizeof lf->backend, "%.*s", (int)(b - s), s);
            }
        }
        if (!(p = strstr(line, "train: cycle "))) continue;
        long long c = -1, steps = 0, batch = 0;
        double a = 0, b = 0;
        if (sscanf(p, "train: cycle %lld: steps %lf s, device %lf s", &c, &a, &b) == 3) {
            if (c >= 0 && c < ncy) cy[c].have_device = 1, cy[c].step_s = a, cy[c].device_s = b;
        } else if (sscanf(p, "train: cycle %lld: %lld steps x %lld", &c, &steps, &batch) == 3 && c >= 0 && c < ncy) {
            const char *r = strstr(p, " samples/s");
            const char *s = r;
            while (s && s > p && s[-1] != ' ') s--;
            cy[c].have_train_line = 1, cy[c].steps = steps, cy[c].batch = batch;
            cy[c].log_samples_per_s = s ? strtod(s, NULL) : NAN;
        }
    }
    fclose(f);
}

static void fig(const char *key, double v, int prec, const char *note) {
    if (isnan(v)) printf("%-32s %-10s  %s\n", key, "n/a", note);
    else printf("%-32s %-10.*f  %s\n", key, prec, v, note);
}

/* What the summary reports: the run, the database's totals, the log's facts
 * and the rates added up over the cycles. */
typedef struct {
    const char *run;
    int exit_code; /* selfplay's, -1 not given */
    double wall;   /* seconds of the invocation (--wall, else the log's first to last line) */
    db_summary_t sum;
    double spp_cfg, batch_cfg; /* --samples-per-position and --batch of the run */
    int committed;             /* no shard write pending and every registered file there */
    char why[512];             /* else why not */
    double t_model0, t_model1; /* when models 0 and 1 were published */
    log_facts_t lf;
    /* self-play, over the cycles whose self-play finished */
    double sp_s, pos_w, ev_w, busy_w, evaluated, batches, inf_dev;
    int32_t n_sp;
    /* training, over the cycles trained in this run */
    double tr_samples, tr_step_s, tr_dev, tr_pos;
    int32_t n_tr, n_dev;
} loop_t;

/* The cycles 0..*ncy-1 (through the newest model, and any cycle_metrics row
 * past it): their models, metrics and new positions; L->committed and
 * L->why: whether every registered model and shard file is there, else the
 * first that is not. NULL: out of memory. */
static cyc_t *read_cycles(db_t *db, loop_t *L, int32_t *ncy_out) {
    int32_t ncy = L->sum.latest_cycle + 2 > 0 ? L->sum.latest_cycle + 2 : 1;
    int64_t cm; /* cycle_metrics rows may run one cycle past the newest model */
    for (cm = ncy; cm < LS_MAX_CYCLES; cm++) {
        db_cycle_metrics_t m;
        if (db_cycle_metrics_get(db, (int32_t)cm, &m) != DB_OK) break;
    }
    ncy = (int32_t)cm;
    cyc_t *cy = calloc((size_t)ncy, sizeof *cy);
    if (!cy) return NULL;
    /* models and shards, and whether every registered file is there */
    L->committed = L->sum.pending == 0;
    if (!L->committed) snprintf(L->why, sizeof L->why, "%lld shard write(s) pending", (long long)L->sum.pending);
    db_model_t prev;
    memset(&prev, 0, sizeof prev);
    int have_prev = 0;
    L->t_model0 = L->t_model1 = NAN;
    for (int32_t c = 0; c < ncy; c++) {
        db_model_t mo;
        if (db_model_by_cycle(db, c, &mo) == DB_OK) {
            char full[8192];
            snprintf(full, sizeof full, "%s/%s", L->run, mo.path);
            if (!compat_file_exists(full) && L->committed) {
                L->committed = 0;
                snprintf(L->why, sizeof L->why, "model %s is registered but missing", mo.path);
            }
            cy[c].have_model = 1;
            if (c == 0) L->t_model0 = iso_seconds(mo.created);
            if (c == 1) L->t_model1 = iso_seconds(mo.created);
            if (have_prev) cy[c].samples = mo.train_samples - prev.train_samples;
            prev = mo;
            have_prev = 1;
        } else {
            have_prev = 0;
        }
        if (db_cycle_metrics_get(db, c, &cy[c].m) == DB_OK) cy[c].have_metrics = 1;
        int64_t g = 0, p = 0;
        if (c > 0 && db_count(db, c, &g, &p) == DB_OK) cy[c].new_positions = p;
    }
    db_shard_t *shards = NULL;
    int32_t nsh = 0;
    if (db_shards_recent(db, 0, &shards, &nsh) == DB_OK) {
        for (int32_t i = 0; i < nsh && L->committed; i++) {
            char full[8192];
            snprintf(full, sizeof full, "%s/%s", L->run, shards[i].path);
            if (!compat_file_exists(full)) {
                L->committed = 0;
                snprintf(L->why, sizeof L->why, "shard %s is registered but missing", shards[i].path);
            }
        }
        free(shards);
    }
    *ncy_out = ncy;
    return cy;
}

/* The rates over the cycles: self-play over those whose self-play finished,
 * training over those trained in this run. */
static void add_up(loop_t *L, const cyc_t *cy, int32_t ncy) {
    /* self-play, over the cycles whose self-play finished */
    for (int32_t c = 1; c < ncy; c++) {
        const db_cycle_metrics_t *m = &cy[c].m;
        if (!cy[c].have_metrics || !(m->selfplay_s > 0)) continue;
        L->n_sp++;
        L->sp_s += m->selfplay_s;
        if (!isnan(m->positions_per_s)) L->pos_w += m->positions_per_s * m->selfplay_s;
        if (!isnan(m->evals_per_s)) {
            double e = m->evals_per_s * m->selfplay_s;
            L->ev_w += e;
            L->evaluated += e;
            if (m->avg_batch > 0) L->batches += e / m->avg_batch;
        }
        if (!isnan(m->busy_pct)) {
            L->busy_w += m->busy_pct * m->selfplay_s;
            L->inf_dev += m->busy_pct / 100.0 * m->selfplay_s * (L->lf.workers > 0 ? L->lf.workers : 1);
        }
    }
    /* training, over the cycles trained in this run */
    for (int32_t c = 1; c < ncy; c++) {
        if (!cy[c].have_model) continue;
        L->n_tr++;
        L->tr_samples += (double)cy[c].samples;
        L->tr_pos += (double)cy[c].new_positions;
        if (cy[c].have_device) L->tr_step_s += cy[c].step_s, L->tr_dev += cy[c].device_s, L->n_dev++;
    }
}

/* The figures, one a line: key, value, what it is. */
static void print_figures(const loop_t *L) {
    int32_t published = L->sum.latest_cycle > 0 ? L->sum.latest_cycle : 0;

    const char *how = L->exit_code == 0     ? "done or its budget used"
                      : L->exit_code == 130 ? "stopped as asked (SIGINT)"
                      : L->exit_code < 0    ? "exit status not given"
                                            : "FAILED";
    printf("loop summary: %s (selfplay exit %d: %s; run committed: %s%s%s)\n", L->run, L->exit_code, how,
           L->committed ? "yes" : "no", L->committed ? "" : ": ", L->why);
    char note[256];
    fig("wall_s", L->wall, 1, "the selfplay invocation, start to exit");
    snprintf(note, sizeof note, "%s backend, %d inference worker(s)", L->lf.backend[0] ? L->lf.backend : "?",
             L->lf.workers);
    printf("%-32s %-10s  %s\n", "backend", L->lf.backend[0] ? L->lf.backend : "?", note);
    snprintf(note, sizeof note, "models 1..%d after the random first net", (int)published);
    fig("cycles_published", published, 0, note);
    fig("first_model_s", !isnan(L->t_model1) && !isnan(L->t_model0) ? L->t_model1 - L->t_model0 : NAN, 1,
        "from the random net (the run's start) to model 1");
    snprintf(note, sizeof note, "self-play games committed, %lld positions", (long long)L->sum.positions);
    fig("games", (double)L->sum.games, 0, note);
    snprintf(note, sizeof note, "searched; cycle_metrics of %d cycle(s) whose self-play finished, %.1f s", (int)L->n_sp,
             L->sp_s);
    fig("positions_per_s", L->sp_s > 0 ? L->pos_w / L->sp_s : NAN, 1, note);
    fig("committed_positions_per_s", L->wall > 0 ? (double)L->sum.positions / L->wall : NAN, 1,
        "positions of committed games / wall_s");
    fig("evals_per_s", L->sp_s > 0 ? L->ev_w / L->sp_s : NAN, 0, "network evaluations, same cycles");
    fig("avg_batch", L->batches > 0 ? L->evaluated / L->batches : NAN, 1, "positions per inference batch, same cycles");
    fig("inference_busy_pct", L->sp_s > 0 ? L->busy_w / L->sp_s : NAN, 1,
        "device busy per inference worker (CUDA events over its forwards; CPU: their wall time)");
    snprintf(note, sizeof note, "samples / seconds of the steps of %d trained cycle(s) (%.1f s)", (int)L->n_dev,
             L->tr_step_s);
    fig("trainer_samples_per_s", L->tr_step_s > 0 ? L->tr_samples / L->tr_step_s : NAN, 0, note);
    snprintf(note, sizeof note, "trained samples %.0f / new positions %.0f of %d trained cycle(s); batch %.0f",
             L->tr_samples, L->tr_pos, (int)L->n_tr, L->batch_cfg);
    fig("samples_per_position", L->tr_pos > 0 ? L->tr_samples / L->tr_pos : NAN, 2, note);
    fig("samples_per_position_configured", L->spp_cfg, 2,
        "--samples-per-position of the run (min/max-steps-per-cycle clamp it)");
    fig("device_s_inference", L->sp_s > 0 ? L->inf_dev : NAN, 1, "busy x self-play seconds x workers, same cycles");
    fig("device_s_training", L->n_dev > 0 ? L->tr_dev : NAN, 1, "the trainer's stream over the trained cycles' steps");
    double inf_rate = L->sp_s > 0 ? L->inf_dev / L->sp_s : NAN,
           tr_rate = L->n_dev > 0 && L->wall > 0 ? L->tr_dev / L->wall : NAN;
    fig("inference_device_per_wall_s", inf_rate, 3, "device seconds per second of self-play (workers add up)");
    fig("training_device_per_wall_s", tr_rate, 3, "device seconds per second of wall_s");
    double tot = (isnan(inf_rate) ? 0 : inf_rate) + (isnan(tr_rate) ? 0 : tr_rate);
    fig("device_split_inference_pct", tot > 0 && !isnan(inf_rate) ? 100 * inf_rate / tot : NAN, 1,
        "share of the two rates above");
    fig("device_split_training_pct", tot > 0 && !isnan(tr_rate) ? 100 * tr_rate / tot : NAN, 1,
        "share of the two rates above");
    printf("%-32s %-10s  %s\n", "run_committed", L->committed ? "yes" : "no",
           L->committed ? "no shard write pending; every registered file there" : L->why);
}

/* The table by cycle: self-play's figures and the trainer's. */
static void print_table(const cyc_t *cy, int32_t ncy) {
    printf("%5s %6s %9s %8s %9s %9s %7s %6s | %6s %9s %8s %10s %8s %6s\n", "cycle", "games", "positions", "sp_s",
           "pos/s", "evals/s", "batch", "busy%", "steps", "samples", "step_s", "samples/s", "device_s", "s/pos");
    for (int32_t c = 1; c < ncy; c++) {
        const cyc_t *y = &cy[c];
        if (!y->have_metrics && !y->have_model) continue;
        if (y->have_metrics)
            printf("%5d %6lld %9lld %8.1f %9.1f %9.0f %7.1f %6.1f", (int)c, (long long)y->m.games,
                   (long long)y->m.positions, y->m.selfplay_s, y->m.positions_per_s, y->m.evals_per_s, y->m.avg_batch,
                   y->m.busy_pct);
        else printf("%5d %6s %9s %8s %9s %9s %7s %6s", (int)c, "-", "-", "-", "-", "-", "-", "-");
        if (y->have_model)
            printf(" | %6lld %9lld %8.2f %10.0f %8.2f %6.2f\n", (long long)y->steps, (long long)y->samples,
                   y->have_device ? y->step_s : NAN, y->log_samples_per_s, y->have_device ? y->device_s : NAN,
                   y->new_positions > 0 ? (double)y->samples / (double)y->new_positions : NAN);
        else printf(" | %6s\n", "(not trained)");
    }
}

int main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "loop-summary")) return 0;
    loop_t *L = calloc(1, sizeof *L);
    if (!L) {
        fprintf(stderr, "loop-summary: out of memory\n");
        return 1;
    }
    L->wall = NAN;
    L->exit_code = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            free(L);
            return 0;
        } else if (!strcmp(argv[i], "--wall") && i + 1 < argc) {
            L->wall = strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--exit") && i + 1 < argc) {
            L->exit_code = atoi(argv[++i]);
        } else if (argv[i][0] == '-' || L->run) {
            usage(stderr);
            free(L);
            return 2;
        } else {
            L->run = argv[i];
        }
    }
    if (!L->run) {
        usage(stderr);
        free(L);
        return 2;
    }
    char dbp[4096], logp[4096], err[DB_ERR_MAX];
    run_path(L->run, RUN_DB, dbp, sizeof dbp);
    run_path(L->run, RUN_LOG, logp, sizeof logp);
    if (!compat_file_exists(dbp)) {
        fprintf(stderr, "loop-summary: %s: no such file (not a run directory, or a run that never started?)\n", dbp);
        free(L);
        return 1;
    }
    db_t *db = NULL;
    if (db_open(dbp, DB_OPEN_READONLY, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "loop-summary: %s: %s\n", dbp, err);
        free(L);
        return 1;
    }
    db_run_t rr;
    memset(&rr, 0, sizeof rr);
    if (db_summary(db, &L->sum) != DB_OK) {
        fprintf(stderr, "loop-summary: %s: %s\n", dbp, db_errmsg(db));
        db_close(db);
        free(L);
        return 1;
    }
    L->spp_cfg = L->batch_cfg = NAN;
    if (db_run_latest(db, &rr) == DB_OK) {
        L->spp_cfg = config_value(rr.config, "samples-per-position");
        L->batch_cfg = config_value(rr.config, "batch");
    }
    int32_t ncy = 0;
    cyc_t *cy = read_cycles(db, L, &ncy);
    if (!cy) {
        fprintf(stderr, "loop-summary: out of memory\n");
        db_run_clear(&rr);
        db_close(db);
        free(L);
        return 1;
    }
    read_log(logp, cy, ncy, &L->lf);
    if (isnan(L->wall) && !isnan(L->lf.first_t)) L->wall = L->lf.last_t - L->lf.first_t;
    add_up(L, cy, ncy);
    print_figures(L);
    printf("\n");
    print_table(cy, ncy);
    free(cy);
    db_run_clear(&rr);
    db_close(db);
    free(L);
    return 0;
}
