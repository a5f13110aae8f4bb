/* genconfig.c - `genconfig`: self-play settings measured on this machine, as
 * an INI file for `selfplay --config`.
 *
 * Owns: the machine summary (CPUs, memory, CUDA devices and their memory),
 * the series of settings tried, the table of their figures, the choice, and
 * the INI written.
 * Does not own: self-play itself (selfplay/worker.h's pool plays exactly as
 * `selfplay` does, through the inference server of nn/server.h, with a net of
 * random weights of the --net size; no training, nothing stored), the flags
 * (selfplay/config.h and train/trainer.h: every selfplay flag is accepted and
 * held fixed), resolving the backend (nn/registry.h).
 *
 * The search is one flag at a time (KataGo's genconfig does the same): row 1
 * is selfplay's defaults, or the flags given; each stage tries a few values
 * of one flag with the best values found so far for the others, and keeps a
 * new value only when it plays GC_MARGIN more positions/s than the best so
 * far (on a shared machine a few percent is noise). A flag given on the
 * command line is held fixed (not tried); the keys of a --config file are
 * the starting point (`genconfig --config configs/gpu.ini` fits that file's
 * settings to this machine). The stages:
 *   cpu:  threads, games-per-thread
 *   cuda: games-per-thread, threads, streams, max-batch, gather-us
 * A setting that fails (a device out of memory) is a row with its error and
 * is never chosen. Figures: positions (searched moves)/s, evaluations/s,
 * average device batch, device busy (the server's busy fraction: CUDA
 * events on a GPU, forward time on the CPU).
 *
 * The INI holds the keys whose value differs from selfplay's defaults: the
 * chosen ones with their measured figure in a comment, the given ones (flags
 * and --config keys), and `backend`/`net` where genconfig picked them
 * (--backend auto found a GPU). Games per thread never exceed a cycle's
 * (selfplay would cap them): games-per-cycle is raised to threads x
 * games-per-thread of every setting, or, where it is given (a flag or a
 * --config key), kept, and no games-per-thread above it is tried.
 * --out is checked as every output of Koma (data/run.h's run_output_check:
 * never a directory, device or FIFO, nor a file of a run) before anything is
 * measured, never replaces a file genconfig did not write (its first line
 * says it did), and is written to a temporary name and renamed.
 *
 * Exit status: 0 written; 1 a failure (no setting ran, the file could not be
 * written, Ctrl-C); 2 bad flags.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "compat/version.h"
#include "config/config.h"
#include "data/run.h"
#include "engine/encode.h"
#include "mcts/cache.h"
#include "nn/backend.h"
#include "nn/backend_cuda.h"
#include "nn/net.h"
#include "nn/registry.h"
#include "nn/server.h"
#include "selfplay/config.h"
#include "selfplay/driver.h"
#include "selfplay/worker.h"
#include "tools/strbuf.h"
#include "train/trainer.h"

#define GC_MARGIN 1.03      /* a new value must play 3% more positions/s than the best so far */
#define GC_GPU_NET "10x128" /* the net measured on a GPU unless --net is given (configs/gpu.ini's) */
#define GC_GPU_WARMUP 3.0   /* least warm-up on a GPU: each setting's new server chooses its cuDNN algorithms */
#define GC_FIRST_LINE "; written by genconfig" /* an --out file that does not start so is never replaced */
enum { GC_ROWS_MAX = 64, GC_NOPTS = SP_CONFIG_NFLAGS + TRAIN_CONFIG_NFLAGS + 3 };

/* The flags tried, resolved (threads 0 is two per CPU, streams 0 and
 * gather-us -1 the backend's own: a row shows what ran). */
typedef enum { GC_THREADS, GC_GAMES, GC_STREAMS, GC_MAX_BATCH, GC_GATHER, GC_NFLAGS } gc_flag_t;
static const char *const gc_flag_name[GC_NFLAGS] = {"threads", "games-per-thread", "streams", "max-batch", "gather-us"};

typedef struct {
    int64_t v[GC_NFLAGS];
} gc_setting_t;

typedef struct {
    gc_setting_t s;
    int changed; /* the flag this row tries (gc_flag_t), -1 for row 1 */
    int ok;
    char error[256];
    double pos_s, evals_s, batch, busy, cpu_cores;
} gc_row_t;

