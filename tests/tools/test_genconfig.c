/* test_genconfig.c - `genconfig` on the CPU, through the real binaries:
 *   - a short run (--seconds 1, a tiny net) prints, within 80 columns, one table row per setting
 *     tried (row 1 the defaults, then 2 values of threads and 2 of
 *     games-per-thread, no setting twice), marks the chosen row, and writes
 *     an INI that `selfplay --config` accepts, whose keys are the chosen
 *     row's values where they differ from the defaults (each commented), and
 *     that passes selfplay's own checks;
 *   - games per thread never above the cycle's games: games-per-cycle
 *     raised to threads x games-per-thread, or kept where given and then no
 *     games-per-thread above it tried;
 *   - a flag given on the command line is held fixed and written as given;
 *     a --config key is the starting point and is tried; genconfig replaces
 *     its own file;
 *   - --out never replaces a directory or a file genconfig did not write,
 *     nor writes into a run, and refuses before measuring; --backend cuda without a device is an
 *     error that says what to do;
 *   - on a busy machine (KOMA_TEST_LOADAVG in place of the load average) a
 *     warning before the table and a note in the INI.
 * argv: genconfig, selfplay. */
#include "tests/koma_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/backend_cuda.h"
#include "selfplay/config.h"
#include "selfplay/driver.h"

static const char *g_genconfig, *g_selfplay;

/* Runs argv with stdout and stderr into the file out; returns the exit
 * status (-1: could not start) and the output in *text (caller frees). */
static int run(const char *const *argv, const char *out, char **text) {
    char err[512];
    int status = -1;
    fprintf(stderr, "+");
    for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
    if (compat_run_io(argv, out, out, &status, err, sizeof err) != 0) {
        fprintf(stderr, "  cannot run: %s\n", err);
        status = -1;
    }
    *text = t_read_file(out, NULL);
    if (!*text) *text = calloc(1, 1);
    return status;
}

typedef struct {
    char mark;
    int row;
    char tries[32];
    long long threads, games, streams, max_batch, gather;
    double pos_s, evals_s;
} row_t;

/* One table row ("*  3 threads 8            8   8   2  256    0 |   91.2 ..."): the mark, the row number, the
 * flag tried in 19 columns from column 5, the values from column 25; 1 when the line is one. */
static int parse_row(const char *line, row_t *r) {
    if ((line[0] != ' ' && line[0] != '*') || strlen(line) < 40) return 0;
    if (sscanf(line + 1, "%d", &r->row) != 1) return 0;
    r->mark = line[0];
    if (strlen(line) < 30) return 0;
    snprintf(r->tries, sizeof r->tries, "%.19s", line + 5);
    for (char *e = r->tries + strlen(r->tries); e > r->tries && e[-1] == ' ';) *--e = 0;
    r->pos_s = r->evals_s = -1;
    return sscanf(line + 25, "%lld %lld %lld %lld %lld | %lf %lf", &r->threads, &r->games, &r->streams, &r->max_batch,
                  &r->gather, &r->pos_s, &r->evals_s) >= 5;
}

/* The rows of the first table (before "genconfig: N settings tried") into
 * rows, their count; *tried the N printed; *chosen the row after it. */
static int parse_table(char *text, row_t *rows, int cap, int *tried, row_t *chosen) {
    int n = 0, after = 0;
    *tried = -1;
    chosen->row = -1;
    for (char *p = text; *p;) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        row_t r;
        if (sscanf(p, "genconfig: %d settings tried", tried) == 1) after = 1;
        else if (parse_row(p, &r)) {
            if (!after && n < cap) rows[n++] = r;
            if (after) *chosen = r;
        }
        if (!e) break;
        *e = '\n';
        p = e + 1;
    }
    return n;
}

