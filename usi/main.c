/* main.c - `koma`, the USI engine: reads commands from stdin (and first from
 * its arguments) and hands each line to the protocol loop.
 *
 *   koma                                  a GUI talks to it over stdin/stdout
 *   koma "setoption name Net value runs/default" isready "go nodes 800" quit
 *                                         runs the arguments as lines first,
 *                                         each `go` to its answer (not infinite
 *                                         or ponder), then reads stdin unless
 *                                         an argument was quit
 *   koma --help | --version               prints and exits
 * End of input counts as quit (after a running finite search has answered,
 * and after a search told to stop has given its bestmove). Lines longer than
 * 1 MiB are refused. Exit status: 0, or 1 when the Net or Backend asked for
 * cannot be used (isready / go said `info string Error: ...`).
 */
#include "compat/version.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "nn/backend.h"
#include "usi/options.h"
#include "usi/session.h"
#include "usi/usi.h"

enum { LINE_MAX_BYTES = 1 << 20 };

static void print_help(void) {
    usi_options_t o;
    usi_options_default(&o);
    char shipped[USI_PATH_MAX] = "", looked[2 * USI_PATH_MAX + 64] = "";
    if (usi_net_shipped(shipped, sizeof shipped, looked, sizeof looked) == 0)
        snprintf(o.net, sizeof o.net, "%s", shipped);
    printf("koma: the shogi engine of Koma (MCTS and a neural network) for GUIs and matches.\n"
           "\n"
           "usage: koma [LINE ...]      speaks USI on stdin/stdout\n"
           "       koma --help | --version\n"
           "\n"
           "Each LINE argument is a USI command run before stdin is read, every `go` to\n"
           "its answer (not infinite or ponder); an argument `quit` ends koma there:\n"
           "  koma \"setoption name Net value runs/default\" isready \"go nodes 800\" quit\n"
           "\n"
           "USI options (setoption name NAME value VALUE; names in any case):\n");
    usi_options_help(&o, stdout);
    printf("\n"
           "With Net empty koma plays the net that ships with Koma, the first of:\n");
    for (const char *p = looked; *p;) { /* "A and B" -> one place a line */
        const char *e = strstr(p, " and ");
        int n = e ? (int)(e - p) : (int)strlen(p);
        printf("  %.*s\n", n, p);
        p += n + (e ? 5 : 0);
    }
    printf("%s"
           "A Net or Backend that cannot be used makes isready (or go) answer\n"
           "`info string Error: ...` (the same on stderr) instead of readyok, and koma\n"
           "exits with status 1.\n",
           shipped[0] ? "" : "(none of them exists here: set Net.)\n");
}

int main(int argc, char **argv) {
    if (koma_version_asked(argc, argv, "koma")) return 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        }
    nn_cpu_blas_reexec_if_generic(argv);
    usi_session_t *s = usi_session_new(NULL, NULL);
    if (!s) {
        fprintf(stderr, "koma: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        int rc = usi_handle_line(s, argv[i], strlen(argv[i]), compat_now_ms());
        usi_session_wait(s);
        if (rc != USI_CONTINUE) {
            usi_session_free(s);
            return rc == USI_FATAL ? 1 : 0;
        }
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    bool too_long = false;
    int rc = USI_CONTINUE;
    while (buf) {
        int ch = getc(stdin);
        if (ch == EOF) { /* a last line without newline; a finite search may still answer */
            if (len > 0 && !too_long) rc = usi_handle_line(s, buf, len, compat_now_ms());
            if (rc != USI_CONTINUE) break;
            usi_session_wait(s);
            usi_session_quit(s); /* a search told to stop answers first */
            break;
        }
        if (ch == '\n') {
            if (too_long) usi_session_say(s, "line longer than %d bytes ignored", LINE_MAX_BYTES);
            else rc = usi_handle_line(s, buf, len, compat_now_ms());
            too_long = false;
            len = 0;
            if (rc != USI_CONTINUE) break;
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
    return rc == USI_FATAL ? 1 : 0;
}
