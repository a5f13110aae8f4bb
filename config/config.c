/* config.c - flags and INI flag sets; see config.h. */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"

/* Length of the valid UTF-8 sequence at s that is printable (not a C1
 * control, U+0080..U+009F), or 0. */
static int utf8_printable(const unsigned char *s) {
    int n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (n == 2 && s[0] == 0xC2 && s[1] < 0xA0) return 0;                                      /* C1 controls */
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F))) return 0; /* overlong, surrogates */
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] > 0x8F))) return 0;
    return n;
}

const char *cfg_quote(const char *s, char *buf, size_t n) {
    if (!buf || n == 0) return "";
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        int u = *p >= 0x80 ? utf8_printable(p) : 0;
        size_t need = *p >= 0x20 && *p < 0x7F ? 1 : u ? (size_t)u : 4;
        if (o + need + 4 > n) { /* room for "..." and the NUL */
            if (o + 4 <= n) memcpy(buf + o, "...", 3), o += 3;
            break;
        }
        if (need == 4 && !u) {
            snprintf(buf + o, n - o, "\\x%02x", *p);
            p++;
        } else {
            memcpy(buf + o, p, need);
            p += need;
        }
        o += need;
    }
    buf[o] = 0;
    return buf;
}

static int is_bool_word(const char *v) {
    static const char *const w[] = {"true", "false", "0", "1", "on", "off", "yes", "no"};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        if (!strcmp(v, w[i])) return 1;
    return 0;
}

const cfg_opt_t *cfg_find(const cfg_opt_t *opts, int nopts, const char *key) {
    for (int i = 0; key && i < nopts; i++)
        if (strcmp(opts[i].name, key) == 0) return &opts[i];
    return NULL;
}

/* a == b ignoring ASCII case (strcasecmp is POSIX only and follows the locale) */
static int eq_nocase(const char *a, const char *b) {
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
        if (x != y) return 0;
        if (!x) return 1;
    }
}

const cfg_opt_t *cfg_find_nocase(const cfg_opt_t *opts, int nopts, const char *key) {
    for (int i = 0; key && i < nopts; i++)
        if (eq_nocase(opts[i].name, key)) return &opts[i];
    return NULL;
}

const char *cfg_choice(const char *choices, int k, int *len) {
    const char *p = choices;
    for (; p && k > 0; k--) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p || k < 0) return NULL;
    const char *bar = strchr(p, '|');
    if (len) *len = bar ? (int)(bar - p) : (int)strlen(p);
    return p;
}

const char *cfg_list_item(const char *list, int k, int *len) {
    if (!list || !list[0] || k < 0) return NULL;
    const char *p = list;
    for (; p && k > 0; k--) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p) return NULL;
    const char *nl = strchr(p, '\n');
    if (len) *len = nl ? (int)(nl - p) : (int)strlen(p);
    return p;
}

/* The index of v among "a|b|c" (ignoring case), -1 if none; *start and *len
 * give the canonical spelling. */
static int choice_index(const char *choices, const char *v, const char **start, size_t *len) {
    int n = 0;
    for (int k = 0; (*start = cfg_choice(choices, k, &n)) != NULL; k++) {
        char w[64];
        if (n >= (int)sizeof w) continue;
        memcpy(w, *start, (size_t)n);
        w[n] = 0;
        if (eq_nocase(w, v)) {
            *len = (size_t)n;
            return k;
        }
    }
    return -1;
}

/* "a, b or c" from "a|b|c" */
static void choices_list(const char *choices, char *buf, size_t n) {
    int count = 0, w = 0;
    while (cfg_choice(choices, count, NULL)) count++;
    size_t used = 0;
    buf[0] = 0;
    for (int k = 0; k < count && used + 1 < n; k++) {
        const char *p = cfg_choice(choices, k, &w);
        int m = snprintf(buf + used, n - used, "%s%.*s", k == 0 ? "" : k == count - 1 ? " or " : ", ", w, p);
        if (m < 0) break;
        used += (size_t)m < n - used ? (size_t)m : n - used - 1;
    }
}

static size_t str_size(const cfg_opt_t *o) { return o->size ? o->size : CFG_STRING_MAX; }