typedef struct {
    const sp_config_t *base;          /* the flags as given (defaults otherwise) */
    gc_setting_t start;               /* row 1 resolved */
    int raw_streams0, raw_gather_neg; /* base has streams 0 / gather-us -1 (the backend's default) */
    int64_t cycle_cap;                /* games-per-cycle given (flag or --config key): kept, and no games-per-thread
                                       * above it is tried; else 0 */
    int64_t cycle_start;              /* games-per-cycle as given or by default, before gc_apply raised it */
    nn_net_t *net;                    /* random weights, on a CPU backend; the server copies it */
    double seconds, warmup;
    gc_row_t rows[GC_ROWS_MAX];
    int nrows;
} gc_t;

/* ---- the machine ------------------------------------------------------------ */

static void gc_machine(sb_t *b, int32_t device_used) {
    int64_t mem = compat_memory_total(); /* 0: unknown */
    char host[128];
    compat_hostname(host, sizeof host);
    sb_printf(b, "%s: %d CPUs, ", host, compat_cpu_count());
    if (mem > 0) sb_printf(b, "%.1f GiB memory", (double)mem / (1 << 30));
    else sb_printf(b, "memory unknown");
    int ndev = nn_cuda_device_count();
    if (ndev == 0) sb_printf(b, ", no CUDA device");
    for (int d = 0; d < ndev; d++) {
        nn_cuda_device_info_t info;
        char err[256];
        if (nn_cuda_device_info(d, &info, err, sizeof err) != 0) {
            sb_printf(b, ", GPU %d: %s", d, err);
            continue;
        }
        sb_printf(b, ", GPU %d%s: %s (%.1f GiB, compute %d.%d, %d SMs, CUDA driver %d.%d)", d,
                  d == device_used ? " (measured)" : "", info.name, (double)info.mem_bytes / (1 << 30),
                  (int)info.cc_major, (int)info.cc_minor, (int)info.sm_count, (int)info.driver_version / 1000,
                  (int)info.driver_version % 1000 / 10);
    }
}

/* "prog: text" wrapped at spaces to 80 columns, the lines after the first
 * indented by two spaces. */
static void gc_print_wrapped(const char *prog, const char *text) {
    size_t col = (size_t)printf("%s:", prog);
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (!w) break;
        if (col + 1 + w > 80 && col > 2) {
            printf("\n ");
            col = 1;
        }
        printf(" %.*s", (int)w, p);
        col += 1 + w;
        p += w;
    }
    printf("\n");
}

/* The load average before measuring, and whether it is high: more than half the CPUs already busy, so the
 * figures measure what the other programs leave. */
static double gc_load(int *busy) {
    double l = compat_load_average();
    *busy = l > 0.5 * compat_cpu_count();
    return l;
}

/* ---- one setting ------------------------------------------------------------- */

/* base with setting s: a value equal to row 1's resolved default goes back
 * to the default's own spelling (0, -1), so that the INI keeps "two per CPU"
 * and "the backend's choice" where those won. */
static void gc_apply(const gc_t *g, const gc_setting_t *s, sp_config_t *c) {
    *c = *g->base;
    c->threads = s->v[GC_THREADS] == g->start.v[GC_THREADS] ? g->base->threads : s->v[GC_THREADS];
    if (c->threads == 2 * (int64_t)compat_cpu_count()) c->threads = 0; /* the default: two per CPU */
    c->games_per_thread = s->v[GC_GAMES];
    /* Every game played at once fits in one cycle (selfplay caps
     * games-per-thread at games-per-cycle, and pauses when it runs more than
     * --max-ahead cycles ahead of the newest net): unless games-per-cycle
     * was given (cycle_cap), a cycle has at least threads x games-per-thread
     * games. */
    int64_t at_once = s->v[GC_THREADS] * s->v[GC_GAMES];
    if (!g->cycle_cap && c->games_per_cycle < at_once) c->games_per_cycle = at_once;
    c->streams = g->raw_streams0 && s->v[GC_STREAMS] == g->start.v[GC_STREAMS] ? 0 : s->v[GC_STREAMS];
    c->max_batch = s->v[GC_MAX_BATCH];
    c->gather_us = g->raw_gather_neg && s->v[GC_GATHER] == g->start.v[GC_GATHER] ? -1 : s->v[GC_GATHER];
}

