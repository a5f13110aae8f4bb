/* strbuf.h - a growing text buffer for the tools that build whole files in
 * memory (report's HTML, usi-match's CSA records). Header only.
 *
 * sb_t b = {0}; sb_printf(&b, ...); ... use b.s (NUL-terminated, b.n bytes)
 * unless b.oom; free(b.s). After a failed allocation b.oom stays set and
 * further output is dropped; the text so far is kept.
 * Owns: the buffer's memory and its growth. Does not own: writing it to a
 * file (each tool, through data/run.h's output checks). */
#ifndef KOMA_TOOLS_STRBUF_H
#define KOMA_TOOLS_STRBUF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sb_t;

static void sb_printf(sb_t *b, const char *fmt, ...) PRINTF_LIKE(2, 3);
static void sb_printf(sb_t *b, const char *fmt, ...) {
    va_list ap;
    if (b->oom) return;
    for (;;) {
        size_t room = b->cap - b->n;
        va_start(ap, fmt);
        int k = b->s ? vsnprintf(b->s + b->n, room, fmt, ap) : -1;
        va_end(ap);
        if (k >= 0 && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (k >= 0 && cap - b->n <= (size_t)k) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = cap;
    }
}

#endif
