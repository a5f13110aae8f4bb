/* engine.c - an outside USI engine as a match player; see engine.h. */
#include "match/engine.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/bits.h"
#include "compat/err.h"
#include "engine/sfen.h"

enum { MAX_WORDS = 64, LINE_MAX_ = 1 << 15 };

int match_engine_split(const char *cmd, char *buf, size_t buflen, char **words, int max) {
    int n = 0;
    size_t o = 0;
    const char *p = cmd;
    if (!cmd || buflen < 2 || max < 2) return -1;
    for (;;) {
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p) break;
        if (n >= max - 1 || o >= buflen - 1) return -1;
        words[n++] = buf + o;
        while (*p && !isspace((unsigned char)*p)) {
            if (*p == '"' || *p == '\'') {
                char q = *p++;
                while (*p && *p != q) {
                    if (o >= buflen - 2) return -1;
                    buf[o++] = *p++;
                }
                if (*p != q) return -1;
                p++;
            } else {
                if (o >= buflen - 2) return -1;
                buf[o++] = *p++;
            }
        }
        buf[o++] = 0;
    }
    words[n] = NULL;
    return n;
}

void match_engine_close(match_engine_t *e) {
    if (!e || !e->proc) return;
    if (e->alive) {
        compat_proc_write_line(e->proc, "quit");
        if (compat_proc_wait(e->proc, 1000, NULL) != 0) compat_proc_kill(e->proc);
    }
    compat_proc_free(e->proc); /* kills what still runs */
    e->proc = NULL;
    e->alive = 0;
}

int match_engine_expect(match_engine_t *e, const char *want, int64_t timeout_ms, const char *label, char *err,
                        size_t errlen) {
    static KOMA_THREAD_LOCAL char line[LINE_MAX_];
    int64_t deadline = compat_now_ms() + timeout_ms;
    size_t wl = strlen(want);
    for (;;) {
        int64_t left = deadline - compat_now_ms();
        int32_t n = compat_proc_read_line(e->proc, line, sizeof line, left < 0 ? 0 : left);
        if (n == COMPAT_PROC_EOF) {
            set_err(err, errlen, "%s exited while we waited for '%s'", label, want);
            e->alive = 0;
            return -1;
        }
        if (n == COMPAT_PROC_TIMEOUT) {
            set_err(err, errlen, "%s did not send '%s' within %lld ms", label, want, (long long)timeout_ms);
            return -1;
        }
        if (strncmp(line, "id name ", 8) == 0 && !e->name[0]) { /* cut to the name's size */
            size_t l = strnlen(line + 8, sizeof e->name - 1);
            memcpy(e->name, line + 8, l);
            e->name[l] = 0;
        }
        if (strncmp(line, want, wl) == 0 && (line[wl] == 0 || isspace((unsigned char)line[wl]))) return 0;
    }
}

