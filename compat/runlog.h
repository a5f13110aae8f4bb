/* runlog.h - a program's log: the one way a line of any module reaches a
 * person (compat/status.h) and the run's log file.
 *
 * Owns:
 *  - runlog_t, the program's log: each event goes to the status display as
 *    an event (a warning when it starts with "warning" or "error", or holds
 *    ": warning" or "failed": shown even when quiet), or to stderr as a line
 *    when there is no display, and is appended to the log file, once one is
 *    open, after a UTC time ("2026-01-31 12:00:00 "), flushed line by line.
 *    The status line goes to the file too, at most as often as the caller
 *    asks (runlog_file_due).
 *  - runlog_sink_t, a module's end of it: the callback a module is given
 *    (train_config_t.log, the gauntlet's, the ranks') and what happens when
 *    there is none (stderr after a prefix, or nothing). Every module formats
 *    its lines with runlog_printf; none has a formatter of its own.
 * Does not own: the status display (its owner passes it in and frees it
 * after the log), where the file lives (data/run.h names it), the text.
 *
 * Threads: runlog_t: every function from any thread (one mutex). A sink is
 * a value its module keeps; its callback runs on the caller's thread.
 * Errors: a file that cannot be opened is the caller's to report (the log
 * goes on without it); output that fails to be written is dropped.
 */
#ifndef KOMA_COMPAT_RUNLOG_H
#define KOMA_COMPAT_RUNLOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "compat/status.h"

#if defined(__GNUC__)
#define RUNLOG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RUNLOG_PRINTF(f, a)
#endif

#define RUNLOG_LINE_MAX 2048 /* a line longer than this is cut */

/* A module's log callback: one line, without its newline. */
typedef void (*runlog_fn)(void *user, const char *line);

/* ---- a module's end ------------------------------------------------------ */

typedef struct {
    runlog_fn fn; /* NULL: stderr after prefix, or nothing (to_stderr false) */
    void *user;
    bool to_stderr;
    char prefix[192]; /* before each line on stderr (not given to fn) */
} runlog_sink_t;

/* Lines to fn(user, line); with no fn, to stderr as "<prefix><line>" when
 * prefix is not NULL, else nowhere. */
runlog_sink_t runlog_sink(runlog_fn fn, void *user, const char *prefix);
void runlog_printf(const runlog_sink_t *s, const char *fmt, ...) RUNLOG_PRINTF(2, 3);
void runlog_vprintf(const runlog_sink_t *s, const char *fmt, va_list ap);

/* ---- the program's log ----------------------------------------------------- */

typedef struct runlog runlog_t;

/* A log showing its events on st (NULL: stderr lines), with no file yet.
 * NULL only when out of memory. */
runlog_t *runlog_new(status_t *st);
void runlog_free(runlog_t *l); /* closes the file; NULL ok */
/* Appends to path from now on: 0, or -1 when it cannot be opened. */
int runlog_open(runlog_t *l, const char *path);
/* Closes the file (events still reach the display). */
void runlog_close(runlog_t *l);

/* An event: the display (or stderr) and the file. */
void runlog_event(runlog_t *l, const char *fmt, ...) RUNLOG_PRINTF(2, 3);
/* The same with a prefix before the text ("train: "); the warning test
 * reads the text after it. */
void runlog_event_prefix(runlog_t *l, const char *prefix, const char *fmt, ...) RUNLOG_PRINTF(3, 4);
/* A runlog_fn: user is the runlog_t, the line an event. */
void runlog_line(void *runlog, const char *line);

/* A line for the file only (the status line); it restarts the clock of
 * runlog_file_due. */
void runlog_file_line(runlog_t *l, const char *line);
/* A file is open and period_s seconds have passed since the last
 * runlog_file_line (or runlog_new). */
bool runlog_file_due(runlog_t *l, double period_s);

#endif
