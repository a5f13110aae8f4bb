/* record.c - game records in CSA, KIF and USI into checked games (record.h):
 * the entry points, on top of the readers.
 *
 * Owns: the detection of a file's format, rec_parse (encoding checks,
 * dispatch to a reader) and rec_parse_file, collecting into a rec_list_t.
 * Does not own: what the readers share (record_util.c: names, text helpers,
 * the parser, the boards), each format's syntax (record_csa.c, record_kif.c
 * with the KIF text encodings, record_usi.c), the rules (engine/), what
 * happens to a game once read (the sink's). Helpers below, readers above,
 * this dispatcher on top: no file calls one above it.
 *
 * Every reader walks the input line by line with explicit lengths (the
 * input need not be NUL-terminated and may hold NUL bytes), keeps one game
 * open at a time, checks each move against the engine's position, and
 * hands finished games to the sink. A failing game is reported once and
 * the reader skips to the next game (CSA "/", the next USI line; KIF has one
 * game a file).
 */
#include "data/record_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat/compat.h"
#include "engine/rules.h"

/* ==================================================================================== */
/* detection and entry points                                                           */
/* ==================================================================================== */
static bool ext_is(const char *name, const char *ext) {
    size_t n = strlen(name), k = strlen(ext);
    if (n <= k || name[n - k - 1] != '.') return false;
    for (size_t i = 0; i < k; i++) {
        char c = name[n - k + i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != ext[i]) return false;
    }
    return true;
}

rec_format_t rec_format_guess(const char *name, const void *data, size_t len) {
    if (name) {
        if (ext_is(name, "csa")) return REC_FORMAT_CSA;
        if (ext_is(name, "kif") || ext_is(name, "kifu")) return REC_FORMAT_KIF;
        if (ext_is(name, "usi") || ext_is(name, "sfen")) return REC_FORMAT_USI;
    }
    const char *text = data;
    if (!text) return REC_FORMAT_AUTO;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3, len -= 3;
    size_t at = 0;
    int32_t lineno = 0;
    line_t ln;
    bool kif_comment = false;
    while (lineno < 200 && reci_next_line(text, len, &at, &lineno, &ln)) {
        const char *s = ln.s;
        size_t n = ln.n;
        reci_trim(&s, &n);
        if (n == 0) continue;
        if (s[0] == '#') {
            if (has_prefix(s, n, "#KIF") || has_prefix(s, n, "# ----")) kif_comment = true;
            continue;
        }
        if (has_prefix(s, n, "position ") || has_prefix(s, n, "startpos") || has_prefix(s, n, "sfen "))
            return REC_FORMAT_USI;
        if (s[0] && strchr("VNP$'+-%/", s[0])) return REC_FORMAT_CSA;
        for (size_t i = 0; i < n; i++)
            if ((uint8_t)s[i] >= 0x80) return REC_FORMAT_KIF;
        if (is_digit(s[0])) return REC_FORMAT_KIF;
        return kif_comment ? REC_FORMAT_KIF : REC_FORMAT_AUTO;
    }
    return kif_comment ? REC_FORMAT_KIF : REC_FORMAT_AUTO;
}