int cfg_set(const cfg_opt_t *opts, int nopts, const char *key, const char *value, char *err, size_t errlen) {
    const cfg_opt_t *o = cfg_find(opts, nopts, key);
    char q[CFG_QUOTE_MAX];
    if (!o) {
        set_err(err, errlen, "unknown option '%s'", cfg_quote(key, q, sizeof q));
        return CFG_ERROR;
    }
    if (!value) value = "";
    int ranged = o->min <= o->max;
    char *end = NULL;
    errno = 0;
    const char *help_sep = o->help ? ": " : "", *help = o->help ? o->help : "";
    switch (o->type) {
    case CFG_TYPE_INT:
    case CFG_TYPE_I32:
    case CFG_TYPE_U64: {
        long long v = strtoll(value, &end, 10);
        int overflow = errno == ERANGE;
        if (!*value || *end || (errno && !overflow)) {
            set_err(err, errlen, "option '%s': '%s' is not an integer", key, cfg_quote(value, q, sizeof q));
            return CFG_ERROR;
        }
        double lo = o->type == CFG_TYPE_I32 ? (double)INT32_MIN : o->type == CFG_TYPE_U64 ? 0.0 : -9.3e18;
        double hi = o->type == CFG_TYPE_I32 ? (double)INT32_MAX : 9.3e18;
        if (ranged) lo = o->min > lo ? o->min : lo, hi = o->max < hi ? o->max : hi;
        if (overflow || (double)v < lo || (double)v > hi) { /* the digits as given: strtoll clamped them */
            set_err(err, errlen, "option '%s': %s is outside [%.15g, %.15g]%s%s", key, cfg_quote(value, q, sizeof q),
                    lo, hi, help_sep, help);
            return CFG_ERROR;
        }
        if (o->type == CFG_TYPE_INT) *(int64_t *)o->ptr = v;
        else if (o->type == CFG_TYPE_I32) *(int32_t *)o->ptr = (int32_t)v;
        else *(uint64_t *)o->ptr = (uint64_t)v;
        break;
    }
    case CFG_TYPE_DOUBLE:
    case CFG_TYPE_FLOAT: {
        double v = strtod(value, &end);
        /* ERANGE: beyond the largest double (+-HUGE_VAL, out of range below)
         * or below the smallest (a number next to 0, taken as it is). */
        if (!*value || *end || (errno && errno != ERANGE) || isnan(v)) {
            set_err(err, errlen, "option '%s': '%s' is not a number", key, cfg_quote(value, q, sizeof q));
            return CFG_ERROR;
        }
        double big = o->type == CFG_TYPE_FLOAT ? (double)FLT_MAX : DBL_MAX;
        double lo = ranged ? o->min : -big, hi = ranged ? o->max : big;
        if (!(v >= lo && v <= hi) || fabs(v) > big) {
            set_err(err, errlen, "option '%s': %s is outside [%g, %g]%s%s", key, cfg_quote(value, q, sizeof q), lo, hi,
                    help_sep, help);
            return CFG_ERROR;
        }
        if (o->type == CFG_TYPE_DOUBLE) *(double *)o->ptr = v;
        else *(float *)o->ptr = (float)v;
        break;
    }
    case CFG_TYPE_BOOL:
        if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "on") || !strcmp(value, "yes"))
            *(int *)o->ptr = 1;
        else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "off") || !strcmp(value, "no"))
            *(int *)o->ptr = 0;
        else {
            set_err(err, errlen, "option '%s': '%s' is not a boolean (true/false)", key, cfg_quote(value, q, sizeof q));
            return CFG_ERROR;
        }
        break;
    case CFG_TYPE_ENUM:
    case CFG_TYPE_STRING:
    case CFG_TYPE_PATH:
    case CFG_TYPE_LIST: {
        /* No control character (a terminal acts on ESC sequences when a later
         * message quotes the value) and, but in a path, only valid UTF-8:
         * refused here, every message downstream quotes clean text. */
        for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
            int bad = (*c < 0x20 && *c != '\t') || *c == 0x7f, u = 0;
            if (!bad && *c >= 0x80 && o->type != CFG_TYPE_PATH) {
                u = utf8_printable(c);
                bad = !u;
            }
            if (bad) {
                set_err(err, errlen, "option '%s': '%s' holds %s (byte %d)", key, cfg_quote(value, q, sizeof q),
                        *c < 0x80 ? "a control character" : "bytes that are not UTF-8 text",
                        (int)(c - (const unsigned char *)value) + 1);
                return CFG_ERROR;
            }
            if (u) c += u - 1;
        }
        const char *canon = value;
        size_t len = strlen(value);
        int k = 0;
        if (o->choices) {
            k = choice_index(o->choices, value, &canon, &len);
            if (k < 0) {
                char list[256];
                choices_list(o->choices, list, sizeof list);
                set_err(err, errlen, "option '%s': '%s' is not %s", key, cfg_quote(value, q, sizeof q), list);
                return CFG_ERROR;
            }
        }
        if (o->type == CFG_TYPE_ENUM) {
            *(int *)o->ptr = k;
            break;
        }
        if (o->type == CFG_TYPE_LIST) { /* appended after a '\n'; "" empties */
            char *list = o->ptr;
            size_t used = len ? strlen(list) : 0, sep = used ? 1 : 0;
            if (used + sep + len >= str_size(o)) {
                set_err(err, errlen, "option '%s': values longer than %llu characters in all", key,
                        (unsigned long long)(str_size(o) - 1));
                return CFG_ERROR;
            }
            if (sep) list[used++] = '\n';
            memcpy(list + used, canon, len);
            list[used + len] = 0;
            break;
        }
        if (len >= str_size(o)) {
            set_err(err, errlen, "option '%s': value longer than %llu characters", key,
                    (unsigned long long)(str_size(o) - 1));
            return CFG_ERROR;
        }
        memcpy(o->ptr, canon, len);
        ((char *)o->ptr)[len] = 0;
        break;
    }
    }
    if (o->given) *o->given = 1;
    return CFG_OK;
}

