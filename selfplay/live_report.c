/* live_report.c - RUN/report.html kept current while selfplay runs; see live_report.h. */
#include "selfplay/live_report.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/exe.h"

#define LIVE_REPORT_RATED_SCAN 64  /* the newest ratings looked for: the gauntlet rates nets oldest first */
#define LIVE_REPORT_FINAL_MS 30000 /* how long a stopping run waits for a write, and then for the last one */

struct sp_live_report {
    char prog[1200];
    char run_dir[1200];
    runlog_t *log;
    compat_proc_t *child; /* the write in flight, or NULL */
    int64_t latest;       /* the newest net when the last write started */
    int64_t rated;        /* the newest rated net then */
    bool due;
    int failures;
};

/* The report program beside this one: installed as koma-report, tools/report in the build tree. */
static int find_report(char *out, size_t len) {
    char dir[1000];
    if (compat_exe_dir(dir, sizeof dir) != 0) return -1;
    const char *const names[] = {"koma-report", "tools/report", "report"};
    const char *const ext[] = {"", ".exe"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (size_t k = 0; k < 2; k++) {
            snprintf(out, len, "%s/%s%s", dir, names[i], ext[k]);
            if (compat_file_exists(out) && !compat_is_dir(out)) return 0;
        }
    return -1;
}

sp_live_report_t *sp_live_report_new(const char *run_dir, int enabled, runlog_t *log) {
    if (!enabled || !run_dir) return NULL;
    sp_live_report_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (find_report(r->prog, sizeof r->prog) != 0) {
        runlog_file_line(log, "report.html is not kept current: no report program beside selfplay (koma-report, "
                              "tools/report)");
        free(r);
        return NULL;
    }
    snprintf(r->run_dir, sizeof r->run_dir, "%s", run_dir);
    r->log = log;
    r->latest = r->rated = -1;
    return r;
}

/* A finished write: its status said once in the log when it failed. */
static void reap(sp_live_report_t *r, int64_t wait_ms) {
    if (!r->child) return;
    int status = 0;
    if (compat_proc_wait(r->child, wait_ms, &status) != 0) {
        if (wait_ms <= 0) return; /* still writing */
        compat_proc_kill(r->child);
        status = -1;
    }
    compat_proc_free(r->child);
    r->child = NULL;
    if (status != 0 && r->failures++ == 0)
        runlog_event(r->log, "warning: %s could not write %s/report.html (exit status %d); the run goes on", r->prog,
                     r->run_dir, status);
}

static void start(sp_live_report_t *r, const char *when) {
    const char *argv[] = {r->prog, r->run_dir, when, NULL};
    char err[512];
    r->child = compat_proc_spawn(argv, NULL, err, sizeof err);
    if (!r->child && r->failures++ == 0)
        runlog_event(r->log, "warning: cannot run %s to write %s/report.html: %s", r->prog, r->run_dir, err);
}

void sp_live_report_poll(sp_live_report_t *r, int64_t latest, const sp_gauntlet_t *g) {
    if (!r) return;
    int64_t rated = r->rated;
    double e, lo, hi;
    for (int64_t c = latest; c > r->rated && c > latest - LIVE_REPORT_RATED_SCAN && c >= 0; c--)
        if (sp_gauntlet_rating(g, c, &e, &lo, &hi)) {
            rated = c;
            break;
        }
    if (latest != r->latest || rated != r->rated) r->due = true, r->latest = latest, r->rated = rated;
    reap(r, 0);
    if (r->due && !r->child) {
        r->due = false;
        start(r, "--live");
    }
}

void sp_live_report_free(sp_live_report_t *r) {
    if (!r) return;
    reap(r, LIVE_REPORT_FINAL_MS);
    start(r, "--final");
    reap(r, LIVE_REPORT_FINAL_MS);
    free(r);
}
