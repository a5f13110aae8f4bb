/* usi_test.h - shared helpers of the usi/ tests: a driver that runs the real
 * `koma` binary on pipes (compat_proc: POSIX and Windows) with a timeout on
 * every wait, keeping the transcript for failure messages. Checks and
 * t_done come from tests/koma_test.h.
 *
 * Every wait is bounded: proc_expect gives up after its timeout and returns
 * NULL (the test then fails and prints the transcript); a watchdog thread
 * ends a test program that hangs anyway. koma's stdin is closed when the
 * test ends (or dies), so an abandoned engine sees end of input and quits.
 */
#ifndef KOMA_TESTS_USI_TEST_H
#define KOMA_TESTS_USI_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"
#include "tests/koma_test.h"

#ifndef KOMA_BIN
#error "KOMA_BIN (path of the koma binary) must be defined by the build"
#endif

static inline long long now_ms(void) { return (long long)compat_now_ms(); }

/* How long a test waits for a line or an exit that must come: long enough for
 * any load (a shared CI machine), so only a hang reaches it. A test that checks
 * how soon something comes measures that itself, against a bound that the
 * wrong behaviour would miss by far (a search that goes on for minutes). */
enum { USI_WAIT_MS = 60000 };

enum { PROC_LINES_MAX = 4096, PROC_LOG_MAX = 8192, PROC_LINE_LEN = 1 << 16 };

typedef struct {
    compat_proc_t *cp; /* koma on pipes; NULL when it could not be started */
    char buf[PROC_LINE_LEN]; /* the line being read */
    bool eof;          /* koma closed its stdout */
    /* every line read, in order */
    char *lines[PROC_LINES_MAX];
    int n_lines;
    int mark;          /* proc_expect searches from here */
    /* the transcript: what was sent ("> ...") and read ("< ..."), in order */
    char *log[PROC_LOG_MAX];
    int n_log;
    bool exited;
    int status;        /* once exited: koma's exit code (nonzero when it crashed or was killed) */
} usi_proc_t;

static inline void proc_log(usi_proc_t *p, char dir, const char *text, size_t len) {
    if (p->n_log >= PROC_LOG_MAX) return;
    char *l = malloc(len + 3);
    if (!l) return;
    l[0] = dir;
    l[1] = ' ';
    memcpy(l + 2, text, len);
    l[len + 2] = 0;
    p->log[p->n_log++] = l;
}

static inline void proc_dump(const usi_proc_t *p, const char *why) {
    fprintf(stderr, "---- koma transcript (%s) ----\n", why);
    int from = p->n_log > 80 ? p->n_log - 80 : 0;
    if (from) fprintf(stderr, "  ... (%d earlier lines)\n", from);
    for (int i = from; i < p->n_log; i++) fprintf(stderr, "  %s\n", p->log[i]);
    if (!p->cp) fprintf(stderr, "  (koma was not started)\n");
    else if (p->exited) fprintf(stderr, "  (koma exited with status %d)\n", p->status);
    else if (p->eof) fprintf(stderr, "  (koma closed its output)\n");
    fprintf(stderr, "---- end ----\n");
}

/* Starts koma with extra arguments (NULL-terminated list, may be empty);
 * with_none: the first argument is "setoption name Net value none" (no net:
 * the uniform evaluator, asked for), so a test does not depend on whether
 * the shipped net is there. */
static inline bool proc_start_ex(usi_proc_t *p, const char *const *args, bool with_none) {
    memset(p, 0, sizeof *p);
    const char *argv[32];
    int n = 0;
    argv[n++] = KOMA_BIN;
    if (with_none) argv[n++] = "setoption name Net value none";
    for (int i = 0; args && args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char err[512];
    p->cp = compat_proc_spawn(argv, NULL, err, sizeof err);
    if (!p->cp) {
        fprintf(stderr, "proc_start: %s\n", err);
        p->eof = true;
        return false;
    }
    return true;
}

static inline void proc_send(usi_proc_t *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    char *buf = malloc((size_t)n + 1);
    if (!buf) return;
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    proc_log(p, '>', buf, (size_t)n);
    if (compat_proc_write_line(p->cp, buf) != 0) proc_log(p, '!', "(not delivered: koma no longer reads)", 37);
    free(buf);
}

/* koma with Net none (see proc_start_ex); tests of nets set Net themselves. */
static inline bool proc_start(usi_proc_t *p, const char *const *args) { return proc_start_ex(p, args, true); }
/* koma as a GUI starts it: no argument but args, Net at its default. */
static inline bool proc_start_bare(usi_proc_t *p, const char *const *args) { return proc_start_ex(p, args, false); }

/* Reads the lines that come within timeout_ms (then whatever else is already
 * there) into lines; false on end of output or a timeout without a line. */
static inline bool proc_pump(usi_proc_t *p, int timeout_ms) {
    if (p->eof || !p->cp) return false;
    bool got = false;
    for (int k = 0; k < 1000; k++) {
        int32_t n = compat_proc_read_line(p->cp, p->buf, sizeof p->buf, got || timeout_ms < 0 ? 0 : timeout_ms);
        if (n == COMPAT_PROC_EOF) p->eof = true;
        if (n < 0) break;
        if (p->n_lines < PROC_LINES_MAX) {
            char *l = malloc((size_t)n + 1);
            if (l) {
                memcpy(l, p->buf, (size_t)n + 1);
                p->lines[p->n_lines++] = l;
            }
        }
        proc_log(p, '<', p->buf, (size_t)n);
        got = true;
    }
    return got;
}

static inline bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The first line from the mark on that starts with prefix, waiting up to
 * timeout_ms; the mark moves past it. NULL (and the transcript on stderr)
 * on timeout or end of output. */
static inline const char *proc_expect(usi_proc_t *p, const char *prefix, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        for (int i = p->mark; i < p->n_lines; i++)
            if (starts_with(p->lines[i], prefix)) {
                p->mark = i + 1;
                return p->lines[i];
            }
        long long left = deadline - now_ms();
        if (left <= 0 || p->eof) break;
        proc_pump(p, (int)(left > 100 ? 100 : left));
    }
    char why[256];
    snprintf(why, sizeof why, "no line starting with '%s' within %d ms", prefix, timeout_ms);
    proc_dump(p, why);
    return NULL;
}