/* value of "key = value" in the INI text, or NULL (static buffer). */
static const char *ini_value(const char *ini, const char *key) {
    static char v[128];
    size_t kl = strlen(key);
    for (const char *p = ini; *p;) {
        if (!strncmp(p, key, kl) && p[kl] == ' ' && p[kl + 1] == '=') {
            sscanf(p + kl + 2, " %127[^ ;\r\n]", v);
            return v;
        }
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    return NULL;
}

/* The INI through selfplay's own table and checks (what sp_main does with --config). */
static int selfplay_checks(const char *path, char *err, size_t errlen) {
    static sp_config_t c;
    static train_config_t t;
    sp_config_default(&c);
    t = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    cfg_opt_t opts[SP_CONFIG_NFLAGS + TRAIN_CONFIG_NFLAGS];
    int n = sp_config_flags(&c, opts, SP_CONFIG_NFLAGS);
    n += train_config_flags(&t, opts + n, TRAIN_CONFIG_NFLAGS);
    if (cfg_load_file(opts, n, path, err, errlen) != CFG_OK) return -1;
    if (train_config_check(&t, err, errlen) != 0 || sp_config_check(&c, err, errlen) != 0) return -1;
    return 0;
}

/* The machine's memory (compat_memory_total: sysconf or /proc/meminfo on
 * Linux, GlobalMemoryStatusEx on Windows) is known, agrees with the kernel's
 * MemTotal where there is one, is what selfplay's memory check uses, and is
 * what genconfig's "this machine:" line shows (not "memory unknown"). */
static void check_memory(const char *text) {
    int64_t mem = compat_memory_total();
    CHECKF(mem > 0, "compat_memory_total() = %lld", (long long)mem);
    CHECKF(sp_machine_memory() == mem, "sp_machine_memory() %lld, compat_memory_total() %lld",
           (long long)sp_machine_memory(), (long long)mem);
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) break;
        fclose(f);
        /* equal on Linux; the Windows build under wine reads GlobalMemoryStatusEx, within a few percent */
        CHECKF(kb > 0 && fabs((double)mem - (double)kb * 1024) <= 0.05 * (double)kb * 1024,
               "compat_memory_total() %lld, /proc/meminfo MemTotal %lld kB", (long long)mem, kb);
    }
    const char *m = strstr(text, "this machine: ");
    const char *cpus = m ? strstr(m, " CPUs, ") : NULL;
    double gib = -1;
    CHECKF(cpus && sscanf(cpus, " CPUs, %lf GiB memory", &gib) == 1 && fabs(gib - (double)mem / (1 << 30)) < 0.06,
           "genconfig shows %.1f GiB of memory, compat_memory_total() %.2f GiB: %.120s", gib, (double)mem / (1 << 30),
           m ? m : "(no 'this machine:' line)");
}

