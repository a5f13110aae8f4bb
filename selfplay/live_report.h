/* live_report.h - RUN/report.html kept current while selfplay runs.
 *
 * Owns: when the page is rewritten and the child process that writes it:
 * tools/report (koma-report where installed beside selfplay, tools/report
 * in the build tree) with --live after each published net and each finished
 * evaluation (one at a time; a write due while one runs follows it), and
 * once more with --final when the run stops. The report writes the page
 * atomically (temporary name, fsync, rename: data/run.h), so a browser
 * reload shows either the old page or the new one, never a half-written one.
 * A child process, in its own process group: self-play never waits for it,
 * a Ctrl-C stops selfplay, not the report, and a report that fails costs
 * the run nothing (a warning in the run's log).
 * Does not own: the page (tools/report.c), the run's events (the driver
 * calls sp_live_report_poll with them).
 *
 * Threads: the driver thread's. Every function accepts NULL (nothing to do).
 */
#ifndef KOMA_SELFPLAY_LIVE_REPORT_H
#define KOMA_SELFPLAY_LIVE_REPORT_H

#include <stdint.h>

#include "compat/runlog.h"
#include "selfplay/gauntlet.h"

typedef struct sp_live_report sp_live_report_t;

/* NULL when off (--report 0), when no report program is found (said once in
 * the run's log file) or out of memory. */
sp_live_report_t *sp_live_report_new(const char *run_dir, int enabled, runlog_t *log);
/* A write is due when the newest net (latest) or the newest rating changed;
 * starts it unless one is running. Never waits. */
void sp_live_report_poll(sp_live_report_t *r, int64_t latest, const sp_gauntlet_t *g);
/* The run stops: waits for a running write (bounded), writes the page once
 * more with --final (bounded: a report still running is killed, the page it
 * would have replaced stays) and frees r. */
void sp_live_report_free(sp_live_report_t *r);

#endif
