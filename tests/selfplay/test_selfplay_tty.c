/* test_selfplay_tty.c - what a person sees: `selfplay` (and `train
 * --from-games`) on a pseudo-terminal keep one status line updated in place
 * ("\r", never wider than the terminal, ESC[K) with event lines (a cycle's
 * summary, a published net) printed whole above it; through a pipe the same
 * programs print plain status lines, one per period, and no control
 * characters; --quiet prints neither status nor ordinary events; the run's
 * log keeps every event and the status line at most once a minute.
 * On the terminal, an event line longer than the terminal is wrapped at
 * spaces (the log keeps it whole), the summary at the end of a run comes
 * below the last status line with no status line drawn again under it, and
 * the message at the end of a stopped run (--cpu-minutes, as Ctrl-C) starts
 * on a line of its own. An error is shown once.
 * Exits 77 where the OS gives no pseudo-terminal (the pipe checks then run
 * alone). */
#include "sp_test.h"

#ifndef KOMA_SELFPLAY_BIN
#define KOMA_SELFPLAY_BIN "selfplay"
#endif
#ifndef KOMA_TRAIN_BIN
#define KOMA_TRAIN_BIN "train"
#endif

#define COLS 72

#define SP_ARGS(dir, cycles, progress)                                                                         \
    KOMA_SELFPLAY_BIN, "--run", dir, "--cycles", cycles, "--games-per-cycle", "4", "--shard-games", "1",       \
        "--threads", "1", "--games-per-thread", "4", "--leaves-per-game", "2", "--visits", "16", "--visits-fast", \
        "8", "--gumbel-m", "8", "--max-ply", "60", "--net", "2x16", "--progress", progress,                     \
        "--min-steps-per-cycle", "2", "--max-steps-per-cycle", "4", "--batch", "16", "--window-min", "200",     \
        "--cpu-threads", "1", "--train-threads", "1", "--cache-mb", "1", "--eval-every", "0"

static int count(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

/* Every stretch between \r and \n that is a status line ("| games" in it):
 * its visible width, ESC[K left out. Returns the widest. */
static int widest_status(const char *out, int *n_status) {
    int widest = 0;
    *n_status = 0;
    const char *p = out;
    while (*p) {
        size_t len = strcspn(p, "\r\n");
        if (len > 0) {
            char seg[2048];
            size_t k = len < sizeof seg - 1 ? len : sizeof seg - 1;
            memcpy(seg, p, k);
            seg[k] = 0;
            if (strstr(seg, "| games")) {
                (*n_status)++;
                int w = 0;
                for (size_t i = 0; i < k; i++) {
                    if (seg[i] == 0x1b && i + 2 < k && seg[i + 1] == '[' && seg[i + 2] == 'K') {
                        i += 2;
                        continue;
                    }
                    if (((unsigned char)seg[i] & 0xC0) != 0x80) w++;
                }
                if (w > widest) widest = w;
            }
        }
        p += len;
        if (*p) p++;
    }
    return widest;
}

/* Does s[0..n) contain w? (memmem is GNU's, not Windows') */
static int span_has(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, w, k) == 0) return 1;
    return 0;
}

/* Lines ending in \n whose last \r-stretch is a status line (status lines left behind as lines). */
static int status_lines_kept(const char *out) {
    int n = 0;
    const char *p = out;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *last = p;
        for (size_t i = 0; i < len; i++)
            if (p[i] == '\r') last = p + i + 1;
        if (nl && span_has(last, (size_t)(p + len - last), "| games")) n++;
        p += len + (nl ? 1 : 0);
    }
    return n;
}

/* The widest stretch between line ends or carriage returns (what the
 * terminal would have to wrap), ESC[K left out; *at: where it starts. */
static int widest_stretch(const char *out, const char **at) {
    int widest = 0;
    for (const char *p = out; *p;) {
        size_t len = strcspn(p, "\r\n");
        int w = 0;
        for (size_t i = 0; i < len; i++) {
            if (p[i] == 0x1b && i + 2 < len && p[i + 1] == '[' && p[i + 2] == 'K') {
                i += 2;
                continue;
            }
            if (((unsigned char)p[i] & 0xC0) != 0x80) w++;
        }
        if (w > widest) widest = w, *at = p;
        p += len;
        if (*p) p++;
    }
    return widest;
}