void cfg_defaults(const cfg_opt_t *opts, int nopts) {
    for (int i = 0; i < nopts; i++) {
        if (!opts[i].def) continue;
        if (opts[i].type == CFG_TYPE_LIST) ((char *)opts[i].ptr)[0] = 0; /* the default replaces the list */
        int *given = opts[i].given;
        cfg_opt_t o = opts[i];
        o.given = NULL; /* a default is not a given value */
        char e[400];
        if (cfg_set(&o, 1, o.name, o.def, e, sizeof e) != CFG_OK) {
            fprintf(stderr, "the default of %s\n", e);
            abort();
        }
        if (given) *given = 0;
    }
}

typedef struct {
    const cfg_opt_t *opts;
    int nopts;
    const char *path;
    char *err;
    size_t errlen;
    int failed;
    FILE *f;
    int line;     /* lines read so far: the line being parsed */
    int too_long; /* a line did not fit inih's buffer */
    int read_error;
    int section; /* line of a [section] header (flag sets have none), else 0 */
    int *set_on; /* (nopts) line that set each option, 0 = not yet */
} ini_ctx_t;

/* inih's line reader, wrapped to count lines and to refuse a line that does
 * not fit its buffer (inih would parse the rest as a line of its own). */
static char *ini_read(char *str, int num, void *stream) {
    ini_ctx_t *c = stream;
    if (c->failed || c->too_long) return NULL;
    char *r = fgets(str, num, c->f);
    if (!r) {
        if (ferror(c->f)) c->read_error = 1;
        return NULL;
    }
    c->line++;
    size_t n = strlen(str);
    if (n + 1 == (size_t)num && str[n - 1] != '\n' && !feof(c->f)) {
        c->too_long = 1;
        return NULL;
    }
    const char *t = str;
    while (*t == ' ' || *t == '\t') t++;
    if (*t == '[') { /* inih would read on and file the keys under it */
        c->section = c->line;
        return NULL;
    }
    return r;
}