static void test_short_run(const char *base) {
    char ini[700], out[700];
    snprintf(ini, sizeof ini, "%s/machine.ini", base);
    snprintf(out, sizeof out, "%s/genconfig.txt", base);
    const char *argv[] = {g_genconfig, "--seconds", "1",          "--warmup", "0.5",   "--net", "1x8",
                          "--backend", "cpu",       "--cache-mb", "8",        "--out", ini,     NULL};
    char *text;
    compat_setenv("KOMA_TEST_LOADAVG", "0");
    int st = run(argv, out, &text);
    compat_setenv("KOMA_TEST_LOADAVG", NULL);
    CHECKF(st == 0, "genconfig exited %d:\n%s", st, text);
    fprintf(stderr, "%s", text);
    row_t rows[32], chosen;
    int tried;
    int n = parse_table(text, rows, 32, &tried, &chosen);
    /* one row per setting: the start, threads at C and 4C, games-per-thread 4 and 16 */
    CHECKF(n == 5 && tried == n, "%d rows, '%d settings tried': want 5 and 5", n, tried);
    int cpus = compat_cpu_count();
    CHECKF(n > 0 && rows[0].threads == 2 * cpus && rows[0].games == 8 && !strcmp(rows[0].tries, "start"),
           "row 1 is not selfplay's defaults (threads %lld, games %lld, '%s')", n > 0 ? rows[0].threads : -1,
           n > 0 ? rows[0].games : -1, n > 0 ? rows[0].tries : "");
    for (int i = 0; i < n; i++) {
        /* every row measured the net at work; a second of 64 games at once may finish no move on a slow
         * machine (the Windows build under wine), so positions/s may be 0 there, never evaluations/s */
        CHECKF(rows[i].row == i + 1 && rows[i].pos_s >= 0 && rows[i].evals_s > 0,
               "row %d: number %d, %.1f positions/s, %.0f evaluations/s", i + 1, rows[i].row, rows[i].pos_s,
               rows[i].evals_s);
        for (int j = 0; j < i; j++)
            CHECKF(rows[i].threads != rows[j].threads || rows[i].games != rows[j].games,
                   "rows %d and %d tried the same setting", j + 1, i + 1);
        char want[64];
        if (i > 0) {
            int is_threads = !strncmp(rows[i].tries, "threads ", 8);
            snprintf(want, sizeof want, "%s %lld", is_threads ? "threads" : "games-per-thread",
                     is_threads ? rows[i].threads : rows[i].games);
            CHECKF(!strcmp(rows[i].tries, want), "row %d tries '%s' but ran %s", i + 1, rows[i].tries, want);
        }
    }
    CHECKF(chosen.row >= 1 && chosen.row <= n && chosen.mark == '*', "no chosen row (%d)", chosen.row);
    check_memory(text);
    /* what a terminal shows fits 80 columns (the table was 122, the settings line 146; a Windows line's
     * '\r' is no column); no warning about the load where none is (KOMA_TEST_LOADAVG=0) */
    int longest = 0, cur = 0;
    for (const char *p = text; *p; p++)
        if (*p != '\r') cur = *p == '\n' ? 0 : cur + 1, longest = cur > longest ? cur : longest;
    CHECKF(longest <= 80, "genconfig printed a line of %d columns:\n%s", longest, text);
    CHECKF(!strstr(text, "busy ("), "a warning about the load where there was none:\n%s", text);
    free(text);

    /* the INI: genconfig's first line, the chosen row's values where they are not the defaults */
    char *body = t_read_file(ini, NULL);
    CHECKF(body != NULL, "%s was not written", ini);
    if (!body) return;
    CHECKF(!strncmp(body, "; written by genconfig", 22), "first line of %s: %.60s", ini, body);
    const char *v = ini_value(body, "threads");
    if (chosen.threads == 2 * cpus)
        CHECKF(v == NULL, "threads = %s written, but the chosen row has the default (two per CPU)", v);
    else CHECKF(v && atoll(v) == chosen.threads, "threads = %s, chosen row %lld", v ? v : "(none)", chosen.threads);
    v = ini_value(body, "games-per-thread");
    if (chosen.games == 8) CHECKF(v == NULL, "games-per-thread = %s written, the default", v);
    else CHECKF(v && atoll(v) == chosen.games, "games-per-thread = %s, chosen %lld", v ? v : "(none)", chosen.games);
    /* every game of the chosen row at once fits in one cycle (selfplay's default 24 otherwise) */
    v = ini_value(body, "games-per-cycle");
    if (chosen.threads * chosen.games <= 24)
        CHECKF(v == NULL, "games-per-cycle = %s written, but %lld x %lld games fit the default 24", v, chosen.threads,
               chosen.games);
    else
        CHECKF(v && atoll(v) == chosen.threads * chosen.games, "games-per-cycle = %s, chosen row %lld x %lld",
               v ? v : "(none)", chosen.threads, chosen.games);
    v = ini_value(body, "net");
    CHECKF(v && !strcmp(v, "1x8"), "net = %s (want 1x8, given)", v ? v : "(none)");
    v = ini_value(body, "backend");
    CHECKF(v == NULL, "backend = %s written (cpu is the default)", v);
    /* every key line has its comment */
    for (const char *p = body; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && p[0] != ';') CHECKF(memchr(p, ';', len) != NULL, "a key without its comment: %.*s", (int)len, p);
        p = e ? e + 1 : p + len;
    }
    fprintf(stderr, "--- %s\n%s---\n", ini, body);
    free(body);

    char err[1024];
    CHECKF(selfplay_checks(ini, err, sizeof err) == 0, "selfplay's checks refuse %s: %s", ini, err);
    /* the real selfplay reads it (--config before --help: the file is loaded first) */
    const char *sp[] = {g_selfplay, "--config", ini, "--help", NULL};
    st = run(sp, out, &text);
    CHECKF(st == 0, "selfplay --config %s --help exited %d:\n%.2000s", ini, st, text);
    free(text);
    /* ... and refuses a file with a key it does not know (the check above can fail) */
    char bad[760];
    snprintf(bad, sizeof bad, "%s/bad.ini", base);
    body = t_read_file(ini, NULL);
    FILE *f = fopen(bad, "w");
    KOMA_ASSERT(f && body);
    fprintf(f, "%sno-such-flag = 1\n", body);
    fclose(f);
    free(body);
    const char *sp_bad[] = {g_selfplay, "--config", bad, "--help", NULL};
    st = run(sp_bad, out, &text);
    CHECKF(st != 0 && strstr(text, "no-such-flag"), "selfplay took a bad INI: exit %d:\n%.500s", st, text);
    free(text);
}

