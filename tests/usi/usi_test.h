/* usi_test.h - shared helpers of the usi/ tests: CHECK, and a driver that
 * runs the real `koma` binary on pipes (fork/exec, POSIX) with a timeout on
 * every wait, keeping the transcript for failure messages.
 *
 * Every wait is bounded: proc_expect gives up after its timeout and returns
 * NULL (the test then fails and prints the transcript); a watchdog alarm
 * ends a test program that hangs anyway. koma's stdin is closed on exit, so
 * an abandoned engine sees end of input and quits.
 */
#ifndef KOMA_TESTS_USI_TEST_H
#define KOMA_TESTS_USI_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "engine/sfen.h"

#ifndef KOMA_BIN
#error "KOMA_BIN (path of the koma binary) must be defined by the build"
#endif

static int failures = 0;
#define CHECK(cond, ...)                                                                \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            failures++;                                                                 \
            if (failures < 40) {                                                        \
                fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
                fprintf(stderr, __VA_ARGS__);                                           \
                fprintf(stderr, "\n");                                                  \
            }                                                                           \
        }                                                                               \
    } while (0)

static inline int test_finish(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d failure(s)\n", name, failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

static inline long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum { PROC_LINES_MAX = 4096, PROC_LINE_LEN = 4096 };

typedef struct {
    pid_t pid;
    int to_child;   /* koma's stdin */
    int from_child; /* koma's stdout */
    char pending[1 << 16];
    size_t pending_len;
    bool eof;
    /* every line read, in order (the transcript) */
    char *lines[PROC_LINES_MAX];
    int n_lines;
    int mark;       /* proc_expect searches from here */
    bool exited;
    int status;
} Proc;

static inline void proc_dump(const Proc *p, const char *why) {
    fprintf(stderr, "---- koma transcript (%s) ----\n", why);
    int from = p->n_lines > 60 ? p->n_lines - 60 : 0;
    for (int i = from; i < p->n_lines; i++) fprintf(stderr, "  < %s\n", p->lines[i]);
    fprintf(stderr, "---- end ----\n");
}

/* Starts koma with extra arguments (NULL-terminated list, may be empty). */
static inline bool proc_start(Proc *p, const char *const *args) {
    memset(p, 0, sizeof *p);
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return false;
    signal(SIGPIPE, SIG_IGN);
    p->pid = fork();
    if (p->pid < 0) return false;
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        const char *argv[32];
        int n = 0;
        argv[n++] = KOMA_BIN;
        for (int i = 0; args && args[i] && n < 31; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(KOMA_BIN, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->to_child = in[1];
    p->from_child = out[0];
    fcntl(p->from_child, F_SETFL, fcntl(p->from_child, F_GETFL) | O_NONBLOCK);
    return true;
}

static inline void proc_send(Proc *p, const char *fmt, ...) {
    char buf[1 << 16];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(p->to_child, buf + off, (size_t)n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
}

/* Reads whatever is available within timeout_ms into lines; false on EOF or timeout without data. */
static inline bool proc_pump(Proc *p, int timeout_ms) {
    if (p->eof) return false;
    struct pollfd pfd = {p->from_child, POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms < 0 ? 0 : timeout_ms);
    if (r <= 0) return false;
    ssize_t k = read(p->from_child, p->pending + p->pending_len, sizeof p->pending - p->pending_len - 1);
    if (k == 0) {
        p->eof = true;
        return false;
    }
    if (k < 0) return errno == EAGAIN || errno == EINTR;
    p->pending_len += (size_t)k;
    size_t start = 0;
    for (size_t i = 0; i < p->pending_len; i++) {
        if (p->pending[i] != '\n') continue;
        size_t len = i - start;
        if (p->n_lines < PROC_LINES_MAX) {
            char *l = malloc(len + 1);
            memcpy(l, p->pending + start, len);
            l[len] = 0;
            p->lines[p->n_lines++] = l;
        }
        start = i + 1;
    }
    memmove(p->pending, p->pending + start, p->pending_len - start);
    p->pending_len -= start;
    if (p->pending_len >= sizeof p->pending - 1) p->pending_len = 0; /* a monstrous line: drop */
    return true;
}

static inline bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The first line from the mark on that starts with prefix, waiting up to
 * timeout_ms; the mark moves past it. NULL (and the transcript on stderr)
 * on timeout or end of output. */
static inline const char *proc_expect(Proc *p, const char *prefix, int timeout_ms) {
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
static inline const char *proc_find(const Proc *p, int from, int to, const char *prefix) {
    if (to > p->n_lines) to = p->n_lines;
    for (int i = from; i < to; i++)
        if (starts_with(p->lines[i], prefix)) return p->lines[i];
    return NULL;
}

/* Lets the output settle for ms, reading what comes. */
static inline void proc_drain(Proc *p, int ms) {
    long long deadline = now_ms() + ms;
    while (now_ms() < deadline && !p->eof) proc_pump(p, 20);
}

/* Waits up to timeout_ms for koma to exit; true when it did. */
static inline bool proc_wait_exit(Proc *p, int timeout_ms) {
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        proc_pump(p, 0);
        pid_t r = waitpid(p->pid, &p->status, WNOHANG);
        if (r == p->pid) {
            p->exited = true;
            return true;
        }
        if (now_ms() >= deadline) return false;
        usleep(5000);
    }
}

/* Ends the session: closes stdin, waits, kills a koma that does not exit, frees the transcript. */
static inline void proc_end(Proc *p) {
    if (p->to_child >= 0) close(p->to_child);
    p->to_child = -1;
    if (!p->exited && !proc_wait_exit(p, 5000)) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
    }
    close(p->from_child);
    for (int i = 0; i < p->n_lines; i++) free(p->lines[i]);
    p->n_lines = 0;
}

/* The usual opening: usi ... usiok, isready ... readyok. */
static inline bool proc_handshake(Proc *p) {
    proc_send(p, "usi");
    if (!proc_expect(p, "usiok", 5000)) return false;
    proc_send(p, "isready");
    return proc_expect(p, "readyok", 30000) != NULL;
}

/* ---- positions --------------------------------------------------------- */

/* pos <- "startpos"/SFEN then the USI moves (space-separated); false if any fails. */
static inline bool play_moves(Position *pos, const char *sfen, const char *moves) {
    char err[256];
    if (strcmp(sfen, "startpos") == 0) pos_set_startpos(pos);
    else if (sfen_parse_cstr(pos, sfen, err, sizeof err) != SFEN_OK) return false;
    const char *p = moves ? moves : "";
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        Move m = move_from_usi(pos, p, (size_t)(e - p));
        if (m == MOVE_NONE) return false;
        pos_do_move(pos, m);
        p = e;
    }
    return true;
}

/* The move of a "bestmove X [ponder Y]" line, legal in pos? (MOVE_NONE if not) */
static inline Move bestmove_of(const Position *pos, const char *line, char *text, size_t n) {
    text[0] = 0;
    if (!line || !starts_with(line, "bestmove ")) return MOVE_NONE;
    const char *m = line + 9, *e = m;
    while (*e && *e != ' ') e++;
    snprintf(text, n, "%.*s", (int)(e - m), m);
    return move_from_usi(pos, m, (size_t)(e - m));
}

static inline void watchdog(int seconds) { alarm((unsigned)seconds); }

#endif
