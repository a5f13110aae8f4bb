/* usi.c - the USI protocol loop: parse a line and dispatch (see usi.h). */
#include "usi/usi.h"

#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/err.h"

typedef struct {
    const char *p;
    size_t n;
} usi_tok_t;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

/* Splits text into tokens; returns their number (all of them, even past max). */
static size_t tokenize(const char *text, size_t len, usi_tok_t *toks, size_t max) {
    size_t n = 0, i = 0;
    while (i < len) {
        while (i < len && is_space(text[i])) i++;
        if (i >= len) break;
        size_t b = i;
        while (i < len && !is_space(text[i])) i++;
        if (n < max) toks[n] = (usi_tok_t){text + b, i - b};
        n++;
    }
    return n;
}

static bool tok_is(usi_tok_t t, const char *word) { return t.n == strlen(word) && memcmp(t.p, word, t.n) == 0; }

/* Printable copy of a token for messages (at most 40 characters). */
static const char *shown(usi_tok_t t, char *buf, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < t.n && k + 4 < n && i < 40; i++) {
        unsigned char c = (unsigned char)t.p[i];
        buf[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (t.n > 40 && k + 4 < n) buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
    buf[k] = 0;
    return buf;
}

/* A go value: an optional sign and decimal digits, clamped into
 * 0..USI_NUMBER_MAX (*clamped set when it had to be). false: not a number. */
static bool parse_go_number(usi_tok_t t, int64_t *out, bool *clamped) {
    size_t i = 0;
    bool neg = false;
    *clamped = false;
    if (t.n > 0 && (t.p[0] == '-' || t.p[0] == '+')) neg = t.p[0] == '-', i = 1;
    if (i >= t.n) return false;
    int64_t v = 0;
    for (; i < t.n; i++) {
        if (t.p[i] < '0' || t.p[i] > '9') return false;
        if (v <= USI_NUMBER_MAX) v = v * 10 + (t.p[i] - '0');
    }
    if (neg && v > 0) v = 0, *clamped = true;
    if (v > USI_NUMBER_MAX) v = USI_NUMBER_MAX, *clamped = true;
    *out = v;
    return true;
}

/* Appends a "; "-separated phrase to buf. */
static void note(char *buf, size_t len, const char *fmt, ...) {
    if (!buf || !len) return;
    size_t u = strlen(buf);
    if (u + 3 >= len) return;
    if (u) memcpy(buf + u, "; ", 3), u += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + u, len - u, fmt, ap);
    va_end(ap);
}

