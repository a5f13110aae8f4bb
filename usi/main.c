/* main.c - `koma`, the USI engine: reads commands from stdin (and first from
 * its arguments) and hands each line to the protocol loop.
 *
 *   koma                                  a GUI talks to it over stdin/stdout
 *   koma "setoption name Net value runs/default" isready "go nodes 800" quit
 *                                         runs the arguments as lines first,
 *                                         each `go` to its answer (not infinite
 *                                         or ponder), then reads stdin unless
 *                                         an argument was quit
 * End of input counts as quit (after a running finite search has answered).
 * Lines longer than 1 MiB are refused.
 */
#include "compat/version.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/backend.h"
#include "usi/session.h"
#include "usi/usi.h"

enum { LINE_MAX_BYTES = 1 << 20 };

int main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "koma")) return 0;
    nn_cpu_blas_reexec_if_generic(argv);
    usi_session_t *s = usi_session_new(NULL, NULL);
    if (!s) {
        fprintf(stderr, "koma: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        int rc = usi_handle_line(s, argv[i], strlen(argv[i]), compat_now_ms());
        usi_session_wait(s);
        if (rc == USI_QUIT) {
            usi_session_free(s);
            return 0;
        }
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    bool too_long = false;
    while (buf) {
        int ch = getc(stdin);
        if (ch == EOF) { /* a last line without newline; a finite search may still answer */
            if (len > 0 && !too_long && usi_handle_line(s, buf, len, compat_now_ms()) == USI_QUIT) break;
            usi_session_wait(s);
            break;
        }
        if (ch == '\n') {
            int rc = USI_CONTINUE;
            if (too_long) usi_session_say(s, "line longer than %d bytes ignored", LINE_MAX_BYTES);
            else rc = usi_handle_line(s, buf, len, compat_now_ms());
            too_long = false;
            len = 0;
            if (rc == USI_QUIT) break;
            continue;
        }
        if (too_long) continue;
        if (len + 1 >= cap) {
            char *nb = cap < LINE_MAX_BYTES ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                too_long = true;
                len = 0;
                continue;
            }
            buf = nb;
            cap *= 2;
        }
        buf[len++] = (char)ch;
    }
    free(buf);
    usi_session_free(s);
    return 0;
}
