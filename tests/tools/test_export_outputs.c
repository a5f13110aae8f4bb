/* test_export_outputs.c - what `export` guarantees when it is killed or given
 * nothing usable, and a run's own files (its report.html and log) under every
 * program with an output flag (issue 46, items 4, 5 and 8), through the real
 * binaries:
 *  - kill -9 of an export while it writes (KOMA_TEST_EXPORT_WAIT holds it
 *    with its OUT.tmp.PID open) leaves OUT as it was; the next export to the
 *    same name removes the temporaries of exports that no longer run, says
 *    so, and keeps the temporary of a process that still runs;
 *  - an export that selects nothing (cycles with no games) is an error
 *    (exit 1, "nothing to export") and an existing OUT stays byte for byte;
 *  - export --out, train --out and --losses, report -o (of another run, or
 *    --db), genconfig --out and usi-match --engine-stderr onto a run's
 *    report.html or log are refused, naming the file and the flag, and both
 *    stay byte for byte (usi-match --db refuses them as no database;
 *    onnx-export writes only a name ending in .onnx); `report RUN` still
 *    writes RUN/report.html.
 * The run is made by `import` from tests/data/formats/games.hcpe.
 *
 *   (binaries: KOMA_IMPORT_BIN, KOMA_EXPORT_BIN, KOMA_REPORT_BIN; the others
 *   where built: KOMA_TRAIN_BIN, KOMA_GENCONFIG_BIN, KOMA_USI_MATCH_BIN)
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "tests/koma_test.h"
#include "tests/run_prog.h"

#if !defined(KOMA_IMPORT_BIN) || !defined(KOMA_EXPORT_BIN) || !defined(KOMA_REPORT_BIN)
#error "the paths of import, export and report (tests/tools/CMakeLists.txt)"
#endif

typedef struct {
    char *data;
    size_t len;
} snap_t;

static snap_t snap(const char *path) {
    snap_t s;
    s.data = t_read_file(path, &s.len);
    KOMA_ASSERT(s.data);
    return s;
}

static int same(const char *path, const snap_t *s) {
    size_t len = 0;
    char *now = t_read_file(path, &len);
    int r = now && len == s->len && memcmp(now, s->data, len) == 0;
    free(now);
    return r;
}

static void put_file(const char *path, const char *text) {
    char err[512];
    KOMA_ASSERT(compat_write_file_durable(path, text, strlen(text), err, sizeof err) == 0);
}

/* Entries of dir whose name starts with prefix. */
typedef struct {
    const char *prefix;
    int n;
} count_t;
static int count_entry(const char *name, int is_dir, void *user) {
    count_t *c = user;
    (void)is_dir;
    if (!strncmp(name, c->prefix, strlen(c->prefix))) c->n++;
    return 0;
}
static int entries(const char *dir, const char *prefix) {
    count_t c = {prefix, 0};
    compat_list_dir(dir, count_entry, &c, NULL, 0);
    return c.n;
}

/* An export held with its temporary open (KOMA_TEST_EXPORT_WAIT), killed
 * with SIGKILL: returns the pid it had (its temporary is OUT.tmp.PID), 0 when
 * it could not be held. */
static int export_killed(const char *R, const char *out) {
    char err[512], line[1200];
    const char *argv[] = {KOMA_EXPORT_BIN, "--run", R, "--format", "psv", "--out", out, NULL};
    KOMA_ASSERT(compat_setenv("KOMA_TEST_EXPORT_WAIT", "1") == 0);
    compat_proc_t *p = compat_proc_spawn(argv, NULL, err, sizeof err);
    KOMA_ASSERT(compat_setenv("KOMA_TEST_EXPORT_WAIT", NULL) == 0);
    if (!p) {
        fprintf(stderr, "%s\n", err);
        return 0;
    }
    int pid = compat_proc_pid(p);
    int32_t n = compat_proc_read_line(p, line, sizeof line, 120000); /* the export's own event, never a time */
    int held = n > 0 && strstr(line, "KOMA_TEST_EXPORT_WAIT");
    CHECKF(held, "export did not stop with its temporary open: %s", n > 0 ? line : "(no line)");
    compat_proc_kill(p); /* SIGKILL: nothing of export's runs after it */
    int status = 0;
    CHECK(compat_proc_wait(p, -1, &status) == 0 && status != 0);
    compat_proc_free(p);
    return held ? pid : 0;
}

