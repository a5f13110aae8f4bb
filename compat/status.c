/* status.c - a status line in place on a terminal, plain lines elsewhere; see status.h. */
#include "compat/status.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

#define STATUS_TEXT_MAX 1024

struct status {
    FILE *out;
    bool tty, quiet;
    double period_s;
    int64_t last_ns;             /* when the last status line went out */
    bool shown;                  /* a status line is on the terminal's last line */
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

bool status_is_tty(const status_t *s) { return s && s->tty; }
double status_period(const status_t *s) { return s ? s->period_s : 0; }

bool status_due(status_t *s) {
    if (!s || s->quiet) return false;
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
    if (force || (double)(now - s->last_ns) * 1e-9 >= s->period_s) {
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
    fprintf(s->out, "%s\n", line);
    if (was) draw(s);
    fflush(s->out);
    compat_mutex_unlock(&s->mu);
}
