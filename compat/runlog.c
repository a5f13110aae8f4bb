/* runlog.c - a program's log and its modules' ends; see runlog.h. */
#include "compat/runlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat/compat.h"

/* ---- a module's end ------------------------------------------------------ */

runlog_sink_t runlog_sink(runlog_fn fn, void *user, const char *prefix) {
    runlog_sink_t s = {.fn = fn, .user = user, .to_stderr = prefix != NULL};
    if (prefix) snprintf(s.prefix, sizeof s.prefix, "%s", prefix);
    return s;
}

void runlog_vprintf(const runlog_sink_t *s, const char *fmt, va_list ap) {
    if (!s || (!s->fn && !s->to_stderr)) return;
    char line[RUNLOG_LINE_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    if (s->fn) s->fn(s->user, line);
    else fprintf(stderr, "%s%s\n", s->prefix, line);
}

void runlog_printf(const runlog_sink_t *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    runlog_vprintf(s, fmt, ap);
    va_end(ap);
}

/* ---- the program's log ----------------------------------------------------- */

struct runlog {
    status_t *st;           /* NULL: stderr */
    FILE *file;             /* NULL: none (yet, or any more) */
    int64_t file_status_ns; /* when the file last got a status line */
    compat_mutex_t mu;
};

runlog_t *runlog_new(status_t *st) {
    runlog_t *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->st = st;
    l->file_status_ns = compat_now_ns();
    compat_mutex_init(&l->mu);
    return l;
}

void runlog_free(runlog_t *l) {
    if (!l) return;
    runlog_close(l);
    compat_mutex_destroy(&l->mu);
    free(l);
}

int runlog_open(runlog_t *l, const char *path) {
    FILE *f = fopen(path, "a");
    if (!f) return -1;
    compat_mutex_lock(&l->mu);
    if (l->file) fclose(l->file);
    l->file = f;
    compat_mutex_unlock(&l->mu);
    return 0;
}

void runlog_close(runlog_t *l) {
    if (!l) return;
    compat_mutex_lock(&l->mu);
    if (l->file) fclose(l->file);
    l->file = NULL;
    compat_mutex_unlock(&l->mu);
}

/* "2026-01-31 12:00:00" (UTC), under l->mu (gmtime's buffer is shared). */
static void stamp(char *ts, size_t n) {
    time_t now = time(NULL);
    ts[0] = 0;
    const struct tm *tm = gmtime(&now);
    if (tm) strftime(ts, n, "%Y-%m-%d %H:%M:%S", tm);
}

static void vevent(runlog_t *l, const char *prefix, const char *fmt, va_list ap) {
    char msg[RUNLOG_LINE_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    char ts[32];
    compat_mutex_lock(&l->mu);
    stamp(ts, sizeof ts);
    bool warn = strncmp(msg, "warning", 7) == 0 || strncmp(msg, "error", 5) == 0 || strstr(msg, ": warning") ||
                strstr(msg, "failed");
    if (l->st) status_event(l->st, warn ? STATUS_WARN : STATUS_INFO, "%s%s", prefix, msg);
    else fprintf(stderr, "%s%s\n", prefix, msg);
    if (l->file) {
        fprintf(l->file, "%s %s%s\n", ts, prefix, msg);
        fflush(l->file);
    }
    compat_mutex_unlock(&l->mu);
}

void runlog_event(runlog_t *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vevent(l, "", fmt, ap);
    va_end(ap);
}

void runlog_event_prefix(runlog_t *l, const char *prefix, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vevent(l, prefix ? prefix : "", fmt, ap);
    va_end(ap);
}

void runlog_line(void *runlog, const char *line) { runlog_event(runlog, "%s", line); }

void runlog_file_line(runlog_t *l, const char *line) {
    compat_mutex_lock(&l->mu);
    if (l->file) {
        char ts[32];
        stamp(ts, sizeof ts);
        fprintf(l->file, "%s %s\n", ts, line);
        fflush(l->file);
    }
    l->file_status_ns = compat_now_ns();
    compat_mutex_unlock(&l->mu);
}

bool runlog_file_due(runlog_t *l, double period_s) {
    compat_mutex_lock(&l->mu);
    bool due = l->file && (double)(compat_now_ns() - l->file_status_ns) * 1e-9 >= period_s;
    compat_mutex_unlock(&l->mu);
    return due;
}
