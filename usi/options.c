/* options.c - USI options: table, announcement, setoption (see options.h). */
#include "usi/options.h"

#include <stdio.h>
#include <string.h>

#include "compat/compat.h"

/* The one table: a row per option (data/config.h). The USI type follows
 * from the row: numbers with a range are spins, booleans checks, rows with
 * allowed words combos, the rest strings. */
enum { OPT_NB = 13 };

static int opt_table(usi_options_t *o, cfg_opt_t *t) {
    const cfg_opt_t rows[OPT_NB] = {
        {"Net", CFG_TYPE_PATH, o->net, 1, 0, "weights file or run directory", "", NULL, sizeof o->net},
        {"Backend", CFG_TYPE_STRING, o->backend, 1, 0, "network backend", "auto", "cpu|cuda|auto", sizeof o->backend},
        {"Threads", CFG_TYPE_INT, &o->threads, 1, 1024, "cpu backend threads"}, /* default: the CPUs */
        {"BatchSize", CFG_TYPE_INT, &o->batch, 1, 1024, "leaves per batch", "32"},
        {"NodeLimit", CFG_TYPE_INT, &o->node_limit, 0, 1e12, "visits per move, 0 = time only", "0"},
        {"ByoyomiMargin", CFG_TYPE_INT, &o->byoyomi_margin, 0, 60000, "lag allowance (ms)", "300"},
        {"ResignThreshold", CFG_TYPE_DOUBLE, &o->resign, 0, 1, "resign below this win probability", "0"},
        {"USI_Ponder", CFG_TYPE_BOOL, &o->ponder, 1, 0, "ponder", "false"},
        {"USI_Hash", CFG_TYPE_INT, &o->hash_mb, 1, 65536, "tree memory (MiB)", "256"},
        {"MaxPly", CFG_TYPE_INT, &o->max_ply, 0, 100000, "draw after this many moves, 0 = none", "320"},
        {"Search", CFG_TYPE_STRING, o->search, 1, 0, "root selection", "puct", "puct|gumbel", sizeof o->search},
        {"LeafMate", CFG_TYPE_STRING, o->leaf_mate, 1, 0, "mate search at leaves (plies)", "1", "0|1|3",
         sizeof o->leaf_mate},
        {"Contempt", CFG_TYPE_INT, &o->contempt, -500, 500, "a draw counts as 50% minus this per mille for the engine",
         "0"},
    };
    memcpy(t, rows, sizeof rows);
    return OPT_NB;
}

void usi_options_default(usi_options_t *o) {
    memset(o, 0, sizeof *o);
    cfg_opt_t t[OPT_NB];
    cfg_defaults(t, opt_table(o, t));
    int cpus = compat_cpu_count();
    o->threads = cpus < 1 ? 1 : cpus > 1024 ? 1024 : cpus;
}

void usi_options_print(const usi_options_t *o, usi_out_t *out) {
    usi_options_t copy = *o;
    cfg_opt_t t[OPT_NB];
    opt_table(&copy, t);
    for (int i = 0; i < OPT_NB; i++) {
        const cfg_opt_t *c = &t[i];
        char v[CFG_STRING_MAX + 8];
        cfg_value_string(c, v, sizeof v);
        if (c->type == CFG_TYPE_INT) {
            usi_out_line(out, "option name %s type spin default %s min %.0f max %.0f", c->name, v, c->min, c->max);
        } else if (c->type == CFG_TYPE_BOOL) {
            usi_out_line(out, "option name %s type check default %s", c->name, v);
        } else if (c->choices) {
            char vars[256] = "";
            size_t used = 0;
            int w = 0;
            for (int k = 0; cfg_choice(c->choices, k, &w) && used + 1 < sizeof vars; k++) {
                int n = snprintf(vars + used, sizeof vars - used, " var %.*s", w, cfg_choice(c->choices, k, NULL));
                if (n > 0 && (size_t)n < sizeof vars - used) used += (size_t)n;
            }
            usi_out_line(out, "option name %s type combo default %s%s", c->name, v, vars);
        } else {
            usi_out_line(out, "option name %s type string default %s", c->name, *v ? v : "<empty>");
        }
    }
}

int usi_options_set(usi_options_t *o, const char *name, const char *value, const char **canonical, char *err,
                    size_t errlen) {
    cfg_opt_t t[OPT_NB];
    opt_table(o, t);
    const cfg_opt_t *row = cfg_find_nocase(t, OPT_NB, name);
    if (!row) {
        snprintf(err, errlen, "unknown option '%s'", name ? name : "");
        return -1;
    }
    if (canonical) *canonical = row->name;
    if (!value) {
        snprintf(err, errlen, "option '%s': no value given", row->name);
        return -1;
    }
    if (strcmp(value, "<empty>") == 0) value = "";
    return cfg_set(t, OPT_NB, row->name, value, err, errlen) == CFG_OK ? 0 : -1;
}
