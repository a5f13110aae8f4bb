/* options.c - USI options: table, announcement, setoption (see options.h). */
#include "usi/options.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/err.h"
#include "mcts/mcts.h"

/* The one table: a row per option (config/config.h). The USI type follows
 * from the row: numbers with a range are spins, booleans checks, rows with
 * allowed words combos, the rest strings. */
enum { OPT_NB = 25 };

static int opt_table(usi_options_t *o, cfg_opt_t *t) {
    const cfg_opt_t rows[OPT_NB] = {
        {"Net", CFG_TYPE_PATH, o->net, 1, 0,
         "weights file (.safetensors) or run directory (its newest model); default: the net shipped with Koma; "
         "none: no net, legal moves only (for tests)",
         "", NULL, sizeof o->net},
        {"Backend", CFG_TYPE_STRING, o->backend, 1, 0, "network backend (auto: cuda when a GPU is present)", "auto",
         "cpu|cuda|auto", sizeof o->backend},
        {"Threads", CFG_TYPE_INT, &o->threads, 1, 1024, "cpu backend threads"}, /* default: the CPUs */
        {"BatchSize", CFG_TYPE_INT, &o->batch, 1, 1024, "leaves per network batch", "32"},
        {"NodeLimit", CFG_TYPE_INT, &o->node_limit, 0, INT32_MAX, "visits per move, 0 = time only", "0"},
        {"NetworkDelay", CFG_TYPE_INT, &o->network_delay, -1, 60000,
         "ms of lag kept back on every timed move; -1: a tenth of the move's time, at most 120 (ByoyomiMargin sets "
         "this and NetworkDelay2)",
         "-1"},
        {"NetworkDelay2", CFG_TYPE_INT, &o->network_delay2, -1, 60000,
         "ms of lag kept back when a move uses the clock to its end (byoyomi); -1: a tenth of it, at most 300", "-1"},
        {"MinimumThinkingTime", CFG_TYPE_INT, &o->minimum_ms, 0, 60000, "ms a timed move thinks at least", "0"},
        {"ResignThreshold", CFG_TYPE_DOUBLE, &o->resign, 0, 1, "resign below this win probability, 0 = never", "0"},
        {"USI_Ponder", CFG_TYPE_BOOL, &o->ponder, 1, 0, "ponder (false: no ponder move in bestmove)", "false"},
        {"USI_Hash", CFG_TYPE_INT, &o->hash_mb, 1, 65536, "search tree memory (MiB)", "256"},
        {"MaxPly", CFG_TYPE_INT, &o->max_ply, 0, 100000, "draw after this many moves, 0 = none", "320"},
        {"Search", CFG_TYPE_STRING, o->search, 1, 0, "root selection", "puct", "puct|gumbel", sizeof o->search},
        {"LeafMate", CFG_TYPE_STRING, o->leaf_mate, 1, 0, "mate search at leaves (plies)", "1", "0|1|3",
         sizeof o->leaf_mate},
        {"Contempt", CFG_TYPE_INT, &o->contempt, -500, 500, "a draw counts as 50% minus this per mille for the engine",
         "0"},
        {"MultiPV", CFG_TYPE_INT, &o->multipv, 1, 32, "info lines for the most visited root moves", "1"},
        {"DfpnNodes", CFG_TYPE_INT, &o->dfpn_nodes, 0, INT32_MAX,
         "df-pn mate search nodes beside each search (its own thread); a proven mate is played; 0 = off", "200000"},
        {"DfpnHash", CFG_TYPE_INT, &o->dfpn_hash_mb, 1, 65536, "df-pn table memory (MiB), go mate and beside the search",
         "32"},
        {"EnteringKingRule", CFG_TYPE_STRING, o->entering_king, 1, 0,
         "declare a win by the CSA 27-point rule, the 24-point rule (31 points: wins only), or never", "CSARule27",
         "CSARule27|CSARule24|NoEnteringKing", sizeof o->entering_king},
        /* lc0's moves-left options (names, ranges); defaults: mcts_params_default */
        {"MovesLeftMaxEffect", CFG_TYPE_DOUBLE, &o->ml_max_effect, 0, 1,
         "with a moves-left net: the most the utility that prefers the shorter win and the longer loss adds to Q; "
         "0 = off",
         NULL},
        {"MovesLeftThreshold", CFG_TYPE_DOUBLE, &o->ml_threshold, 0, 1,
         "the moves-left utility applies where |Q| is above this", NULL},
        {"MovesLeftSlope", CFG_TYPE_DOUBLE, &o->ml_slope, 0, 1, "moves-left utility per ply of difference", NULL},
        {"MovesLeftConstantFactor", CFG_TYPE_DOUBLE, &o->ml_constant, -1, 1, "moves-left utility: constant factor",
         NULL},
        {"MovesLeftScaledFactor", CFG_TYPE_DOUBLE, &o->ml_scaled, -2, 2,
         "moves-left utility: factor of the scaled |Q| past the threshold", NULL},
        {"MovesLeftQuadraticFactor", CFG_TYPE_DOUBLE, &o->ml_quadratic, -1, 1,
         "moves-left utility: factor of its square", NULL},
    };
    memcpy(t, rows, sizeof rows);
    return OPT_NB;
}

