/* err.h - the one error-message helper of Koma: every module that reports a
 * failure as "a status and a message that names the file or the input"
 * writes the message with set_err (printf-style into the caller's err
 * buffer of errlen bytes; NULL or 0 bytes: nothing is written).
 * Owns: the writing of a message into the caller's buffer.
 * Does not own: what it says (each module names its file or input and what
 * to do), nor showing it (the program that holds the run does). */
#ifndef KOMA_COMPAT_ERR_H
#define KOMA_COMPAT_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static inline void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#endif
