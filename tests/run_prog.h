/* run_prog.h - for tests that run Koma's programs and read what they print:
 * run(PROG, args..., NULL) with stdout to the file g_out and stderr to g_err
 * (the test sets both to scratch paths first), and has(FILE, TEXT). */
#ifndef KOMA_TESTS_RUN_PROG_H
#define KOMA_TESTS_RUN_PROG_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "tests/koma_test.h"

static char g_out[900], g_err[900];

/* Runs the program with the arguments (NULL-terminated), stdout and stderr
 * to g_out / g_err; returns its exit status (-1: it did not start). */
static inline int run(const char *prog, ...) {
    const char *argv[40];
    int n = 0;
    argv[n++] = prog;
    va_list ap;
    va_start(ap, prog);
    for (const char *a = va_arg(ap, const char *); a && n < 39; a = va_arg(ap, const char *)) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    fprintf(stderr, "+");
    for (int i = 0; i < n; i++) fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
    int status = -1;
    char err[512];
    if (compat_run_io(argv, g_out, g_err, &status, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return status;
}

/* The file holds what; said on stderr with the file when it does not. */
static inline int has(const char *file, const char *what) {
    char *t = t_read_file(file, NULL);
    int r = t && strstr(t, what) != NULL;
    if (!r) fprintf(stderr, "'%s' not in %s:\n%s\n", what, file, t ? t : "(unreadable)");
    free(t);
    return r;
}

#endif
