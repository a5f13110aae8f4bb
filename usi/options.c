/* options.c - USI options: table, announcement, setoption (see options.h). */
#include "usi/options.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"

enum { OPT_SPIN, OPT_CHECK, OPT_STRING, OPT_COMBO };

typedef struct {
    const char *name;
    int usi_type;
    const char *vars[4]; /* combo: the allowed values, NULL-terminated */
} OptInfo;

/* Same order as the cfg table built by opt_table. */
static const OptInfo INFO[] = {
    {"Net", OPT_STRING, {NULL}},
    {"Backend", OPT_COMBO, {"cpu", "cuda", "auto", NULL}},
    {"Threads", OPT_SPIN, {NULL}},
    {"BatchSize", OPT_SPIN, {NULL}},
    {"NodeLimit", OPT_SPIN, {NULL}},
    {"ByoyomiMargin", OPT_SPIN, {NULL}},
    {"ResignThreshold", OPT_STRING, {NULL}},
    {"USI_Ponder", OPT_CHECK, {NULL}},
    {"USI_Hash", OPT_SPIN, {NULL}},
    {"MaxPly", OPT_SPIN, {NULL}},
    {"Search", OPT_COMBO, {"puct", "gumbel", NULL}},
};
enum { OPT_NB = (int)(sizeof INFO / sizeof INFO[0]) };

static void opt_table(UsiOptions *o, cfg_opt_t *t) {
    t[0] = (cfg_opt_t){"Net", CFG_TYPE_STRING, o->net, 1, 0, "weights file or run directory"};
    t[1] = (cfg_opt_t){"Backend", CFG_TYPE_STRING, o->backend, 1, 0, "cpu, cuda or auto"};
    t[2] = (cfg_opt_t){"Threads", CFG_TYPE_INT, &o->threads, 1, 1024, "cpu backend threads"};
    t[3] = (cfg_opt_t){"BatchSize", CFG_TYPE_INT, &o->batch, 1, 1024, "leaves per batch"};
    t[4] = (cfg_opt_t){"NodeLimit", CFG_TYPE_INT, &o->node_limit, 0, 1e12, "visits per move, 0 = time only"};
    t[5] = (cfg_opt_t){"ByoyomiMargin", CFG_TYPE_INT, &o->byoyomi_margin, 0, 60000, "lag allowance (ms)"};
    t[6] = (cfg_opt_t){"ResignThreshold", CFG_TYPE_DOUBLE, &o->resign, 0, 1, "resign below this win probability"};
    t[7] = (cfg_opt_t){"USI_Ponder", CFG_TYPE_BOOL, &o->ponder, 1, 0, "ponder"};
    t[8] = (cfg_opt_t){"USI_Hash", CFG_TYPE_INT, &o->hash_mb, 1, 65536, "tree memory (MiB)"};
    t[9] = (cfg_opt_t){"MaxPly", CFG_TYPE_INT, &o->max_ply, 0, 100000, "draw after this many moves, 0 = none"};
    t[10] = (cfg_opt_t){"Search", CFG_TYPE_STRING, o->search, 1, 0, "puct or gumbel"};
}

void usi_options_default(UsiOptions *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->backend, sizeof o->backend, "auto");
    int cpus = compat_cpu_count();
    o->threads = cpus < 1 ? 1 : cpus > 1024 ? 1024 : cpus;
    o->batch = 32;
    o->node_limit = 0;
    o->byoyomi_margin = 300;
    o->resign = 0.0;
    o->ponder = 0;
    o->hash_mb = 256;
    o->max_ply = 320;
    snprintf(o->search, sizeof o->search, "puct");
}

void usi_options_print(const UsiOptions *o, UsiOut *out) {
    UsiOptions copy = *o;
    cfg_opt_t t[OPT_NB];
    opt_table(&copy, t);
    for (int i = 0; i < OPT_NB; i++) {
        const cfg_opt_t *c = &t[i];
        switch (INFO[i].usi_type) {
        case OPT_SPIN:
            usi_out_line(out, "option name %s type spin default %lld min %.0f max %.0f", c->name,
                         (long long)*(int64_t *)c->ptr, c->min, c->max);
            break;
        case OPT_CHECK:
            usi_out_line(out, "option name %s type check default %s", c->name, *(int *)c->ptr ? "true" : "false");
            break;
        case OPT_STRING:
            if (c->type == CFG_TYPE_DOUBLE) {
                usi_out_line(out, "option name %s type string default %g", c->name, *(double *)c->ptr);
            } else {
                const char *v = (const char *)c->ptr;
                usi_out_line(out, "option name %s type string default %s", c->name, *v ? v : "<empty>");
            }
            break;
        case OPT_COMBO: {
            char vars[256] = "";
            size_t used = 0;
            for (int k = 0; INFO[i].vars[k]; k++) {
                int n = snprintf(vars + used, sizeof vars - used, " var %s", INFO[i].vars[k]);
                if (n > 0 && (size_t)n < sizeof vars - used) used += (size_t)n;
            }
            usi_out_line(out, "option name %s type combo default %s%s", c->name, (const char *)c->ptr, vars);
            break;
        }
        }
    }
}

/* a == b ignoring ASCII case. USI names and values are ASCII; strcasecmp
 * is POSIX only (MSVC has none) and follows the locale. */
static bool eq_nocase(const char *a, const char *b) {
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
        if (x != y) return false;
        if (!x) return true;
    }
}

/* The allowed spelling of v (case-insensitive), or NULL. */
static const char *combo_find(const OptInfo *info, const char *v) {
    for (int k = 0; info->vars[k]; k++)
        if (eq_nocase(info->vars[k], v)) return info->vars[k];
    return NULL;
}

int usi_options_set(UsiOptions *o, const char *name, const char *value, const char **canonical, char *err,
                    size_t errlen) {
    cfg_opt_t t[OPT_NB];
    opt_table(o, t);
    int idx = -1;
    for (int i = 0; i < OPT_NB; i++)
        if (name && eq_nocase(name, t[i].name)) idx = i;
    if (idx < 0) {
        snprintf(err, errlen, "unknown option '%s'", name ? name : "");
        return -1;
    }
    if (canonical) *canonical = t[idx].name;
    if (!value) {
        snprintf(err, errlen, "option '%s': no value given", t[idx].name);
        return -1;
    }
    if (strcmp(value, "<empty>") == 0) value = "";
    if (INFO[idx].usi_type == OPT_COMBO) {
        const char *canon = combo_find(&INFO[idx], value);
        if (!canon) {
            char list[128] = "";
            for (int k = 0; INFO[idx].vars[k]; k++) {
                size_t u = strlen(list);
                snprintf(list + u, sizeof list - u, "%s%s", k ? ", " : "", INFO[idx].vars[k]);
            }
            snprintf(err, errlen, "option '%s': '%s' is not one of %s", t[idx].name, value, list);
            return -1;
        }
        value = canon;
    }
    if (cfg_set(t, OPT_NB, t[idx].name, value, err, errlen) != CFG_OK) return -1;
    return 0;
}