/* The first \r not part of a \r\n line end (Windows' text-mode files end
 * lines so), or NULL. */
static const char *bare_cr(const char *s) {
    for (const char *p = strchr(s, '\r'); p; p = strchr(p + 1, '\r'))
        if (p[1] != '\n') return p;
    return NULL;
}

static void test_pipe(const char *base) {
    char dir[700], out[760];
    snprintf(dir, sizeof dir, "%s/pipe", base);
    snprintf(out, sizeof out, "%s/pipe.txt", base);
    const char *argv[] = {SP_ARGS(dir, "2", "0.05"), NULL};
    int status = -1;
    char err[512];
    int64_t t0 = compat_now_ms();
    CHECK(compat_run_io(argv, out, out, &status, err, sizeof err) == 0 && status == 0);
    int64_t minutes = (compat_now_ms() - t0) / 60000; /* more than 0 on a loaded machine */
    char *text = t_read_file(out, NULL);
    int n = 0;
    widest_status(text, &n);
    const char *cr = bare_cr(text);
    CHECKF(n >= 2 && !cr && !strchr(text, 0x1b) && count(text, "/2 published") == 2,
           "through a pipe: %d status lines, \\r %s, ESC %s:\n%s", n, cr ? "yes" : "no",
           strchr(text, 0x1b) ? "yes" : "no", text);
    free(text);
    /* the log: every event, the status at most once a minute (the first, one a
     * minute after it, the final one) */
    char log[760];
    snprintf(log, sizeof log, "%s/log", dir);
    text = t_read_file(log, NULL);
    CHECKF(count(text, "/2 published") == 2 && count(text, "| games") <= 2 + minutes,
           "the log: %d published, %d status in %lld minute(s):\n%s", count(text, "/2 published"),
           count(text, "| games"), (long long)minutes, text);
    /* a new run's trainer starts from its new net (it resumes nothing), and the last status line, with
     * self-play done, counts the run's games (not "games 0/4 (total 8 ...)") */
    CHECKF(strstr(text, "train: starting ") && strstr(text, "(cycle 0, no training steps yet)") &&
               !strstr(text, "(cycle 0, step 0)"),
           "the log of a new run does not say the trainer starts from the new net:\n%s", text);
    const char *last = NULL;
    for (const char *p = strstr(text, "| games"); p; p = strstr(p + 1, "| games")) last = p;
    CHECKF(last && !strncmp(last, "| games 8 in all |", 18), "the last status line: %.60s", last ? last : "(none)");
    free(text);

    /* --quiet: no status, no ordinary events */
    snprintf(dir, sizeof dir, "%s/quiet", base);
    const char *quiet[] = {SP_ARGS(dir, "1", "0.3"), "--quiet", NULL};
    CHECK(compat_run_io(quiet, out, out, &status, err, sizeof err) == 0 && status == 0);
    text = t_read_file(out, NULL);
    CHECKF(!strstr(text, "| games") && !strstr(text, "published"), "--quiet printed:\n%s", text);
    free(text);
    text = t_read_file(log, NULL);
    CHECKF(strstr(text, "published") != NULL, "--quiet kept the events out of the log too");
    free(text);

    /* an error is shown once ("error: ...", not again as "selfplay: ...") */
    char file[760];
    snprintf(file, sizeof file, "%s/not-a-dir", base);
    FILE *f = fopen(file, "w");
    if (f) fclose(f);
    const char *bad[] = {KOMA_SELFPLAY_BIN, "--run", file, "--cycles", "1", "--progress", "0", NULL};
    CHECK(compat_run_io(bad, out, out, &status, err, sizeof err) == 0 && status == 1);
    text = t_read_file(out, NULL);
    CHECKF(count(text, "not a directory") == 1, "the error is shown %d times:\n%s", count(text, "not a directory"),
           text);
    free(text);
}