/* ---- items 4 and 5: export killed, export of nothing ------------------------------------------ */
static void test_export(const char *R) {
    char out[1000], tmp[1100], live[1100], other[1000];
    snprintf(out, sizeof out, "%s", t_path("out.psv"));
    CHECK(run(KOMA_EXPORT_BIN, "--run", R, "--format", "psv", "--out", out, NULL) == 0);
    snap_t first = snap(out);
    CHECK(first.len > 0 && first.len % 40 == 0);

    /* three exports killed while writing: each leaves its OUT.tmp.PID and OUT as it was; each one removed the
     * temporary the one before it left */
    int pids[3], held = 0;
    for (int i = 0; i < 3; i++) {
        pids[i] = export_killed(R, out);
        if (!pids[i]) continue;
        held++;
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, pids[i]);
        CHECKF(compat_file_exists(tmp), "the killed export left no %s (nothing to clean: the test cannot fail)", tmp);
        CHECK(same(out, &first));
        CHECKF(entries(t_dir, "out.psv.tmp.") == 1, "%d temporaries of out.psv after %d kills",
               entries(t_dir, "out.psv.tmp."), i + 1);
    }
    CHECK(held == 3);
    /* a temporary of a process that still runs (this test) is not touched */
    snprintf(live, sizeof live, "%s.tmp.%d", out, compat_getpid());
    put_file(live, "another export under way\n");
    /* a temporary of another name is not touched either */
    snprintf(other, sizeof other, "%s.tmp.%d", t_path("other.psv"), pids[0]);
    put_file(other, "not out.psv's\n");

    CHECK(run(KOMA_EXPORT_BIN, "--run", R, "--format", "psv", "--out", out, NULL) == 0);
    CHECK(has(g_err, "removed 1 temporary file(s) left by killed exports"));
    for (int i = 0; i < 3; i++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", out, pids[i]);
        CHECKF(!compat_file_exists(tmp), "%s is still there after the next export", tmp);
    }
    CHECK(compat_file_exists(live) && compat_file_exists(other));
    CHECK(entries(t_dir, "out.psv.tmp.") == 1);
    CHECK(same(out, &first)); /* the same games, the same bytes */
    compat_remove_file(live);
    compat_remove_file(other);

    /* nothing selected: an error, and the existing file stays as it was */
    CHECK(run(KOMA_EXPORT_BIN, "--run", R, "--format", "psv", "--from-cycle", "100", "--to-cycle", "200", "--out", out,
              NULL) == 1);
    CHECK(has(g_err, "nothing to export") && has(g_err, "cycles 100..200") && has(g_err, out) &&
          has(g_err, "left as it was"));
    CHECK(same(out, &first));
    CHECK(run(KOMA_EXPORT_BIN, "--run", R, "--format", "hcpe3", "--from-cycle", "0", "--to-cycle", "0", "--out", out,
              NULL) == 1);
    CHECK(has(g_err, "nothing to export") && same(out, &first));
    /* and no file where there was none */
    const char *none = t_path("none.psv");
    CHECK(run(KOMA_EXPORT_BIN, "--run", R, "--format", "psv", "--from-cycle", "5", "--out", none, NULL) == 1);
    CHECK(has(g_err, "nothing to export") && !compat_file_exists(none) && entries(t_dir, "none.psv") == 0);
    CHECK(entries(t_dir, "out.psv.tmp.") == 0);
    free(first.data);
}

