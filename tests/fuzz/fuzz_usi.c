/* fuzz_usi.c - usi/usi.h: the USI command front end (tokenizer, `position`,
 * `setoption`, `gameover`, unknown commands) and the `go` argument parser.
 *
 * Input: protocol text, one command a line (at most 64 lines). Each input
 * gets a fresh session, so a finding replays from its file alone. Every
 * line goes through usi_parse_go (the whole `go` grammar, without starting a
 * search); lines whose command starts a search or loads a net (`go`,
 * `isready`, `usinewgame`, `ponderhit`) are not dispatched - they would cost
 * seconds per input and test the search, not the parser. Everything else
 * goes through usi_handle_line.
 * Properties:
 *   - usi_parse_go returns 0 or -1 with a message; numbers it accepts are in
 *     0..USI_NUMBER_MAX (or -1: not given);
 *   - every line the engine writes is one line: no '\n', '\r' or NUL inside,
 *     shorter than USI_LINE_MAX (an echoed input byte must not let a GUI
 *     see a second, forged line);
 *   - after any `position` the session's position is consistent;
 *   - `quit` returns USI_QUIT, nothing else does.
 */
#include <string.h>

#include "compat/compat.h"
#include "engine/position.h"
#include "fuzz.h"
#include "usi/usi.h"

static void check_output(void *user, const char *line, size_t len) {
    (void)user;
    FUZZ_CHECK(len < USI_LINE_MAX, "output line of %zu bytes", len);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(line[i] != '\n' && line[i] != '\r' && line[i] != 0,
                   "output line has byte 0x%02x at %zu: '%.*s'", (unsigned char)line[i], i, (int)len, line);
}

/* usi.c's token separators. */
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

static int word_is(const char *p, size_t n, const char *w) { return n == strlen(w) && memcmp(p, w, n) == 0; }

static void check_go(const char *text, size_t len) {
    usi_go_t g;
    char err[256], warn[256];
    memset(err, 0, sizeof err);
    int rc = usi_parse_go(text, len, &g, err, sizeof err, warn, sizeof warn);
    FUZZ_CHECK(rc == 0 || rc == -1, "usi_parse_go returned %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(err[0] != 0 && memchr(err, 0, sizeof err), "refused without a message");
        return;
    }
    FUZZ_CHECK(memchr(warn, 0, sizeof warn) != NULL, "warning not terminated");
    const int64_t v[] = {g.time[0], g.time[1], g.inc[0], g.inc[1], g.byoyomi, g.movetime, g.nodes};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        FUZZ_CHECK(v[i] == -1 || (v[i] >= 0 && v[i] <= USI_NUMBER_MAX), "number %zu out of range: %lld", i,
                   (long long)v[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    usi_session_t *s = usi_session_new(check_output, NULL);
    FUZZ_CHECK(s != NULL, "usi_session_new");
    const char *text = (const char *)data;
    size_t i = 0;
    for (int lines = 0; i < size && lines < 64; lines++) {
        size_t b = i;
        while (i < size && data[i] != '\n') i++;
        const char *line = text + b;
        size_t len = i - b;
        if (i < size) i++; /* the '\n' */
        check_go(line, len);
        /* The command word, as usi.c splits it. */
        size_t w = 0;
        while (w < len && is_space(line[w])) w++;
        size_t we = w;
        while (we < len && !is_space(line[we])) we++;
        const char *cmd = line + w;
        size_t cn = we - w;
        if (word_is(cmd, cn, "go") || word_is(cmd, cn, "isready") || word_is(cmd, cn, "usinewgame") ||
            word_is(cmd, cn, "ponderhit"))
            continue;
        int rc = usi_handle_line(s, line, len, compat_now_ms());
        FUZZ_CHECK(rc == USI_CONTINUE || rc == USI_QUIT, "usi_handle_line returned %d", rc);
        FUZZ_CHECK((rc == USI_QUIT) == (word_is(cmd, cn, "quit") != 0), "USI_QUIT %d for '%.*s'", rc, (int)cn, cmd);
        FUZZ_CHECK(!usi_session_searching(s), "a search runs after '%.*s'", (int)cn, cmd);
        const char *bad = pos_validate(usi_session_position_now(s));
        FUZZ_CHECK(bad == NULL, "inconsistent position after '%.*s': %s", (int)len, line, bad);
    }
    usi_session_free(s);
    return 0;
}