static void gc_drain(sp_pool_t *pool) {
    sp_record_t *recs[256];
    int32_t n;
    while ((n = sp_pool_take(pool, recs, 256, 0)) > 0)
        for (int32_t i = 0; i < n; i++) sp_record_free(recs[i]);
}

/* Plays for warmup + seconds; 0 when the time ran out with the pool healthy. */
static int gc_wait(sp_pool_t *pool, double seconds, char *err, size_t errlen) {
    int64_t end = compat_now_ms() + (int64_t)(seconds * 1000);
    while (compat_now_ms() < end) {
        compat_sleep_ms(50);
        gc_drain(pool);
        if (sp_pool_error(pool, err, errlen)) return -1;
        if (compat_stop_requested()) {
            set_err(err, errlen, "interrupted");
            return -1;
        }
    }
    return 0;
}

/* Runs self-play under c and fills r (r->ok, or r->error). Resolved streams
 * and gather wait come back from the server (streams 0, gather-us -1). */
static void gc_measure(const gc_t *g, const sp_config_t *c, gc_row_t *r) {
    char err[512] = "";
    nn_server_config_t sc = sp_config_server(c);
    nn_server_t *srv = nn_server_new(&sc, NULL, g->net, err, sizeof err);
    mcts_cache_t *cache = srv && c->cache_mb > 0 ? mcts_cache_new(c->cache_mb << 20) : NULL;
    sp_pool_t *pool = srv ? sp_pool_new(c, srv, cache, (uint64_t)c->seed + 12345, err, sizeof err) : NULL;
    if (pool && sp_pool_start(pool, err, sizeof err) == 0 && gc_wait(pool, g->warmup, err, sizeof err) == 0) {
        sp_pool_stats_t p0, p1;
        nn_server_stats_t s0, s1;
        sp_pool_stats(pool, &p0);
        nn_server_stats(srv, &s0); /* starts the busy interval */
        int64_t t0 = compat_now_ns(), c0 = compat_cpu_time_ns();
        if (gc_wait(pool, g->seconds, err, sizeof err) == 0) {
            sp_pool_stats(pool, &p1);
            nn_server_stats(srv, &s1);
            double dt = (double)(compat_now_ns() - t0) * 1e-9;
            int64_t ev = s1.evaluated - s0.evaluated, nb = s1.batches - s0.batches;
            r->ok = 1;
            r->pos_s = (double)(p1.searches - p0.searches) / dt;
            r->evals_s = (double)ev / dt;
            r->batch = nb > 0 ? (double)ev / (double)nb : 0;
            r->busy = s1.busy_frac;
            r->cpu_cores = (double)(compat_cpu_time_ns() - c0) * 1e-9 / dt;
            r->s.v[GC_STREAMS] = s1.workers;
            r->s.v[GC_GATHER] = s1.gather_us;
        }
    }
    if (!r->ok) set_err(r->error, sizeof r->error, "%s", err[0] ? err : "failed");
    sp_pool_free(pool);
    nn_server_free(srv);
    mcts_cache_free(cache);
}

/* The table fits 80 columns: the flags in short (thr threads, g/t
 * games-per-thread, str streams, batch max-batch, gath gather-us; the legend
 * line says so), the flag a row tries by its full name; at most 80 columns
 * while the figures stay below 100000 positions/s and 1000000 evaluations/s. */
static void gc_print_legend(const char *prog) {
    printf("%s: thr threads, g/t games-per-thread, str streams, batc max-batch,\n"
           "  gath gather-us; then positions/s, evaluations/s, average batch, device busy\n"
           "  and CPU cores used\n",
           prog);
}

static void gc_print_header(void) {
    printf(" row %-19s %3s %3s %3s %4s %4s | %7s %6s %5s %4s %5s\n", "tries", "thr", "g/t", "str", "batc", "gath",
           "pos/s", "eval/s", "batch", "busy", "cores");
    fflush(stdout);
}