/* 1 when the pty test ran. */
static int test_pty(const char *base) {
    char dir[700], out[760], err[512];
    snprintf(dir, sizeof dir, "%s/tty", base);
    snprintf(out, sizeof out, "%s/tty.txt", base);
    const char *argv[] = {SP_ARGS(dir, "2", "0.05"), NULL};
    int status = -1;
    if (compat_run_pty(argv, COLS, out, &status, err, sizeof err) != 0) {
        printf("  no pseudo-terminal: %s\n", err);
        return 0;
    }
    char *text = t_read_file(out, NULL);
    CHECKF(status == 0, "selfplay on a terminal exited %d:\n%s", status, text);
    int n = 0, widest = widest_status(text, &n);
    CHECKF(n >= 3, "only %d status line(s) drawn", n);
    CHECKF(widest <= COLS - 1 && widest > 20, "a status line %d columns wide on a %d-column terminal", widest, COLS);
    CHECKF(count(text, "\x1b[K") >= n, "status lines without clear-to-end");
    CHECKF(status_lines_kept(text) <= 1, "%d status lines left on the screen as lines (in place: at most the last)",
           status_lines_kept(text));
    /* events: whole lines, starting after the cleared status line or a line end */
    CHECKF(count(text, "model 1/2 published") == 1 && count(text, "model 2/2 published") == 1, "event lines:\n%s",
           text);
    const char *ev = strstr(text, "model 1/2 published");
    CHECKF(ev && ev > text && (ev[-1] == '\n' || ev[-1] == 'K'), "an event line drawn over a status line");
    /* nothing wider than the terminal: long events wrapped at spaces */
    const char *at = text;
    int wide = widest_stretch(text, &at);
    CHECKF(wide <= COLS - 1, "a line %d columns wide on a %d-column terminal: %.*s", wide, COLS, wide + 8, at);
    CHECKF(strstr(text, "\n    "), "no wrapped event line (indented continuation) on the terminal:\n%s", text);
    /* the summary last, below the final status line: no status line drawn again under it */
    const char *sum = strstr(text, "model cycle 2 published, ");
    CHECKF(sum && !strstr(sum, "| games"), "a status line drawn again below the summary:\n%s",
           sum ? sum - (sum - text > 400 ? 400 : sum - text) : text);
    free(text);
    /* the log keeps the long events whole */
    char log[760];
    snprintf(log, sizeof log, "%s/log", dir);
    text = t_read_file(log, NULL);
    const char *done = strstr(text, "cycle 1 self-play done: ");
    CHECKF(done && strcspn(done, "\n") > COLS, "the log does not keep the cycle summary whole");
    free(text);

    /* a stopped run's last message on a line of its own (--cpu-minutes stops as Ctrl-C does) */
    const char *stop[] = {SP_ARGS(dir, "1000", "0.05"), "--cpu-minutes", "0.05", NULL};
    CHECK(compat_run_pty(stop, COLS, out, &status, err, sizeof err) == 0);
    text = t_read_file(out, NULL);
    const char *kept = strstr(text, "everything committed is kept");
    const char *bol = kept;
    while (bol && bol > text && bol[-1] != '\n' && bol[-1] != '\r') bol--;
    CHECKF(status == 0 && kept && strncmp(bol, "CPU budget of ", 14) == 0 && bol > text && bol[-1] == '\n',
           "the last message is not on a line of its own (exit %d):\n%s", status,
           kept ? kept - (kept - text > 400 ? 400 : kept - text) : text);
    free(text);

    /* train --from-games on the same run: its step line in place too */
    const char *tr[] = {KOMA_TRAIN_BIN, "--from-games", "--run", dir, "--steps", "200", "--batch", "8", "--net",
                        "2x16", "--progress", "0.05", "--out", NULL, NULL};
    char net[760];
    snprintf(net, sizeof net, "%s/offline.safetensors", base);
    tr[13] = net;
    CHECK(compat_run_pty(tr, COLS, out, &status, err, sizeof err) == 0);
    text = t_read_file(out, NULL);
    CHECKF(status == 0 && count(text, "\rstep ") >= 2 && count(text, "\x1b[K") >= 2 && strstr(text, "\ndone: step 200"),
           "train on a terminal (exit %d):\n%s", status, text);
    free(text);
    return 1;
}

int main(void) {
    const char *base = t_scratch("sp_tty");
    char b[512];
    snprintf(b, sizeof b, "%.400s", base);
    test_pipe(b);
    int ran = test_pty(b);
    if (!atomic_load(&g_fail)) t_rm_rf(b);
    int rc = t_done("test_selfplay_tty");
    return rc == 0 && !ran ? 77 : rc;
}