static int ini_set(ini_ctx_t *c, int line, const char *name, const char *value) {
    if (c->failed) return 0;
    char e[400];
    const cfg_opt_t *o = cfg_find(c->opts, c->nopts, name);
    if (o && c->set_on && o->type != CFG_TYPE_LIST) { /* a LIST key adds a value each time */
        int *first = &c->set_on[o - c->opts];
        if (*first) {
            char q[CFG_QUOTE_MAX];
            set_err(c->err, c->errlen, "%s:%d: '%s' is already set on line %d", c->path, line,
                    cfg_quote(name, q, sizeof q), *first);
            c->failed = 1;
            return 0;
        }
        *first = line;
    }
    if (cfg_set(c->opts, c->nopts, name, value, e, sizeof e) != CFG_OK) {
        set_err(c->err, c->errlen, "%s:%d: %s", c->path, line, e);
        c->failed = 1;
        return 0;
    }
    return 1;
}

/* The handler's signature depends on how inih was built; both are handled. */
#if INI_HANDLER_LINENO
static int ini_cb(void *user, const char *section, const char *name, const char *value, int lineno) {
    (void)section;
    return ini_set(user, lineno, name, value);
}
#else
static int ini_cb(void *user, const char *section, const char *name, const char *value) {
    (void)section;
    ini_ctx_t *c = user;
    return ini_set(c, c->line, name, value);
}
#endif

int cfg_load_file(const cfg_opt_t *opts, int nopts, const char *path, char *err, size_t errlen) {
    ini_ctx_t c = {opts, nopts, path, err, errlen, 0, NULL, 0, 0, 0, 0, NULL};
    char e[400];
    if (compat_check_regular_file(path, e, sizeof e) != 0) {
        set_err(err, errlen, "config file %s", e);
        return CFG_ERROR;
    }
    c.f = fopen(path, "r");
    if (!c.f) {
        set_err(err, errlen, "%s: cannot open config file: %s", path, strerror(errno));
        return CFG_ERROR;
    }
    c.set_on = calloc((size_t)(nopts > 0 ? nopts : 1), sizeof(int));
    if (!c.set_on) {
        fclose(c.f);
        set_err(err, errlen, "%s: out of memory", path);
        return CFG_ERROR;
    }
    int rc = ini_parse_stream(ini_read, &c, ini_cb, &c);
    fclose(c.f);
    free(c.set_on);
    if (c.failed) return CFG_ERROR;
    if (c.section) {
        set_err(err, errlen,
                "%s:%d: [section] headers are not allowed: a config file is a flat list of "
                "'flag-name = value' lines",
                path, c.section);
        return CFG_ERROR;
    }
    if (c.too_long) {
        set_err(err, errlen, "%s:%d: line longer than %d characters", path, c.line, INI_MAX_LINE - 2);
        return CFG_ERROR;
    }
    if (c.read_error) {
        set_err(err, errlen, "%s: read error after line %d", path, c.line);
        return CFG_ERROR;
    }
    if (rc != 0) {
        set_err(err, errlen, "%s:%d: malformed line", path, rc);
        return CFG_ERROR;
    }
    return CFG_OK;
}

static const char *type_name(const cfg_opt_t *o) {
    switch (o->type) {
    case CFG_TYPE_INT:
    case CFG_TYPE_I32:
    case CFG_TYPE_U64: return "int";
    case CFG_TYPE_DOUBLE:
    case CFG_TYPE_FLOAT: return "num";
    case CFG_TYPE_BOOL: return "bool";
    case CFG_TYPE_ENUM: return "word";
    case CFG_TYPE_PATH: return "path";
    case CFG_TYPE_LIST: return o->choices ? "word" : "str";
    default: return o->choices ? "word" : "str";
    }
}

/* Shortest text that reads back as the same double, or as the same float
 * when the value came from a float (0.02f prints as 0.02, not 0.0199999995). */
static void format_double(double v, char *buf, size_t n) {
    if (v == (double)(int64_t)v && fabs(v) < 1e15) {
        snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
        if ((double)(float)v == v && (float)strtod(buf, NULL) == (float)v) return;
    }
}