int usi_parse_go(const char *text, size_t len, usi_go_t *g, char *err, size_t errlen, char *warn, size_t warnlen) {
    usi_go_init(g);
    if (warn && warnlen) warn[0] = 0;
    enum { MAXT = 64 };
    usi_tok_t t[MAXT];
    size_t n = tokenize(text, len, t, MAXT);
    if (n > MAXT) {
        set_err(err, errlen, "too many arguments (%llu)", (unsigned long long)n);
        return -1;
    }
    char b1[64], b2[64], unk[256] = "";
    for (size_t i = 0; i < n; i++) {
        int64_t *slot = NULL;
        if (tok_is(t[i], "btime")) slot = &g->time[0];
        else if (tok_is(t[i], "wtime")) slot = &g->time[1];
        else if (tok_is(t[i], "binc")) slot = &g->inc[0];
        else if (tok_is(t[i], "winc")) slot = &g->inc[1];
        else if (tok_is(t[i], "byoyomi")) slot = &g->byoyomi;
        else if (tok_is(t[i], "movetime")) slot = &g->movetime;
        else if (tok_is(t[i], "nodes")) slot = &g->nodes;
        if (slot) {
            /* A GUI waits for bestmove whatever it sent: a bad value is
             * clamped or ignored, and said so, never a reason not to search. */
            bool clamped = false;
            if (i + 1 >= n) {
                note(warn, warnlen, "'%s' without a number ignored", shown(t[i], b1, sizeof b1));
            } else if (!parse_go_number(t[i + 1], slot, &clamped)) {
                note(warn, warnlen, "'%s %s': not a number, ignored", shown(t[i], b1, sizeof b1),
                     shown(t[i + 1], b2, sizeof b2));
                i++;
            } else {
                if (clamped)
                    note(warn, warnlen, "'%s %s' out of range 0..%lld, taken as %lld", shown(t[i], b1, sizeof b1),
                         shown(t[i + 1], b2, sizeof b2), (long long)USI_NUMBER_MAX, (long long)*slot);
                i++;
            }
        } else if (tok_is(t[i], "infinite")) {
            g->infinite = true;
        } else if (tok_is(t[i], "ponder")) {
            g->ponder = true;
        } else if (tok_is(t[i], "mate")) {
            g->mate = true;
            g->mate_ms = -1;
            if (i + 1 < n && tok_is(t[i + 1], "infinite")) {
                i++;
            } else if (i + 1 < n && ((t[i + 1].p[0] >= '0' && t[i + 1].p[0] <= '9') || t[i + 1].p[0] == '-' ||
                                     t[i + 1].p[0] == '+')) {
                /* a time: clamped into 0..USI_NUMBER_MAX like every go value */
                bool clamped = false;
                if (!parse_go_number(t[i + 1], &g->mate_ms, &clamped)) {
                    set_err(err, errlen, "'mate %s': not a number of 0..%lld", shown(t[i + 1], b2, sizeof b2),
                            (long long)USI_NUMBER_MAX);
                    return -1;
                }
                if (clamped)
                    note(warn, warnlen, "'mate %s' out of range 0..%lld, taken as %lld", shown(t[i + 1], b2, sizeof b2),
                         (long long)USI_NUMBER_MAX, (long long)g->mate_ms);
                i++;
            }
        } else {
            size_t u = strlen(unk);
            snprintf(unk + u, sizeof unk - u, "%s'%s'", u ? ", " : "", shown(t[i], b1, sizeof b1));
        }
    }
    if (unk[0]) note(warn, warnlen, "ignoring unsupported %s", unk);
    if (g->mate && (g->ponder || g->infinite)) {
        /* "go mate" takes its own time; ponder/infinite words are not for it */
        g->ponder = false;
        g->infinite = g->mate_ms < 0;
    }
    return 0;
}

static void cmd_setoption(usi_session_t *s, const char *line, size_t len, const usi_tok_t *t, size_t n) {
    /* setoption name <name> [value <value ...>] */
    if (n < 3 || !tok_is(t[1], "name")) {
        usi_session_say(s, "setoption: expected 'setoption name <name> [value <value>]'");
        return;
    }
    size_t vi = 0;
    for (size_t i = 3; i < n; i++)
        if (tok_is(t[i], "value")) {
            vi = i;
            break;
        }
    char name[128];
    const char *name_end = vi ? t[vi - 1].p + t[vi - 1].n : t[n - 1].p + t[n - 1].n;
    size_t nl = (size_t)(name_end - t[2].p);
    if (nl >= sizeof name) {
        usi_session_say(s, "setoption: option name too long");
        return;
    }
    memcpy(name, t[2].p, nl);
    name[nl] = 0;
    if (!vi) {
        usi_session_setoption(s, name, NULL);
        return;
    }
    /* the value is the rest of the line after "value ", trimmed */
    const char *v = t[vi].p + t[vi].n, *end = line + len;
    while (v < end && is_space(*v)) v++;
    while (end > v && is_space(end[-1])) end--;
    size_t vl = (size_t)(end - v);
    char *value = malloc(vl + 1);
    if (!value) return;
    memcpy(value, v, vl);
    value[vl] = 0;
    usi_session_setoption(s, name, value);
    free(value);
}