/* A flag given on the command line is held fixed (no stage for it) and
 * written as given; a --config key is the starting point, and tried; the
 * same --out is replaced (genconfig wrote it). */
static void test_given(const char *base) {
    char ini[700], out[700], start[700];
    snprintf(ini, sizeof ini, "%s/machine.ini", base);
    snprintf(out, sizeof out, "%s/given.txt", base);
    snprintf(start, sizeof start, "%s/start.ini", base);
    char err[256];
    KOMA_ASSERT(compat_write_file_durable(start, "threads = 3\n", 12, err, sizeof err) == 0);
    const char *argv[] = {g_genconfig, "--config",   start, "--seconds", "0.5", "--warmup",
                          "0.3",       "--net",      "1x8", "--backend", "cpu", "--games-per-thread",
                          "6",         "--cache-mb", "8",   "--out",     ini,   NULL};
    char *text;
    int st = run(argv, out, &text);
    CHECKF(st == 0, "genconfig exited %d:\n%s", st, text);
    row_t rows[8], chosen;
    int tried;
    int n = parse_table(text, rows, 8, &tried, &chosen);
    int cpus = compat_cpu_count(), want = 1;
    for (int k = 1; k <= 4; k *= 2) want += k * cpus != 3; /* threads C, 2C, 4C besides the start's 3 */
    CHECKF(n == want && tried == n && rows[0].threads == 3, "--config threads 3: %d rows (want %d), row 1 %lld threads",
           n, want, n ? rows[0].threads : -1);
    for (int i = 0; i < n; i++)
        CHECKF(rows[i].games == 6 && (i == 0 || !strncmp(rows[i].tries, "threads ", 8)),
               "row %d: %lld games per thread, tries '%s' (--games-per-thread 6 is held)", i + 1, rows[i].games,
               rows[i].tries);
    free(text);
    char *body = t_read_file(ini, NULL);
    CHECKF(body && strstr(body, "\ngames-per-thread = 6   ; given to genconfig (held fixed"),
           "games-per-thread not written as given:\n%s", body ? body : "(no file)");
    const char *v = body ? ini_value(body, "threads") : NULL;
    if (chosen.threads == 2 * cpus)
        CHECKF(v == NULL, "threads = %s written, but the chosen row has the default (two per CPU)", v);
    else CHECKF(v && atoll(v) == chosen.threads, "threads = %s, chosen row %lld", v ? v : "(none)", chosen.threads);
    free(body);
}

/* Games per thread never above the cycle's games (selfplay caps them, so a
 * setting measured above it is not what selfplay would play): with
 * --threads 2 --games-per-thread 32 the INI says games-per-cycle = 64
 * (threads x games-per-thread, over the default 24), and selfplay reads it
 * back without capping; with --games-per-cycle 6 given, row 1 plays 6 games
 * per thread (8 capped, said so), no row tries more than 6, and the INI
 * keeps games-per-cycle = 6. */