void cfg_value_string(const cfg_opt_t *o, char *buf, size_t n) {
    switch (o->type) {
    case CFG_TYPE_INT: snprintf(buf, n, "%lld", (long long)*(int64_t *)o->ptr); break;
    case CFG_TYPE_I32: snprintf(buf, n, "%ld", (long)*(int32_t *)o->ptr); break;
    case CFG_TYPE_U64: snprintf(buf, n, "%llu", (unsigned long long)*(uint64_t *)o->ptr); break;
    case CFG_TYPE_DOUBLE: format_double(*(double *)o->ptr, buf, n); break;
    case CFG_TYPE_FLOAT: format_double((double)*(float *)o->ptr, buf, n); break;
    case CFG_TYPE_BOOL: snprintf(buf, n, "%s", *(int *)o->ptr ? "true" : "false"); break;
    case CFG_TYPE_ENUM: {
        int w = 0;
        const char *p = o->choices ? cfg_choice(o->choices, *(int *)o->ptr, &w) : NULL;
        snprintf(buf, n, "%.*s", p ? w : 0, p ? p : "");
        break;
    }
    case CFG_TYPE_STRING:
    case CFG_TYPE_PATH: snprintf(buf, n, "%s", (char *)o->ptr); break;
    case CFG_TYPE_LIST: {
        size_t used = 0;
        int w = 0;
        const char *p;
        if (n) buf[0] = 0;
        for (int k = 0; (p = cfg_list_item(o->ptr, k, &w)) != NULL && used + 1 < n; k++) {
            int m = snprintf(buf + used, n - used, "%s%.*s", k ? ", " : "", w, p);
            if (m < 0) break;
            used += (size_t)m < n - used ? (size_t)m : n - used - 1;
        }
        break;
    }
    }
}

/* 1 when every word of "a|b|c" appears in text as a word of its own. */
static int says_choices(const char *text, const char *choices) {
    int w = 0;
    const char *c;
    for (int k = 0; (c = cfg_choice(choices, k, &w)) != NULL; k++) {
        int found = 0;
        for (const char *p = text; !found && *p; p++) {
            if (strncmp(p, c, (size_t)w) != 0) continue;
            char before = p == text ? ' ' : p[-1], after = p[w];
            found = !(isalnum((unsigned char)before) || before == '-' || before == '_') &&
                    !(isalnum((unsigned char)after) || after == '-' || after == '_');
        }
        if (!found) return 0;
    }
    return 1;
}

/* Writes text from column x (the cursor is there) to width, breaking at
 * spaces (not at NBSP, written as a space); continuation lines start at col.
 * A word longer than a line is written whole. */
#define NBSP '\x01'

static void wrap_text_from(FILE *out, const char *text, int x, int col, int width) {
    int first = 1;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        int n = 0;
        while (p[n] && p[n] != ' ') n++;
        if (!first && x + 1 + n > width) {
            fprintf(out, "\n%*s", col, "");
            x = col;
        } else if (!first) {
            fputc(' ', out);
            x++;
        }
        for (int k = 0; k < n; k++) fputc(p[k] == NBSP ? ' ' : p[k], out);
        x += n, first = 0;
        p += n;
    }
    fputc('\n', out);
}

static void wrap_text(FILE *out, const char *text, int col, int width) { wrap_text_from(out, text, col, col, width); }

/* One row of --help: "  --name TYPE" then the text from column col, on the
 * same line when the name leaves room, else on the next. */
static void help_row(FILE *out, const char *lhs, const char *text, int col, int width) {
    int n = fprintf(out, "  %s", lhs);
    if (n + 2 > col) {
        fprintf(out, "\n%*s", col, "");
    } else {
        fprintf(out, "%*s", col - n, "");
    }
    wrap_text(out, text, col, width);
}

/* The program's usage text within width. Lines that fit are kept as
 * written. A "usage:" line (or an indented one) that does not fit is wrapped
 * at spaces outside [brackets], its continuations under the first argument
 * (or its own indent); a paragraph (lines starting in column 0 up to a blank
 * or indented line) with a line that does not fit is reflowed whole. */
