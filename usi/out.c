/* out.c - whole-line output under one mutex (see out.h). */
#include "usi/out.h"

#include <stdarg.h>
#include <stdio.h>

void usi_out_init(usi_out_t *o, usi_write_fn_t write, void *user) {
    compat_mutex_init(&o->mu);
    o->write = write;
    o->user = user;
}

void usi_out_destroy(usi_out_t *o) { compat_mutex_destroy(&o->mu); }

void usi_out_line(usi_out_t *o, const char *fmt, ...) {
    char buf[USI_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    /* One line, whatever text was echoed into it: no control characters
     * (a '\r' or '\n' from an input line would forge a second line). */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f) buf[i] = '?';
    compat_mutex_lock(&o->mu);
    if (o->write) {
        o->write(o->user, buf, len);
    } else {
        fwrite(buf, 1, len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    compat_mutex_unlock(&o->mu);
}