void usi_options_default(usi_options_t *o) {
    memset(o, 0, sizeof *o);
    mcts_params_t p; /* the moves-left rows' defaults are the search's */
    mcts_params_default(&p);
    o->ml_max_effect = p.ml_max_effect, o->ml_threshold = p.ml_threshold, o->ml_slope = p.ml_slope;
    o->ml_constant = p.ml_constant, o->ml_scaled = p.ml_scaled, o->ml_quadratic = p.ml_quadratic;
    cfg_opt_t t[OPT_NB];
    cfg_defaults(t, opt_table(o, t));
    int cpus = compat_cpu_count();
    o->threads = cpus < 1 ? 1 : cpus > 1024 ? 1024 : cpus;
}

rules_declare_t usi_options_declare_rule(const usi_options_t *o) {
    if (strcmp(o->entering_king, "CSARule24") == 0) return RULES_DECLARE_CSA24;
    if (strcmp(o->entering_king, "NoEnteringKing") == 0) return RULES_DECLARE_NONE;
    return RULES_DECLARE_CSA27;
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
            usi_out_line(out, "option name %s type %s default %s", c->name,
                         c->type == CFG_TYPE_PATH ? "filename" : "string", *v ? v : "<empty>");
        }
    }
}

static bool same_nocase(const char *a, const char *b) {
    if (!a) return false;
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
    return *a == *b;
}

int usi_options_set(usi_options_t *o, const char *name, const char *value, const char **canonical, char *err,
                    size_t errlen) {
    cfg_opt_t t[OPT_NB];
    opt_table(o, t);
    if (same_nocase(name, "ByoyomiMargin")) { /* the old name: the lag on every move, both delays */
        int64_t was = o->network_delay;
        if (usi_options_set(o, "NetworkDelay", value, canonical, err, errlen) != 0) return -1;
        if (usi_options_set(o, "NetworkDelay2", value, NULL, err, errlen) != 0) {
            o->network_delay = was;
            return -1;
        }
        return 0;
    }
    const cfg_opt_t *row = cfg_find_nocase(t, OPT_NB, name);
    if (!row) {
        set_err(err, errlen, "unknown option '%s'", name ? name : "");
        return -1;
    }
    if (canonical) *canonical = row->name;
    if (!value) {
        set_err(err, errlen, "option '%s': no value given", row->name);
        return -1;
    }
    if (strcmp(value, "<empty>") == 0) value = "";
    return cfg_set(t, OPT_NB, row->name, value, err, errlen) == CFG_OK ? 0 : -1;
}

/* One row's USI type and range or words, as `usi` announces them. */
static void row_kind(const cfg_opt_t *c, char *buf, size_t n) {
    if (c->type == CFG_TYPE_INT) snprintf(buf, n, "spin %.0f..%.0f", c->min, c->max);
    else if (c->type == CFG_TYPE_BOOL) snprintf(buf, n, "check");
    else if (c->type == CFG_TYPE_PATH) snprintf(buf, n, "filename");
    else if (c->choices) {
        size_t used = (size_t)snprintf(buf, n, "combo ");
        int w = 0;
        for (int k = 0; cfg_choice(c->choices, k, &w) && used + 2 < n; k++) {
            int m = snprintf(buf + used, n - used, "%s%.*s", k ? "|" : "", w, cfg_choice(c->choices, k, NULL));
            if (m > 0) used += (size_t)m;
        }
    } else if (c->type == CFG_TYPE_DOUBLE) snprintf(buf, n, "string %g..%g", c->min, c->max);
    else snprintf(buf, n, "string");
}

/* Writes text wrapped to lines of at most width characters, each indented. */
static void wrap(FILE *out, const char *text, int indent, int width) {
    const char *p = text;
    while (*p) {
        int room = width - indent, n = (int)strlen(p);
        if (n > room) {
            n = room;
            while (n > 0 && p[n] != ' ') n--;
            if (n == 0) n = room;
        }
        fprintf(out, "%*s%.*s\n", indent, "", n, p);
        p += n;
        while (*p == ' ') p++;
    }
}

void usi_options_help(const usi_options_t *o, FILE *out) {
    usi_options_t copy = *o;
    cfg_opt_t t[OPT_NB];
    opt_table(&copy, t);
    for (int i = 0; i < OPT_NB; i++) {
        char v[CFG_STRING_MAX + 8], kind[128];
        cfg_value_string(&t[i], v, sizeof v);
        row_kind(&t[i], kind, sizeof kind);
        char line[CFG_STRING_MAX + 256];
        int n = snprintf(line, sizeof line, "  %-19s %-30s default %s", t[i].name, kind, v[0] ? v : "<empty>");
        if (n <= 80) {
            fprintf(out, "%s\n", line);
        } else { /* a long default (the shipped net's path) on lines of its own */
            fprintf(out, "  %-19s %s\n", t[i].name, kind);
            snprintf(line, sizeof line, "default %s", v);
            wrap(out, line, 6, 78);
        }
        if (t[i].help) wrap(out, t[i].help, 6, 78);
    }
}