static void wrap_usage(FILE *out, const char *usage, int width) {
    size_t cap = strlen(usage) + 1;
    char *buf = malloc(cap);
    if (!buf) {
        fprintf(out, "%s\n", usage);
        return;
    }
    for (const char *p = usage; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int para = n > 0 && p[0] != ' ' && strncmp(p, "usage: ", 7) != 0;
        if (para) { /* the paragraph: this line and the next ones in column 0 */
            const char *q = p;
            size_t len = 0;
            int fits = 1;
            for (;;) {
                const char *qe = strchr(q, '\n');
                size_t qn = qe ? (size_t)(qe - q) : strlen(q);
                if (qn == 0 || q[0] == ' ' || (q != p && !strncmp(q, "usage: ", 7))) break;
                if ((int)qn > width) fits = 0;
                if (len) buf[len++] = ' ';
                memcpy(buf + len, q, qn);
                len += qn;
                q = qe ? qe + 1 : q + qn;
                if (!qe) break;
            }
            buf[len] = 0;
            if (fits) fprintf(out, "%.*s", (int)(q - p), p);
            else wrap_text_from(out, buf, 0, 0, width);
            if (fits && (q == p || q[-1] != '\n')) fputc('\n', out);
            p = q;
            continue;
        }
        if ((int)n <= width) {
            fprintf(out, "%.*s\n", (int)n, p);
        } else {
            memcpy(buf, p, n);
            buf[n] = 0;
            int lead = 0, depth = 0;
            while (buf[lead] == ' ') lead++;
            for (char *c = buf + lead; *c; c++) { /* "[--lr X]" stays on one line */
                depth += *c == '[' ? 1 : *c == ']' && depth > 0 ? -1 : 0;
                if (*c == ' ' && depth > 0) *c = NBSP;
            }
            int col = lead;
            if (!strncmp(buf + lead, "usage: ", 7)) {
                const char *sp = strchr(buf + lead + 7, ' ');
                if (sp && sp - buf < width / 2) col = (int)(sp - buf) + 1;
            }
            fprintf(out, "%.*s", lead, buf);
            wrap_text_from(out, buf + lead, lead, col, width);
        }
        p = e ? e + 1 : p + n;
    }
    free(buf);
}

void cfg_print_help(const cfg_opt_t *opts, int nopts, const char *usage, FILE *out) {
    int width = compat_isatty(out) ? compat_term_width(out) : 0;
    if (width <= 0) width = 80;
    if (width < 60) width = 60; /* narrower: lines overflow rather than a column of single words */
    if (width > 120) width = 120;
    if (usage) {
        wrap_usage(out, usage, width);
        fputc('\n', out);
    }
    /* the text column: after the longest "--name TYPE" that fits in a third of the line */
    int col = (int)strlen("  --config FILE  ");
    for (int i = 0; i < nopts; i++) {
        int n = 2 + 2 + (int)strlen(opts[i].name) + 1 + (int)strlen(type_name(&opts[i])) + 2;
        if (n > col && n <= width / 3) col = n;
    }
    help_row(out, "--config FILE", "read flags from an INI file (key = flag name); command-line flags win", col, width);
    char *text = malloc(CFG_STRING_MAX * 2 + 1024);
    if (!text) return;
    for (int i = 0; i < nopts; i++) {
        const cfg_opt_t *o = &opts[i];
        char v[CFG_STRING_MAX + 8], lhs[160], list[256] = "";
        cfg_value_string(o, v, sizeof v);
        snprintf(lhs, sizeof lhs, "--%s %s", o->name, type_name(o));
        const char *help = o->help ? o->help : "";
        if (o->choices && !says_choices(help, o->choices)) choices_list(o->choices, list, sizeof list);
        snprintf(text, CFG_STRING_MAX * 2 + 1024, "%s (%s%sdefault:\x01%s)", help, list, list[0] ? "; " : "",
                 v[0] ? v : "''"); /* "default: X" kept on one line */
        help_row(out, lhs, text, col, width);
    }
    free(text);
}

/* Appends "name = value\n" (value: n bytes) to the growing *s; -1 when out of memory (*s freed). */
static int dump_line(char **s, size_t *len, size_t *cap, const char *name, const char *value, size_t n) {
    size_t need = strlen(name) + n + 5;
    if (*len + need + 1 > *cap) {
        while (*len + need + 1 > *cap) *cap *= 2;
        char *ns = realloc(*s, *cap);
        if (!ns) {
            free(*s);
            *s = NULL;
            return -1;
        }
        *s = ns;
    }
    *len += (size_t)snprintf(*s + *len, *cap - *len, "%s = %.*s\n", name, (int)n, value);
    return 0;
}