int rec_parse(const char *name, const void *data, size_t len, rec_format_t fmt, const rec_sink_t *sink) {
    parser_t *p = calloc(1, sizeof *p);
    pos_t *pos = malloc(sizeof *pos);
    if (!p || !pos) {
        free(p);
        free(pos);
        if (sink && sink->reject) {
            rec_reject_t r = {.code = REC_ERR_MEMORY};
            snprintf(r.msg, sizeof r.msg, "%s: out of memory", name ? name : "<input>");
            sink->reject(sink->user, &r);
        }
        return -1;
    }
    p->name = name ? name : "<input>";
    p->sink = sink;
    p->pos = pos;
    p->text = data;
    p->len = data ? len : 0;
    const uint8_t *b = data;
    char *owned = NULL;
    if ((unsigned)fmt >= REC_FORMAT_NB) fmt = REC_FORMAT_AUTO;
    /* UTF-16 (a BOM, or NUL bytes early on) is refused by every reader. */
    bool nul = false;
    for (size_t i = 0; i < p->len && i < 512; i++) nul |= b[i] == 0;
    if (p->len >= 2 && ((b[0] == 0xFF && b[1] == 0xFE) || (b[0] == 0xFE && b[1] == 0xFF))) {
        reci_reject(p, true, 0, 0, REC_ERR_ENCODING, "UTF-16 text is not supported (save it as UTF-8 or Shift_JIS)");
    } else if (nul) {
        reci_reject(p, true, 0, 0, REC_ERR_ENCODING, "NUL bytes in the text: UTF-16 or a binary file, not a record");
    } else {
        if (fmt == REC_FORMAT_AUTO) fmt = rec_format_guess(name, data, p->len);
        if (fmt == REC_FORMAT_AUTO) {
            reci_reject(p, true, 0, 0, REC_ERR_FORMAT, p->len ? "not a CSA, KIF or USI record" : "empty file");
        } else if (fmt == REC_FORMAT_KIF) {
            if (reci_kif_decode(p, b, p->len, &owned)) reci_kif_read(p);
        } else {
            if (p->len >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0) p->text += 3, p->len -= 3;
            if (fmt == REC_FORMAT_CSA) reci_csa_read(p);
            else reci_usi_read(p);
        }
        if (p->stop == 0 && p->delivered == 0 && p->rejected == 0)
            reci_reject(p, true, 0, 0, REC_ERR_FORMAT, "no game found (read as %s)", rec_format_name(fmt));
    }
    if (p->stop < 0 && p->rejected == 0) reci_reject(p, true, 0, 0, REC_ERR_MEMORY, "out of memory");
    int rc = p->stop < 0 ? -1 : p->stop > 0 ? 1 : 0;
    free(owned);
    free(pos);
    free(p);
    return rc;
}

int rec_parse_file(const char *path, rec_format_t fmt, const rec_sink_t *sink) {
    compat_map_t map;
    char err[512];
    if (compat_map_file(path, &map, err, sizeof err) != 0) {
        if (sink && sink->reject) {
            rec_reject_t r = {.code = REC_ERR_IO};
            snprintf(r.msg, sizeof r.msg, "%s", err);
            sink->reject(sink->user, &r);
        }
        return 0;
    }
    if (map.size > SIZE_MAX) {
        compat_unmap_file(&map);
        return -1;
    }
    int rc = rec_parse(path, map.data, (size_t)map.size, fmt, sink);
    compat_unmap_file(&map);
    return rc;
}

/* ==================================================================================== */
/* collecting                                                                           */
/* ==================================================================================== */
typedef struct {
    rec_list_t *l;
    int32_t cap_g, cap_r;
    bool oom;
} collect_t;

static int collect_game(void *user, const rec_game_t *g) {
    collect_t *c = user;
    rec_list_t *l = c->l;
    if (l->n_games == c->cap_g) {
        int32_t cap = c->cap_g ? 2 * c->cap_g : 8;
        rec_game_t *a = realloc(l->games, sizeof *a * (size_t)cap);
        if (!a) return c->oom = true, 1;
        l->games = a;
        c->cap_g = cap;
    }
    move_t *mv = malloc(sizeof(move_t) * (size_t)(g->n_moves ? g->n_moves : 1));
    if (!mv) return c->oom = true, 1;
    memcpy(mv, g->moves, sizeof(move_t) * (size_t)g->n_moves);
    rec_game_t *d = &l->games[l->n_games++];
    *d = *g;
    d->moves = mv;
    return 0;
}

static void collect_reject(void *user, const rec_reject_t *r) {
    collect_t *c = user;
    rec_list_t *l = c->l;
    if (l->n_rejects == c->cap_r) {
        int32_t cap = c->cap_r ? 2 * c->cap_r : 4;
        rec_reject_t *a = realloc(l->rejects, sizeof *a * (size_t)cap);
        if (!a) {
            c->oom = true;
            return;
        }
        l->rejects = a;
        c->cap_r = cap;
    }
    l->rejects[l->n_rejects++] = *r;
}

int rec_parse_list(const char *name, const void *data, size_t len, rec_format_t fmt, rec_list_t *out) {
    memset(out, 0, sizeof *out);
    collect_t c = {.l = out};
    rec_sink_t sink = {collect_game, collect_reject, &c};
    int rc = rec_parse(name, data, len, fmt, &sink);
    return c.oom ? -1 : rc;
}

void rec_list_free(rec_list_t *l) {
    if (!l) return;
    for (int32_t i = 0; i < l->n_games; i++) free((void *)l->games[i].moves);
    free(l->games);
    free(l->rejects);
    memset(l, 0, sizeof *l);
}
