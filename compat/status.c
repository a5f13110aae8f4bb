/* status.c - a status line in place on a terminal, plain lines elsewhere; see status.h. */
#include "compat/status.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

#define STATUS_TEXT_MAX 1024
#define STATUS_WRAP_INDENT 4 /* columns before the second and later lines of a wrapped event */

struct status {
    FILE *out;
    bool tty, quiet;
    double period_s;
    int64_t last_ns;             /* when the last status line went out */
    bool shown;                  /* a status line is on the terminal's last line */
    bool finished;               /* status_finish: no more status lines */
    char text[STATUS_TEXT_MAX];  /* the last status line, for redrawing after an event */
    compat_mutex_t mu;
};

status_t *status_new(FILE *out, double period_s, bool quiet) {
    status_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->out = out ? out : stderr;
    const char *force = getenv("KOMA_TTY");
    s->tty = force && (force[0] == '0' || force[0] == '1') ? force[0] == '1' : compat_isatty(s->out);
    s->quiet = quiet;
    s->period_s = period_s > 0 ? period_s : s->tty ? 1.0 : 30.0;
    s->last_ns = compat_now_ns();
    compat_mutex_init(&s->mu);
    return s;
}

static void clear_line(status_t *s) {
    if (s->shown) fputs("\r\x1b[K", s->out);
    s->shown = false;
}

void status_free(status_t *s) {
    if (!s) return;
    compat_mutex_lock(&s->mu);
    if (s->shown) { /* leave the last status on the screen, as a line */
        fputc('\n', s->out);
        s->shown = false;
    }
    fflush(s->out);
    compat_mutex_unlock(&s->mu);
    compat_mutex_destroy(&s->mu);
    free(s);
}

void status_finish(status_t *s) {
    if (!s) return;
    compat_mutex_lock(&s->mu);
    if (s->shown) fputc('\n', s->out); /* the last status stays on the screen, as a line */
    s->shown = false;
    s->finished = true;
    fflush(s->out);
    compat_mutex_unlock(&s->mu);
}

bool status_is_tty(const status_t *s) { return s && s->tty; }
double status_period(const status_t *s) { return s ? s->period_s : 0; }

bool status_due(status_t *s) {
    if (!s || s->quiet || s->finished) return false;
    compat_mutex_lock(&s->mu);
    bool due = (double)(compat_now_ns() - s->last_ns) * 1e-9 >= s->period_s;
    compat_mutex_unlock(&s->mu);
    return due;
}

/* text cut to fit in cols - 1 columns (the last column would wrap on some
 * terminals); UTF-8 sequences count as one column and are never split. */
static void draw(status_t *s) {
    int cols = compat_term_width(s->out);
    if (cols <= 0) cols = 80;
    int room = cols - 1, used = 0;
    size_t n = 0;
    for (; s->text[n]; n++) {
        unsigned char c = (unsigned char)s->text[n];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: same column */
        if (used == room) break;
        used++;
    }
    fputc('\r', s->out);
    fwrite(s->text, 1, n, s->out);
    fputs("\x1b[K", s->out);
    s->shown = true;
}

void status_line(status_t *s, bool force, const char *fmt, ...) {
    if (!s || s->quiet) return;
    compat_mutex_lock(&s->mu);
    int64_t now = compat_now_ns();
    if (!s->finished && (force || (double)(now - s->last_ns) * 1e-9 >= s->period_s)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->text, sizeof s->text, fmt, ap);
        va_end(ap);
        for (char *p = s->text; *p; p++) /* one line */
            if (*p == '\n' || *p == '\r') *p = ' ';
        if (s->tty) draw(s);
        else fprintf(s->out, "%s\n", s->text);
        fflush(s->out);
        s->last_ns = now;
    }
    compat_mutex_unlock(&s->mu);
}

/* An event line on a terminal: wrapped at spaces to fit in cols - 1 columns
 * (a word longer than that is cut), the lines after the first indented;
 * UTF-8 sequences count as one column and are never split. */
static void put_wrapped(status_t *s, const char *line) {
    int cols = compat_term_width(s->out);
    if (cols <= 0) cols = 80;
    int room = cols - 1, indent = 0;
    if (room < 2 * STATUS_WRAP_INDENT + 8 || !line[0]) {
        fprintf(s->out, "%s\n", line);
        return;
    }
    const char *p = line;
    while (*p) {
        const char *q = p, *brk = NULL;
        for (int w = 0; *q && w < room - indent; w++) { /* q: past the columns that fit */
            if (*q == ' ') brk = q;
            q++;
            while (((unsigned char)*q & 0xC0) == 0x80) q++;
        }
        if (!*q || *q == ' ' || !brk || brk == p) brk = q; /* all of it, a break at the edge, or a cut */
        fprintf(s->out, "%*s%.*s\n", indent, "", (int)(brk - p), p);
        p = brk;
        while (*p == ' ') p++;
        indent = STATUS_WRAP_INDENT;
    }
}

void status_event(status_t *s, status_level_t level, const char *fmt, ...) {
    if (!s || (s->quiet && level < STATUS_WARN)) return;
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    compat_mutex_lock(&s->mu);
    bool was = s->shown;
    clear_line(s);
    if (s->tty) put_wrapped(s, line);
    else fprintf(s->out, "%s\n", line);
    if (was && !s->finished) draw(s);
    fflush(s->out);
    compat_mutex_unlock(&s->mu);
}