char *cfg_dump_string(const cfg_opt_t *opts, int nopts) {
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; i < nopts; i++) {
        const cfg_opt_t *o = &opts[i];
        if (o->type == CFG_TYPE_LIST && ((const char *)o->ptr)[0]) { /* a line per value, as a file gives them */
            const char *p;
            int w = 0;
            for (int k = 0; (p = cfg_list_item(o->ptr, k, &w)) != NULL; k++)
                if (dump_line(&s, &len, &cap, o->name, p, (size_t)w) != 0) return NULL;
            continue;
        }
        char v[CFG_STRING_MAX + 8];
        cfg_value_string(o, v, sizeof v);
        if (dump_line(&s, &len, &cap, o->name, v, strlen(v)) != 0) return NULL;
    }
    return s;
}

int cfg_parse(const cfg_opt_t *opts, int nopts, int argc, char **argv, int first, char **positional, int max_positional,
              int *npositional, const char *usage, FILE *out, char *err, size_t errlen) {
    if (npositional) *npositional = 0;
    /* Pass 1: --help and --config, so the file applies before the flags. */
    for (int i = first; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            cfg_print_help(opts, nopts, usage, out);
            return CFG_HELP;
        }
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) {
                set_err(err, errlen, "--config needs a file name");
                return CFG_ERROR;
            }
            if (cfg_load_file(opts, nopts, argv[i + 1], err, errlen) != CFG_OK) return CFG_ERROR;
            i++;
        } else if (!strncmp(argv[i], "--config=", 9)) {
            if (cfg_load_file(opts, nopts, argv[i] + 9, err, errlen) != CFG_OK) return CFG_ERROR;
        }
    }
    /* Pass 2: everything else. */
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--config")) {
            i++;
            continue;
        }
        if (!strncmp(a, "--config=", 9)) continue;
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            char key[128];
            const char *eq = strchr(a + 2, '=');
            size_t kl = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            if (kl >= sizeof key) {
                char q[64];
                set_err(err, errlen, "flag too long: %s", cfg_quote(a, q, sizeof q));
                return CFG_ERROR;
            }
            memcpy(key, a + 2, kl);
            key[kl] = 0;
            const cfg_opt_t *o = cfg_find(opts, nopts, key);
            if (!o && !strncmp(key, "no-", 3) && (o = cfg_find(opts, nopts, key + 3)) && o->type == CFG_TYPE_BOOL) {
                if (cfg_set(opts, nopts, key + 3, "false", err, errlen) != CFG_OK) return CFG_ERROR;
                continue;
            }
            if (!o) {
                char q[CFG_QUOTE_MAX];
                set_err(err, errlen, "unknown flag --%s (see --help)", cfg_quote(key, q, sizeof q));
                return CFG_ERROR;
            }
            const char *val;
            if (eq) val = eq + 1;
            else if (o->type == CFG_TYPE_BOOL && (i + 1 >= argc || argv[i + 1][0] == '-')) val = "true";
            else if (o->type == CFG_TYPE_BOOL && !is_bool_word(argv[i + 1]) && positional && max_positional > 0)
                val = "true"; /* the word after a bare boolean flag is a positional argument */
            else {
                if (i + 1 >= argc) {
                    set_err(err, errlen, "flag --%s needs a value", key); /* key names a row: printable */
                    return CFG_ERROR;
                }
                val = argv[++i];
            }
            if (cfg_set(opts, nopts, key, val, err, errlen) != CFG_OK) return CFG_ERROR;
        } else {
            if (!positional || !npositional || *npositional >= max_positional) {
                char q[CFG_QUOTE_MAX];
                set_err(err, errlen, "unexpected argument '%s' (see --help)", cfg_quote(a, q, sizeof q));
                return CFG_ERROR;
            }
            positional[(*npositional)++] = argv[i];
        }
    }
    return CFG_OK;
}