int match_engine_open(match_engine_t *e, const match_engine_spec_t *spec, const char *stderr_path,
                      int64_t init_timeout_ms, const char *label, char *err, size_t errlen) {
    char buf[4096], *words[MAX_WORDS];
    memset(e, 0, sizeof *e);
    if (!spec || !spec->cmd || match_engine_split(spec->cmd, buf, sizeof buf, words, MAX_WORDS) <= 0) {
        set_err(err, errlen, "%s: cannot split the command '%s' into words (empty, unbalanced quotes or too long)",
                label, spec && spec->cmd ? spec->cmd : "");
        return -1;
    }
    char e2[512];
    e->proc = compat_proc_spawn((const char *const *)words, stderr_path, e2, sizeof e2);
    if (!e->proc) {
        set_err(err, errlen, "%s: %s", label, e2);
        return -1;
    }
    e->alive = 1;
    if (compat_proc_write_line(e->proc, "usi") != 0 ||
        match_engine_expect(e, "usiok", init_timeout_ms, label, e2, sizeof e2) != 0)
        goto fail;
    for (int32_t i = 0; i < spec->n_options; i++) {
        const char *o = spec->options[i], *eq = strchr(o, '=');
        char cmd[1024];
        if (eq) snprintf(cmd, sizeof cmd, "setoption name %.*s value %s", (int)(eq - o), o, eq + 1);
        else snprintf(cmd, sizeof cmd, "setoption name %s", o); /* a button */
        if (compat_proc_write_line(e->proc, cmd) != 0) {
            set_err(e2, sizeof e2, "%s exited during setoption", label);
            goto fail;
        }
    }
    if (compat_proc_write_line(e->proc, "isready") != 0 ||
        match_engine_expect(e, "readyok", init_timeout_ms, label, e2, sizeof e2) != 0)
        goto fail;
    if (spec->name) snprintf(e->name, sizeof e->name, "%s", spec->name);
    if (!e->name[0]) snprintf(e->name, sizeof e->name, "%s", words[0]);
    return 0;
fail:
    set_err(err, errlen, "%s", e2);
    e->alive = 0;
    compat_proc_kill(e->proc);
    compat_proc_free(e->proc);
    e->proc = NULL;
    return -1;
}

int match_engine_new_game(match_engine_t *e, int64_t timeout_ms, const char *label, char *err, size_t errlen) {
    if (!e->proc || !e->alive) {
        set_err(err, errlen, "%s is not running", label);
        return -1;
    }
    if (compat_proc_write_line(e->proc, "isready") != 0 ||
        match_engine_expect(e, "readyok", timeout_ms, label, err, errlen) != 0 ||
        compat_proc_write_line(e->proc, "usinewgame") != 0) {
        if (!err[0]) set_err(err, errlen, "%s exited before a new game", label);
        return -1;
    }
    return 0;
}

char *match_engine_position_cmd(const ref_game_t *g) {
    size_t cap = 32 + sizeof g->start + (size_t)g->n_moves * MOVE_USI_MAX;
    char *s = malloc(cap), *p = s;
    if (!s) return NULL;
    if (strcmp(g->start, "startpos") == 0) p += sprintf(p, "position startpos");
    else p += sprintf(p, "position sfen %s", g->start);
    if (g->n_moves > 0) p += sprintf(p, " moves");
    for (int32_t i = 0; i < g->n_moves; i++) {
        *p++ = ' ';
        p += move_to_usi(g->moves[i], p);
    }
    *p = 0;
    return s;
}

int match_engine_bestmove(match_engine_t *e, int64_t timeout_ms, char *mv, size_t mvlen) {
    static KOMA_THREAD_LOCAL char line[LINE_MAX_];
    int64_t deadline = compat_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - compat_now_ms();
        int32_t n = compat_proc_read_line(e->proc, line, sizeof line, left < 0 ? 0 : left);
        if (n < 0) return n;
        if (strncmp(line, "bestmove", 8) == 0 && (line[8] == 0 || line[8] == ' ')) {
            const char *p = line + 8;
            while (*p == ' ') p++;
            size_t k = 0;
            while (p[k] && p[k] != ' ') k++;
            snprintf(mv, mvlen, "%.*s", (int)k, p);
            return 0;
        }
    }
}

/* Trims spaces at both ends of s in place; returns its new start. */
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t l = strlen(s);
    while (l > 0 && isspace((unsigned char)s[l - 1])) s[--l] = 0;
    return s;
}