static void gc_print_row(const gc_t *g, int i, int chosen) {
    const gc_row_t *r = &g->rows[i];
    char tries[64];
    if (r->changed < 0) snprintf(tries, sizeof tries, "start");
    else snprintf(tries, sizeof tries, "%s %lld", gc_flag_name[r->changed], (long long)r->s.v[r->changed]);
    printf("%c%3d %-19s %3lld %3lld %3lld %4lld %4lld | ", chosen ? '*' : ' ', i + 1, tries,
           (long long)r->s.v[GC_THREADS], (long long)r->s.v[GC_GAMES], (long long)r->s.v[GC_STREAMS],
           (long long)r->s.v[GC_MAX_BATCH], (long long)r->s.v[GC_GATHER]);
    if (r->ok) printf("%7.1f %6.0f %5.1f %3.0f%% %5.2f\n", r->pos_s, r->evals_s, r->batch, 100 * r->busy, r->cpu_cores);
    else printf("failed: %s\n", r->error);
    fflush(stdout);
}

/* The row already measured with setting s, or -1. Streams and gather-us of
 * row 1 are known only once it ran (0 and -1 resolve there). */
static int gc_find(const gc_t *g, const gc_setting_t *s) {
    for (int i = 0; i < g->nrows; i++)
        if (memcmp(&g->rows[i].s, s, sizeof *s) == 0) return i;
    return -1;
}

/* Measures s as a new row (or finds it); returns its index, -1 when the
 * table is full or Ctrl-C was pressed. */
static int gc_try(gc_t *g, const gc_setting_t *s, int changed) {
    int i = gc_find(g, s);
    if (i >= 0) return i;
    if (g->nrows == GC_ROWS_MAX || compat_stop_requested()) return -1;
    gc_row_t *r = &g->rows[g->nrows];
    memset(r, 0, sizeof *r);
    r->s = *s;
    r->changed = changed;
    static sp_config_t c;
    gc_apply(g, s, &c);
    gc_measure(g, &c, r);
    r->s = *s; /* the setting tried (row 1's resolved values were set before) */
    gc_print_row(g, g->nrows, 0);
    return g->nrows++;
}

/* One stage: flag f at each of values[0..n) from the best row; returns the
 * best row afterwards. */
static int gc_stage(gc_t *g, int best, gc_flag_t f, const int64_t *values, int n) {
    int winner = best;
    for (int k = 0; k < n; k++) {
        if (values[k] < 1 && f != GC_GATHER) continue;
        if (f == GC_GAMES && g->cycle_cap > 0 && values[k] > g->cycle_cap) continue; /* selfplay would cap it */
        gc_setting_t s = g->rows[best].s;
        s.v[f] = values[k];
        int i = gc_try(g, &s, f);
        if (i < 0) break;
        const gc_row_t *r = &g->rows[i];
        if (r->ok && r->pos_s > g->rows[winner].pos_s && r->pos_s > GC_MARGIN * g->rows[best].pos_s) winner = i;
    }
    return winner;
}

/* ---- the INI ------------------------------------------------------------------ */

static void gc_figures(sb_t *b, const gc_row_t *r) {
    sb_printf(b, "%.1f positions/s, %.0f evals/s, batch %.1f, busy %.0f%%", r->pos_s, r->evals_s, r->batch,
              100 * r->busy);
}

/* The INI text: a header, then every row of opts whose value differs from
 * the same row of defs (same table order), commented. */