static void test_cycle(const char *base) {
    char ini[700], out[700], err[1024];
    snprintf(ini, sizeof ini, "%s/cycle.ini", base);
    snprintf(out, sizeof out, "%s/cycle.txt", base);
    const char *a1[] = {g_genconfig, "--seconds",          "0.5", "--warmup",   "0.3", "--net",
                        "1x8",       "--backend",          "cpu", "--cache-mb", "8",   "--threads",
                        "2",         "--games-per-thread", "32",  "--out",      ini,   NULL};
    char *text;
    int st = run(a1, out, &text);
    CHECKF(st == 0, "genconfig exited %d:\n%s", st, text);
    free(text);
    char *body = t_read_file(ini, NULL);
    const char *v = body ? ini_value(body, "games-per-cycle") : NULL;
    CHECKF(v && atoll(v) == 64, "games-per-cycle = %s, want 64 (2 threads x 32 games):\n%s", v ? v : "(none)",
           body ? body : "(no file)");
    CHECKF(body && strstr(body, "games-per-cycle = 64   ; threads x games-per-thread (2 x 32)"),
           "games-per-cycle without its reason:\n%s", body ? body : "(no file)");
    free(body);
    static sp_config_t c;
    static train_config_t t;
    sp_config_default(&c);
    t = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    cfg_opt_t opts[SP_CONFIG_NFLAGS + TRAIN_CONFIG_NFLAGS];
    int n = sp_config_flags(&c, opts, SP_CONFIG_NFLAGS);
    n += train_config_flags(&t, opts + n, TRAIN_CONFIG_NFLAGS);
    CHECKF(cfg_load_file(opts, n, ini, err, sizeof err) == CFG_OK, "%s: %s", ini, err);
    CHECKF(c.games_per_thread == 32 && sp_config_games_per_thread(&c) == 32,
           "selfplay plays %lld games per thread with %s, not the 32 measured",
           (long long)sp_config_games_per_thread(&c), ini);

    const char *a2[] = {g_genconfig, "--seconds",         "0.5", "--warmup",   "0.3", "--net",
                        "1x8",       "--backend",         "cpu", "--cache-mb", "8",   "--threads",
                        "2",         "--games-per-cycle", "6",   "--out",      ini,   NULL};
    st = run(a2, out, &text);
    CHECKF(st == 0, "genconfig exited %d:\n%s", st, text);
    CHECKF(strstr(text, "--games-per-thread 8 capped at 6"), "the start's cap not said:\n%s", text);
    row_t rows[8], chosen;
    int tried;
    int nr = parse_table(text, rows, 8, &tried, &chosen);
    CHECKF(nr >= 2 && rows[0].games == 6, "%d rows, row 1 plays %lld games per thread (want 6)", nr,
           nr ? rows[0].games : -1);
    for (int i = 0; i < nr; i++)
        CHECKF(rows[i].games <= 6, "row %d tries %lld games per thread, more than --games-per-cycle 6", i + 1,
               rows[i].games);
    free(text);
    body = t_read_file(ini, NULL);
    v = body ? ini_value(body, "games-per-cycle") : NULL;
    CHECKF(v && atoll(v) == 6, "games-per-cycle = %s, want 6 (given)", v ? v : "(none)");
    v = body ? ini_value(body, "games-per-thread") : NULL;
    CHECKF(v && atoll(v) <= 6 && atoll(v) == chosen.games, "games-per-thread = %s (chosen %lld, at most 6)",
           v ? v : "(none)", chosen.games);
    free(body);
}

