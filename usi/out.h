/* out.h - the engine's only way to talk: whole lines to the GUI.
 *
 * Owns: one mutex around the output, so that the reader thread (usiok,
 * readyok, info string) and the search thread (info, bestmove, checkmate)
 * never interleave inside a line; a flush after every line.
 * Does not own: what the lines say (usi.c, session.c, search.c).
 */
#ifndef KOMA_USI_OUT_H
#define KOMA_USI_OUT_H

#include <stddef.h>

#include "compat/compat.h"

/* Receives one complete line without its newline. */
typedef void (*usi_write_fn_t)(void *user, const char *line, size_t len);

typedef struct {
    compat_mutex_t mu;
    usi_write_fn_t write; /* NULL: stdout (fputs, '\n', fflush) */
    void *user;
} usi_out_t;

void usi_out_init(usi_out_t *o, usi_write_fn_t write, void *user);
void usi_out_destroy(usi_out_t *o);
/* Formats one line (at most USI_LINE_MAX - 1 characters; longer text is cut)
 * and writes it whole. Control characters (tab, CR, LF, ...) in the text
 * become '?', so an echoed input can never make two lines of one. */
enum { USI_LINE_MAX = 4096 };
void usi_out_line(usi_out_t *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