static void gc_ini(sb_t *b, const gc_t *g, int best, const cfg_opt_t *opts, const cfg_opt_t *defs, int n,
                   const int *given, const int *held, const char *machine, const char *when) {
    const gc_row_t *r0 = &g->rows[0], *rb = &g->rows[best];
    sb_printf(b, "%s (Koma) %s, commit %s; %s\n", GC_FIRST_LINE, KOMA_VERSION_STRING, KOMA_GIT_COMMIT,
              KOMA_BUILD_PARTS);
    sb_printf(b, "; %s: %s\n", when, machine);
    sb_printf(b, "; backend %s, net %s (random weights), %.1f s per setting after %.1f s of warm-up;\n",
              g->base->backend, cfg_find(opts, n, "net") ? (const char *)cfg_find(opts, n, "net")->ptr : "?",
              g->seconds, g->warmup);
    sb_printf(b, "; %d settings tried (genconfig's table). Row 1, the start: ", g->nrows);
    gc_figures(b, r0);
    sb_printf(b, ";\n; chosen, row %d: ", best + 1);
    gc_figures(b, rb);
    if (best != 0 && r0->pos_s > 0) sb_printf(b, " (%+.0f%% positions/s)", 100 * (rb->pos_s / r0->pos_s - 1));
    sb_printf(b, ".\n; Self-play alone: in `selfplay` the trainer shares the machine. Use: selfplay --config FILE\n"
                 "; [other flags; the command line wins]. The keys below differ from selfplay's defaults.\n");
    if (strcmp(g->base->backend, "cpu") != 0)
        sb_printf(b, "; The trainer's flags are not measured: configs/gpu.ini has GPU-sized ones (train-backend,\n"
                     "; batch, window); `genconfig --config configs/gpu.ini` starts from that file.\n");
    sb_printf(b, "\n");
    for (int i = 0; i < n; i++) {
        char v[CFG_STRING_MAX + 8], d[CFG_STRING_MAX + 8];
        cfg_value_string(&opts[i], v, sizeof v);
        cfg_value_string(&defs[i], d, sizeof d);
        if (!strcmp(v, d)) continue;
        sb_printf(b, "%s = %s", opts[i].name, v);
        int f = -1;
        for (int k = 0; k < GC_NFLAGS; k++)
            if (!strcmp(opts[i].name, gc_flag_name[k])) f = k;
        if (!strcmp(opts[i].name, "games-per-cycle") && !given[i] && !g->cycle_cap &&
            *(const int64_t *)opts[i].ptr != g->cycle_start) {
            sb_printf(b, "   ; threads x games-per-thread (%lld x %lld): every game played at once in one cycle\n",
                      (long long)rb->s.v[GC_THREADS], (long long)rb->s.v[GC_GAMES]);
        } else if (f >= 0 && !held[f] && rb->s.v[f] == r0->s.v[f]) {
            sb_printf(b, "   ; given to genconfig, and no value tried beat it\n");
        } else if (f >= 0 && !held[f]) {
            sb_printf(b, "   ; row %d: %.1f positions/s (%s %lld, row 1: %.1f)\n", best + 1, rb->pos_s, gc_flag_name[f],
                      (long long)r0->s.v[f], r0->pos_s);
        } else if (given[i]) {
            sb_printf(b, "   ; given to genconfig%s\n", f >= 0 ? " (held fixed while measuring)" : "");
        } else {
            sb_printf(b, "   ; chosen by genconfig (the figures above were measured with it)\n");
        }
    }
}

/* 0 when path may be written: what every output path of Koma may be
 * (run_output_check: no directory, device or FIFO, no file of a run, an
 * existing directory), and missing or a file genconfig wrote (its first line
 * says so: a hand-written config is never replaced); else -1 with err. Asked
 * before measuring and again before writing. */
static int gc_out_check(const char *path, char *err, size_t errlen) {
    if (run_output_check(path, NULL, "the config", "--out", err, errlen) != 0) return -1;
    if (!compat_file_exists(path)) return 0;
    FILE *f = fopen(path, "rb");
    char first[64] = "";
    if (f) {
        if (!fgets(first, sizeof first, f)) first[0] = 0;
        fclose(f);
    }
    if (strncmp(first, GC_FIRST_LINE, strlen(GC_FIRST_LINE)) != 0) {
        set_err(err, errlen,
                "--out %s: the file exists and genconfig did not write it: give another --out, or remove it", path);
        return -1;
    }
    return 0;
}

/* Writes the text to a temporary name and renames it over path. */
static int gc_write(const char *path, const sb_t *b, char *err, size_t errlen) {
    if (gc_out_check(path, err, errlen) != 0) return -1;
    if (b->oom) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    return run_output_write(path, NULL, "the config", "--out", b->s, b->n, err, errlen);
}

/* ---- main ---------------------------------------------------------------------- */