/* Is there a line starting with prefix between line indices [from, to)? */
static inline const char *proc_find(const usi_proc_t *p, int from, int to, const char *prefix) {
    if (to > p->n_lines) to = p->n_lines;
    for (int i = from; i < to; i++)
        if (starts_with(p->lines[i], prefix)) return p->lines[i];
    return NULL;
}

/* Lets the output settle for ms, reading what comes. */
static inline void proc_drain(usi_proc_t *p, int ms) {
    long long deadline = now_ms() + ms;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0 || p->eof) break;
        proc_pump(p, (int)(left > 20 ? 20 : left));
    }
}

/* Waits up to timeout_ms for koma to exit (reading its output meanwhile, so
 * that it never blocks on a full pipe); true when it did. */
static inline bool proc_wait_exit(usi_proc_t *p, int timeout_ms) {
    if (p->exited) return true;
    if (!p->cp) return false;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        proc_pump(p, 0);
        if (compat_proc_wait(p->cp, 0, &p->status) == 0) {
            p->exited = true;
            /* the last lines it wrote, for the transcript */
            long long until = now_ms() + 500;
            while (!p->eof && now_ms() < until) proc_pump(p, 20);
            return true;
        }
        long long left = deadline - now_ms();
        if (left <= 0) return false;
        if (left > 10) left = 10;
        if (p->eof) compat_proc_wait(p->cp, left, NULL); /* nothing more to read: just wait */
        else proc_pump(p, (int)left);
    }
}

/* Closes koma's stdin: it reads end of input. */
static inline void proc_close_input(usi_proc_t *p) {
    compat_proc_close_input(p->cp);
    proc_log(p, '>', "(end of input)", 14);
}

/* Ends the session: closes stdin, waits, kills a koma that does not exit,
 * frees the transcript. */
static inline void proc_end(usi_proc_t *p) {
    if (p->cp) {
        compat_proc_close_input(p->cp);
        if (!p->exited && !proc_wait_exit(p, 5000)) compat_proc_kill(p->cp);
        compat_proc_free(p->cp); /* reaps it */
        p->cp = NULL;
    }
    for (int i = 0; i < p->n_lines; i++) free(p->lines[i]);
    for (int i = 0; i < p->n_log; i++) free(p->log[i]);
    p->n_lines = p->n_log = p->mark = 0;
}

/* The usual opening: usi ... usiok, isready ... readyok. */
static inline bool proc_handshake(usi_proc_t *p) {
    proc_send(p, "usi");
    if (!proc_expect(p, "usiok", USI_WAIT_MS)) return false;
    proc_send(p, "isready");
    return proc_expect(p, "readyok", USI_WAIT_MS) != NULL;
}

/* ---- positions --------------------------------------------------------- */

/* pos <- "startpos"/SFEN then the USI moves (space-separated); false if any fails. */
static inline bool play_moves(pos_t *pos, const char *sfen, const char *moves) {
    char err[256];
    if (strcmp(sfen, "startpos") == 0) pos_set_startpos(pos);
    else if (sfen_parse_cstr(pos, sfen, err, sizeof err) != SFEN_OK) return false;
    const char *p = moves ? moves : "";
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        move_t m = move_from_usi(pos, p, (size_t)(e - p));
        if (m == MOVE_NONE) return false;
        pos_do_move(pos, m);
        p = e;
    }
    return true;
}

/* The move of a "bestmove X [ponder Y]" line, legal in pos? (MOVE_NONE if not) */
static inline move_t bestmove_of(const pos_t *pos, const char *line, char *text, size_t n) {
    text[0] = 0;
    if (!line || !starts_with(line, "bestmove ")) return MOVE_NONE;
    const char *m = line + 9, *e = m;
    while (*e && *e != ' ') e++;
    snprintf(text, n, "%.*s", (int)(e - m), m);
    return move_from_usi(pos, m, (size_t)(e - m));
}

/* Ends the test program (exit 1, with a message) when it still runs after
 * seconds: a hang fails the test instead of waiting for ctest's timeout. */
static void *watchdog_main(void *arg) {
    int seconds = (int)(intptr_t)arg;
    compat_sleep_ms((int64_t)seconds * 1000);
    fflush(stdout);
    fprintf(stderr, "watchdog: still running after %d s: giving up\n", seconds);
    fflush(stderr);
    _Exit(1);
}
static inline void watchdog(int seconds) {
    compat_thread_t t;
    if (compat_thread_create(&t, watchdog_main, (void *)(intptr_t)seconds) != 0)
        fprintf(stderr, "watchdog: cannot start a thread\n");
}

#endif