static void cmd_position(usi_session_t *s, const usi_tok_t *t, size_t n) {
    if (n < 2) {
        usi_session_say(s, "position: expected 'position startpos|sfen <sfen> [moves ...]'");
        return;
    }
    size_t mi = n; /* index of "moves" */
    for (size_t i = 1; i < n; i++)
        if (tok_is(t[i], "moves")) {
            mi = i;
            break;
        }
    const char *sfen;
    size_t sfen_len;
    char b1[64];
    if (tok_is(t[1], "startpos")) {
        if (mi != 2 && n > 2) {
            usi_session_say(s, "position: unexpected '%s' after startpos; position unchanged", shown(t[2], b1, sizeof b1));
            return;
        }
        sfen = "startpos";
        sfen_len = 8;
    } else if (tok_is(t[1], "sfen")) {
        if (mi <= 2) {
            usi_session_say(s, "position: 'sfen' without a position; position unchanged");
            return;
        }
        sfen = t[2].p;
        sfen_len = (size_t)(t[mi - 1].p + t[mi - 1].n - t[2].p);
    } else {
        usi_session_say(s, "position: expected startpos or sfen, not '%s'; position unchanged", shown(t[1], b1, sizeof b1));
        return;
    }
    size_t nm = mi < n ? n - mi - 1 : 0;
    const char **mv = NULL;
    size_t *ml = NULL;
    if (nm > 0) {
        mv = malloc(nm * sizeof *mv);
        ml = malloc(nm * sizeof *ml);
        if (!mv || !ml) {
            free(mv);
            free(ml);
            usi_session_say(s, "position: out of memory");
            return;
        }
        for (size_t i = 0; i < nm; i++) mv[i] = t[mi + 1 + i].p, ml[i] = t[mi + 1 + i].n;
    }
    usi_session_position(s, sfen, sfen_len, mv, ml, (int32_t)nm);
    free(mv);
    free(ml);
}

static int cmd_go(usi_session_t *s, const char *args, size_t len, int64_t received_ms) {
    usi_go_t g;
    char err[256], warn[256];
    if (usi_parse_go(args, len, &g, err, sizeof err, warn, sizeof warn) != 0) {
        /* every go gets its bestmove: search with the default limits */
        usi_session_say(s, "go: %s; searching with the default limits", err);
        usi_go_init(&g);
    } else if (warn[0]) {
        usi_session_say(s, "go: %s", warn);
    }
    return usi_session_go(s, &g, received_ms) == 0 ? USI_CONTINUE : USI_FATAL;
}

int usi_handle_line(usi_session_t *s, const char *line, size_t len, int64_t received_ms) {
    /* the longest line: a position with POS_HIST_MAX moves, ~6 bytes each */
    size_t cap = 16;
    usi_tok_t small[16];
    usi_tok_t *t = small;
    size_t n = tokenize(line, len, t, cap);
    if (n == 0) return USI_CONTINUE;
    if (n > cap) {
        t = malloc(n * sizeof *t);
        if (!t) {
            usi_session_say(s, "out of memory for a line of %llu words", (unsigned long long)n);
            return USI_CONTINUE;
        }
        tokenize(line, len, t, n);
    }
    int rc = USI_CONTINUE;
    char b1[64];
    usi_tok_t c = t[0];
    if (tok_is(c, "usi")) usi_session_usi(s);
    else if (tok_is(c, "isready")) rc = usi_session_isready(s) == 0 ? USI_CONTINUE : USI_FATAL;
    else if (tok_is(c, "setoption")) cmd_setoption(s, line, len, t, n);
    else if (tok_is(c, "usinewgame")) usi_session_newgame(s);
    else if (tok_is(c, "position")) cmd_position(s, t, n);
    else if (tok_is(c, "go")) {
        const char *a = c.p + c.n;
        rc = cmd_go(s, a, (size_t)(line + len - a), received_ms);
    } else if (tok_is(c, "stop")) usi_session_stop(s);
    else if (tok_is(c, "ponderhit")) usi_session_ponderhit(s);
    else if (tok_is(c, "gameover")) {
        const char *res = NULL;
        if (n >= 2) {
            if (tok_is(t[1], "win")) res = "win";
            else if (tok_is(t[1], "lose")) res = "lose";
            else if (tok_is(t[1], "draw")) res = "draw";
            else usi_session_say(s, "gameover: unknown result '%s'", shown(t[1], b1, sizeof b1));
        }
        usi_session_gameover(s, res);
    } else if (tok_is(c, "quit")) {
        usi_session_quit(s);
        rc = USI_QUIT;
    } else {
        usi_session_say(s, "unknown command '%s'", shown(c, b1, sizeof b1));
    }
    if (t != small) free(t);
    return rc;
}