/* after "usage: NAME " */
#define USAGE_ARGS                                                                                                     \
    "[--seconds 5] [--warmup S] [--out genconfig.ini] [--backend auto|cpu|cuda] [--net BxC] [--config FILE] "          \
    "[any selfplay flag, held fixed]\n"                                                                                \
    "Plays self-play for --seconds under each of a series of settings (threads, games per thread; on a GPU\n"          \
    "also streams, max batch, gather wait), prints a row of figures for each, and writes the best as an INI\n"         \
    "for `selfplay --config`. --backend defaults to auto here (the GPU when there is one); --net to 4x32 on\n"         \
    "the CPU and " GC_GPU_NET " on a GPU. Flags given on the command line are held fixed; the keys of a\n"             \
    "--config file are the starting point. Both are written to the INI too."

/* The flags tried (gc_flag_name) that the command line holds fixed: --config keys are tried. */
static void gc_held_flags(int argc, char **argv, int held[GC_NFLAGS]) {
    for (int a = 1; a < argc; a++)
        for (int f = 0; f < GC_NFLAGS; f++) {
            size_t len = strlen(gc_flag_name[f]);
            if (!strncmp(argv[a], "--", 2) && !strncmp(argv[a] + 2, gc_flag_name[f], len) &&
                (argv[a][2 + len] == 0 || argv[a][2 + len] == '='))
                held[f] = 1;
        }
}

/* The stages after row 1, each flag not held fixed in turn (the CPU's or the
 * GPU's series of values); the best row so far. */
static int gc_stages(gc_t *g, nn_backend_kind_t kind, const int held[GC_NFLAGS]) {
    int best = 0;
    int64_t C = compat_cpu_count();
    int64_t cpu_threads[] = {C, 2 * C, 4 * C}, cpu_games[] = {4, 8, 16};
    int64_t gpu_games[] = {64, 128, 256, 512}, gpu_threads[] = {C / 2, C, 2 * C}, gpu_streams[] = {1, 2, 3, 4};
    int64_t gpu_batch[] = {256, 512, 1024}, gpu_gather[] = {0, 250, 500, 1000, 2000};
#define GC_STAGE(flag, values)                                                                                         \
    if (!held[flag]) best = gc_stage(g, best, flag, values, (int)(sizeof values / sizeof values[0]));
    if (kind == NN_BACKEND_KIND_CPU) {
        GC_STAGE(GC_THREADS, cpu_threads);
        GC_STAGE(GC_GAMES, cpu_games);
    } else {
        GC_STAGE(GC_GAMES, gpu_games);
        GC_STAGE(GC_THREADS, gpu_threads);
        GC_STAGE(GC_STREAMS, gpu_streams);
        GC_STAGE(GC_MAX_BATCH, gpu_batch);
        GC_STAGE(GC_GATHER, gpu_gather);
    }
#undef GC_STAGE
    return best;
}

/* The end: the chosen row printed and written to out as an INI (cfg becomes
 * the chosen setting: the table points into it), or why nothing was
 * written. The exit status. */