static void test_refusals(const char *base) {
    char out[700], mine[700], dir[700];
    snprintf(out, sizeof out, "%s/refuse.txt", base);
    snprintf(mine, sizeof mine, "%s/mine.ini", base);
    snprintf(dir, sizeof dir, "%s/adir", base);
    char err[256];
    KOMA_ASSERT(compat_mkdir_p(dir, err, sizeof err) == 0);
    const char *keep = "; my own settings\nthreads = 2\n";
    KOMA_ASSERT(compat_write_file_durable(mine, keep, strlen(keep), err, sizeof err) == 0);
    /* a file of a run (under its models/): refused by run_output_check, though genconfig never wrote there */
    char runmodels[760], inrun[800];
    snprintf(runmodels, sizeof runmodels, "%s/run/models", base);
    snprintf(inrun, sizeof inrun, "%s/fitted.ini", runmodels);
    KOMA_ASSERT(compat_mkdir_p(runmodels, err, sizeof err) == 0);
    char db[800];
    snprintf(db, sizeof db, "%s/run/koma.db", base);
    KOMA_ASSERT(compat_write_file_durable(db, "", 0, err, sizeof err) == 0);
    const char *targets[] = {dir, mine, inrun};
    for (int i = 0; i < 3; i++) {
        const char *argv[] = {g_genconfig, "--seconds", "30",    "--net",    "1x8",
                              "--backend", "cpu",       "--out", targets[i], NULL};
        int64_t t0 = compat_now_ms();
        char *text;
        int st = run(argv, out, &text);
        int64_t ms = compat_now_ms() - t0;
        CHECKF(st == 1 && strstr(text, targets[i]) && !strstr(text, "positions/s"),
               "--out %s: exit %d, not refused before measuring:\n%s", targets[i], st, text);
        CHECKF(ms < 25000, "--out %s: refused after %lld ms (it measured first)", targets[i], (long long)ms);
        free(text);
    }
    char *body = t_read_file(mine, NULL);
    CHECKF(body && !strcmp(body, keep), "%s was changed", mine);
    CHECKF(!compat_file_exists(inrun), "%s was written", inrun);
    free(body);
    if (nn_cuda_device_count() == 0) {
        const char *argv[] = {g_genconfig, "--backend", "cuda", "--out", mine, NULL};
        char *text;
        int st = run(argv, out, &text);
        CHECKF(st == 1 && strstr(text, "no CUDA device") && strstr(text, "--backend cpu"),
               "--backend cuda without a device: exit %d:\n%s", st, text);
        free(text);
    }
}

/* A busy machine (a load average of 3 per CPU, given through KOMA_TEST_LOADAVG): genconfig warns before it
 * measures, says why the figures may mislead, and the INI's header says it was measured busy. */
static void test_busy(const char *base) {
    char ini[700], out[700], load[32];
    snprintf(ini, sizeof ini, "%s/busy.ini", base);
    snprintf(out, sizeof out, "%s/busy.txt", base);
    snprintf(load, sizeof load, "%d.5", 3 * compat_cpu_count());
    const char *argv[] = {g_genconfig, "--seconds",          "0.3", "--warmup",   "0.1", "--net",
                          "1x8",       "--backend",          "cpu", "--cache-mb", "8",   "--threads",
                          "1",         "--games-per-thread", "2",   "--out",      ini,   NULL};
    char *text;
    compat_setenv("KOMA_TEST_LOADAVG", load);
    int st = run(argv, out, &text);
    compat_setenv("KOMA_TEST_LOADAVG", NULL);
    const char *w = strstr(text, "warning: this machine is busy (load average");
    const char *row1 = strstr(text, "   1 start");
    CHECKF(st == 0 && w && strstr(w, load) && strstr(w, "idle machine") && row1 && w < row1,
           "a busy machine: exit %d, no warning before the table:\n%s", st, text);
    free(text);
    text = t_read_file(ini, NULL);
    CHECKF(text && strstr(text, "busy while measured (load average"), "the INI does not say it was measured busy:\n%s",
           text ? text : "(none)");
    free(text);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_genconfig GENCONFIG SELFPLAY\n");
        return 2;
    }
    g_genconfig = argv[1];
    g_selfplay = argv[2];
    const char *base = t_scratch("genconfig");
    test_refusals(base);
    test_short_run(base);
    test_busy(base);
    test_given(base);
    test_cycle(base);
    if (!atomic_load(&g_fail)) t_rm_rf(base);
    return t_done("test_genconfig");
}