/* ---- item 8: a run's report.html and log under every output flag -------------------------------- */
static void refused(int status, const char *target, const char *flag, const char *why) {
    char f[64];
    snprintf(f, sizeof f, "choose another %s", flag);
    CHECKF(status == 1 && has(g_err, "refusing to write") && has(g_err, target) && has(g_err, f) && has(g_err, why),
           "%s %s: exit %d, not refused as %s", flag, target, status, why);
}

static void test_run_files(const char *R) {
    char report[1000], logf[1000], db[1000];
    snprintf(report, sizeof report, "%s/report.html", R);
    snprintf(logf, sizeof logf, "%s/log", R);
    snprintf(db, sizeof db, "%s/koma.db", R);
    CHECK(run(KOMA_REPORT_BIN, R, NULL) == 0 && compat_file_exists(report)); /* report writes the run's own report */
    if (!compat_file_exists(logf)) put_file(logf, "2026-01-01 00:00:00 import: a line of the run's log\n");
    snap_t srep = snap(report), slog = snap(logf);
    const char *rep_why = "it is the run's report", *log_why = "it is the run's log";
    const char *targets[2] = {report, logf}, *whys[2] = {rep_why, log_why};

    for (int i = 0; i < 2; i++) {
        const char *t = targets[i];
        refused(run(KOMA_EXPORT_BIN, "--run", R, "--format", "hcpe", "--out", t, NULL), t, "--out", whys[i]);
        /* another run's report -o, and report --db */
        const char *R2 = t_path("run2");
        refused(run(KOMA_REPORT_BIN, R2, "-o", t, NULL), t, "-o", whys[i]);
        refused(run(KOMA_REPORT_BIN, "--db", db, "-o", t, NULL), t, "-o", whys[i]);
#ifdef KOMA_TRAIN_BIN
        refused(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "1", "--net", "1x8", "--out", t, NULL), t,
                "--out", whys[i]);
        refused(run(KOMA_TRAIN_BIN, "--from-games", "--run", R, "--steps", "1", "--net", "1x8", "--losses", t, NULL), t,
                "--losses", whys[i]);
#endif
#ifdef KOMA_GENCONFIG_BIN
        refused(run(KOMA_GENCONFIG_BIN, "--seconds", "30", "--net", "1x8", "--backend", "cpu", "--out", t, NULL), t,
                "--out", whys[i]);
#endif
#ifdef KOMA_USI_MATCH_BIN
        char e1[1200];
        snprintf(e1, sizeof e1, "\"%s\"", KOMA_USI_MATCH_BIN); /* never started: refused before any engine */
        /* --db: an existing file that is no database is refused as such, before it is a run's file */
        CHECK(run(KOMA_USI_MATCH_BIN, "--engine1", e1, "--engine2", e1, "--games", "2", "--db", t, NULL) == 1 &&
              has(g_err, "nothing was written"));
        refused(run(KOMA_USI_MATCH_BIN, "--engine1", e1, "--engine2", e1, "--games", "2", "--run", R, "--engine-stderr",
                    t, NULL),
                t, "--engine-stderr", whys[i]);
#endif
        CHECKF(same(report, &srep) && same(logf, &slog), "%s was changed", t);
    }
    /* the run's own report again: still written by report RUN (and only the run's: run2 has no koma.db, so
     * run2/report.html is no run's file) */
    CHECK(run(KOMA_REPORT_BIN, R, "-o", report, NULL) == 0);
    CHECK(same(logf, &slog));
    free(srep.data);
    free(slog.data);
}

int main(void) {
    t_scratch("export_outputs");
    snprintf(g_out, sizeof g_out, "%s", t_path("stdout.txt"));
    snprintf(g_err, sizeof g_err, "%s", t_path("stderr.txt"));
    const char *R = t_path("run");
    CHECK(run(KOMA_IMPORT_BIN, "--run", R, KOMA_SOURCE_DIR "/tests/data/formats/games.hcpe", NULL) == 0);
    test_export(R);
    test_run_files(R);
    if (!atomic_load(&g_fail)) t_rm_rf(t_dir);
    return t_done("test_export_outputs");
}