static int gc_finish(const char *prog, gc_t *g, int best, sp_config_t *cfg, const char *out, const cfg_opt_t *opts,
                     const cfg_opt_t *defs, int n, const int *given, const int *held, const char *machine) {
    const gc_row_t *r0 = &g->rows[0];
    int status = 0;
    char err[1024];
    if (compat_stop_requested()) {
        fprintf(stderr, "%s: interrupted: %s not written\n", prog, out);
        status = 1;
    } else if (!r0->ok) {
        fprintf(stderr, "%s: the start setting failed (%s): %s not written\n", prog, r0->error, out);
        status = 1;
    } else {
        char line[1600], over[48] = "";
        if (best != 0) snprintf(over, sizeof over, ", %+.0f%% over row 1", 100 * (g->rows[best].pos_s / r0->pos_s - 1));
        snprintf(line, sizeof line, "%d settings tried; chosen: row %d (%.1f positions/s%s)", g->nrows, best + 1,
                 g->rows[best].pos_s, over);
        gc_print_wrapped(prog, line);
        gc_print_header();
        gc_print_row(g, best, 1);
        static sp_config_t chosen;
        gc_apply(g, &g->rows[best].s, &chosen);
        *cfg = chosen; /* the table points into cfg */
        char when[64];
        time_t now = time(NULL);
        strftime(when, sizeof when, "measured %Y-%m-%d %H:%M UTC", gmtime(&now));
        sb_t ini = {0};
        gc_ini(&ini, g, best, opts, defs, n, given, held, machine, when);
        if (gc_write(out, &ini, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", prog, err);
            status = 1;
        } else {
            snprintf(line, sizeof line, "wrote %s; use it as: selfplay --config %s", out, out);
            gc_print_wrapped(prog, line);
        }
        free(ini.s);
    }
    return status;
}

int main(int argc, char **argv) {
    /* genconfig in the build, koma-genconfig where installed: in usage, --version and messages */
    const char *prog = koma_program_name(argc > 0 ? argv[0] : NULL, "genconfig");
    if (koma_version_asked(argc, argv, prog)) return 0;
    nn_cpu_blas_reexec_if_generic(argv);
    static sp_config_t cfg, dcfg;
    static train_config_t tcfg, dtcfg;
    static char out[CFG_STRING_MAX] = "genconfig.ini";
    double seconds = 5, warmup = -1;
    sp_config_default(&cfg);
    tcfg = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    sp_config_default(&dcfg);
    dtcfg = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    snprintf(cfg.backend, sizeof cfg.backend, "auto");
    static cfg_opt_t opts[GC_NOPTS], defs[GC_NOPTS];
    static int given[GC_NOPTS];
    int n = sp_config_flags(&cfg, opts, SP_CONFIG_NFLAGS);
    n += train_config_flags(&tcfg, opts + n, TRAIN_CONFIG_NFLAGS);
    int nd = sp_config_flags(&dcfg, defs, SP_CONFIG_NFLAGS);
    nd += train_config_flags(&dtcfg, defs + nd, TRAIN_CONFIG_NFLAGS);
    KOMA_ASSERT(nd == n);
    for (int i = 0; i < n; i++) opts[i].given = &given[i];
    int nall = n;
    opts[nall++] = (cfg_opt_t){"seconds", CFG_TYPE_DOUBLE, &seconds, 0.2, 3600, "measured seconds per setting"};
    opts[nall++] = (cfg_opt_t){"warmup",
                               CFG_TYPE_DOUBLE,
                               &warmup,
                               -1,
                               3600,
                               "seconds played before measuring each setting (-1 = half of --seconds, at least 3 "
                               "on a GPU)"};
    opts[nall++] =
        (cfg_opt_t){"out",     CFG_TYPE_PATH,
                    out,       1,
                    0,         "the INI written (never a non-regular file, nor a file genconfig did not write)",
                    NULL,      NULL,
                    sizeof out};
    char err[1024];
    char usage[1024];
    snprintf(usage, sizeof usage, "usage: %s " USAGE_ARGS, prog);
    int rc = cfg_parse(opts, nall, argc, argv, 1, NULL, 0, NULL, usage, stdout, err, sizeof err);
    if (rc == CFG_HELP) return 0;
    if (rc != CFG_OK || train_config_check(&tcfg, err, sizeof err) != 0 ||
        sp_config_check(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    int held[GC_NFLAGS] = {0};
    gc_held_flags(argc, argv, held);
    nn_backend_kind_t kind;
    if (nn_backend_resolve(cfg.backend, &kind, err, sizeof err) != 0) {
        fprintf(stderr, "%s: --backend %s\n", prog, err);
        return 2;
    }
    if (kind == NN_BACKEND_KIND_CUDA && nn_cuda_device_count() == 0) {
        fprintf(stderr,
                "%s: --backend cuda: no CUDA device (or Koma was built without CUDA: see --version); "
                "use --backend cpu\n",
                prog);
        return 1;
    }
    snprintf(cfg.backend, sizeof cfg.backend, "%s", nn_backend_kind_name(kind));
    if (warmup < 0) warmup = kind == NN_BACKEND_KIND_CUDA && seconds / 2 < GC_GPU_WARMUP ? GC_GPU_WARMUP : seconds / 2;
    const cfg_opt_t *net_row = cfg_find(opts, n, "net");
    if (kind == NN_BACKEND_KIND_CUDA && !given[net_row - opts]) snprintf(tcfg.net, sizeof tcfg.net, GC_GPU_NET);
    nn_net_config_t nc = {0, 0, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    if (nn_net_arch_parse(tcfg.net, &nc) != 0) { /* "4x32", "4x32g2" */
        fprintf(stderr, "%s: --net '%s' is not BLOCKSxCHANNELS (e.g. 4x32)\n", prog, tcfg.net);
        return 2;
    }
    if (gc_out_check(out, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    compat_install_stop_handler();

    sb_t machine = {0};
    gc_machine(&machine, kind == NN_BACKEND_KIND_CUDA ? (int32_t)cfg.device : -1);
    int busy = 0;
    double load = gc_load(&busy);
    if (busy) /* said in the INI too, with the machine */
        sb_printf(&machine, "; busy while measured (load average %.1f on %d CPUs)", load, compat_cpu_count());
    char line[4096];
    snprintf(line, sizeof line, "this machine: %s", machine.s ? machine.s : "?");
    gc_print_wrapped(prog, line);
    if (busy) {
        snprintf(line, sizeof line,
                 "warning: this machine is busy (load average %.1f over the last minute on %d CPUs): the figures "
                 "measure what the other programs leave, and an idle machine may choose other settings; run "
                 "genconfig on an idle machine",
                 load, compat_cpu_count());
        gc_print_wrapped(prog, line);
    }
    snprintf(line, sizeof line,
             "backend %s, net %s (random weights), %.1f s per setting after %.1f s of warm-up; a new value is kept "
             "when it plays %.0f%% more positions/s",
             cfg.backend, tcfg.net, seconds, warmup, 100 * (GC_MARGIN - 1));
    gc_print_wrapped(prog, line);
    gc_print_legend(prog);
    nn_backend_t *be = nn_backend_cpu_new(1);
    static gc_t g;
    g.base = &cfg;
    g.seconds = seconds;
    g.warmup = warmup;
    g.net = be ? nn_net_new(be, &nc, 1, err, sizeof err) : NULL;
    if (!g.net) {
        fprintf(stderr, "%s: the net %s: %s\n", prog, tcfg.net, be ? err : "no CPU backend (out of memory)");
        nn_backend_free(be);
        free(machine.s);
        return 1;
    }
    g.raw_streams0 = cfg.streams == 0;
    const cfg_opt_t *cycle_row = cfg_find(opts, n, "games-per-cycle");
    g.cycle_cap = cycle_row && given[cycle_row - opts] ? cfg.games_per_cycle : 0;
    g.cycle_start = cfg.games_per_cycle;
    g.raw_gather_neg = cfg.gather_us < 0;

    if (g.cycle_cap && sp_config_games_per_thread(&cfg) < cfg.games_per_thread) { /* as selfplay does */
        snprintf(line, sizeof line,
                 "--games-per-thread %lld capped at %lld: selfplay never plays more games per thread at once than "
                 "a cycle has (--games-per-cycle %lld)",
                 (long long)cfg.games_per_thread, (long long)sp_config_games_per_thread(&cfg),
                 (long long)cfg.games_per_cycle);
        gc_print_wrapped(prog, line);
        cfg.games_per_thread = sp_config_games_per_thread(&cfg);
    }
    /* row 1: the flags as given; its resolved values are what later rows vary */
    gc_print_header();
    g.start.v[GC_THREADS] = sp_config_threads(&cfg);
    g.start.v[GC_GAMES] = cfg.games_per_thread;
    g.start.v[GC_MAX_BATCH] = cfg.max_batch;
    gc_row_t *r0 = &g.rows[0];
    r0->changed = -1;
    r0->s = g.start;
    gc_measure(&g, &cfg, r0);
    g.start = r0->s; /* streams and gather-us resolved by the server */
    g.nrows = 1;
    gc_print_row(&g, 0, 0);
    int best = r0->ok ? gc_stages(&g, kind, held) : 0;
    nn_net_free(g.net);
    nn_backend_free(be);
    int status = gc_finish(prog, &g, best, &cfg, out, opts, defs, n, given, held, machine.s ? machine.s : "?");
    free(machine.s);
    return status;
}
