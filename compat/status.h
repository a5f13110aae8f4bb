/* status.h - what a long job shows a person: one status line kept up to
 * date, and event lines for what matters.
 *
 * Owns: the choice between the two ways of showing progress and the
 * writing of both.
 *  - On a terminal (compat_isatty): the status line is rewritten in place
 *    ("\r", the text cut to the terminal's width so that it never wraps,
 *    ESC[K to clear the rest), at most once per period (default 1 s). An
 *    event clears the status line, prints its own line (wrapped at spaces
 *    to the terminal's width, the lines after the first indented), and puts
 *    the status line back under it.
 *  - Off a terminal (a pipe, a file, CI): a plain status line every period
 *    (default 30 s), and each event as a line.
 *  - Quiet (--quiet, for scripts): no status lines, and of the events only
 *    warnings and errors.
 * No colour is used, so NO_COLOR needs nothing.
 * Does not own: a program's log file (its owner writes the events there, and
 * the status line at most once a minute), the text of the lines.
 *
 * Threads: every function may be called from any thread (one mutex).
 * Errors: none; output that fails to be written is dropped.
 */
#ifndef KOMA_COMPAT_STATUS_H
#define KOMA_COMPAT_STATUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    STATUS_INFO = 0, /* an ordinary event: a cycle's summary, a new net, a result */
    STATUS_WARN = 1, /* warnings and errors: shown even when quiet */
} status_level_t;

typedef struct status status_t;

/* A status display on out (stdout or stderr). period_s: seconds between
 * status lines; <= 0 picks the default (1 on a terminal, 30 otherwise).
 * quiet: see above. KOMA_TTY=0/1 in the environment forces the terminal
 * decision either way. NULL only when out of memory. */
status_t *status_new(FILE *out, double period_s, bool quiet);
void status_free(status_t *s); /* clears a status line left on the terminal; NULL ok */

bool status_is_tty(const status_t *s);
double status_period(const status_t *s);
/* 1 when a status line is due now (a period since the last one): the caller
 * builds its text only then. */
bool status_due(status_t *s);
/* The current status. On a terminal it replaces the line in place; off one
 * it is printed as a line. force: print it now even if not due (a final
 * status). Does nothing when quiet. */
void status_line(status_t *s, bool force, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The job is ending: a status line on the terminal stays there as a line,
 * and no status line is drawn again; events (a summary, an error) and
 * whatever the program prints next start on a line of their own. */
void status_finish(status_t *s);
/* An event line (see the levels). */
void status_event(status_t *s, status_level_t level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