/* "WORD N" with N a positive integer: 1 and *v; 0 when the field is not WORD. */
static int budget_field(const char *f, const char *word, int64_t *v, int *bad) {
    size_t wl = strlen(word);
    if (strncmp(f, word, wl) != 0 || !isspace((unsigned char)f[wl])) return 0;
    char *end;
    long long x = strtoll(f + wl, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    *bad = *end != 0 || x < 1 || x > 100000000LL;
    *v = x;
    return 1;
}

int match_engine_player_parse(const char *text, match_engine_player_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!text || strlen(text) >= sizeof out->text) {
        set_err(err, errlen, "an engine text of %lld characters (at most %lld)", text ? (long long)strlen(text) : 0LL,
                (long long)(sizeof out->text - 1));
        return -1;
    }
    memcpy(out->text, text, strlen(text) + 1);
    char *fields[2 + MATCH_ENGINE_OPTIONS_MAX + 4];
    int nf = 0;
    for (char *p = out->text;;) {
        char *bar = strchr(p, '|');
        if (bar) *bar = 0;
        if (nf == (int)(sizeof fields / sizeof fields[0])) {
            set_err(err, errlen, "more than %d fields", nf);
            return -1;
        }
        fields[nf++] = trim(p);
        if (!bar) break;
        p = bar + 1;
    }
    if (nf < 2 || !fields[0][0] || !fields[1][0]) {
        set_err(err, errlen, "'%s' is not 'LABEL | COMMAND [| byoyomi MS | nodes N | depth N | timeout MS | "
                "NAME=VALUE ...]'", text);
        return -1;
    }
    out->label = fields[0];
    if (strlen(out->label) >= MATCH_ENGINE_NAME_MAX || strncmp(out->label, "cycle ", 6) == 0) {
        set_err(err, errlen, "label '%s': 1 to %d characters, and not 'cycle ...' (the run's nets are named so)",
                out->label, MATCH_ENGINE_NAME_MAX - 1);
        return -1;
    }
    char wb[1024], *words[64];
    if (match_engine_split(fields[1], wb, sizeof wb, words, 64) <= 0) {
        set_err(err, errlen, "command '%s': empty, unbalanced quotes or too long", fields[1]);
        return -1;
    }
    out->spec.cmd = fields[1];
    out->spec.name = out->label;
    int64_t byoyomi = 0, nodes = 0, depth = 0, timeout = 0;
    int budgets = 0;
    for (int i = 2; i < nf; i++) {
        const char *f = fields[i];
        int bad = 0;
        int64_t v = 0;
        if (budget_field(f, "byoyomi", &v, &bad)) byoyomi = v, budgets++;
        else if (budget_field(f, "nodes", &v, &bad)) nodes = v, budgets++;
        else if (budget_field(f, "depth", &v, &bad)) depth = v, budgets++;
        else if (budget_field(f, "timeout", &v, &bad)) timeout = v;
        else if (strchr(f, '=') && f[0] != '=') {
            if (out->spec.n_options == MATCH_ENGINE_OPTIONS_MAX) {
                set_err(err, errlen, "more than %d setoption fields", MATCH_ENGINE_OPTIONS_MAX);
                return -1;
            }
            out->spec.options[out->spec.n_options++] = f;
            continue;
        } else {
            set_err(err, errlen, "field '%s' is none of 'byoyomi MS', 'nodes N', 'depth N', 'timeout MS', "
                    "'NAME=VALUE'", f);
            return -1;
        }
        if (bad) {
            set_err(err, errlen, "field '%s': the number must be an integer from 1 to 100000000", f);
            return -1;
        }
    }
    if (budgets > 1) {
        set_err(err, errlen, "give one budget (byoyomi, nodes or depth), not %d", budgets);
        return -1;
    }
    if (nodes) snprintf(out->go, sizeof out->go, "go nodes %lld", (long long)nodes);
    else if (depth) snprintf(out->go, sizeof out->go, "go depth %lld", (long long)depth);
    else {
        if (!byoyomi) byoyomi = 100;
        snprintf(out->go, sizeof out->go, "go btime 0 wtime 0 byoyomi %lld", (long long)byoyomi);
    }
    out->move_timeout_ms = timeout ? timeout : byoyomi ? byoyomi + (byoyomi > 1000 ? byoyomi : 1000) : 10000;
    out->init_timeout_ms = timeout ? (timeout > 10000 ? timeout : 10000) : 60000;
    return 0;
}
