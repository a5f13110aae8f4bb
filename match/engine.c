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
