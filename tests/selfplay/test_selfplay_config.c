/* test_selfplay_config.c - selfplay's flags and configs/:
 *   - the defaults are the flag rows' own; every key of configs/cpu.ini and
 *     configs/gpu.ini changes one (no default is written twice);
 *   - configs/gpu.ini parses and is GPU-sized (cuda, >= 10x128, >= 400
 *     visits, max batch 512, 2-4 streams, many games in flight);
 *   - the evaluation flags: on by default (every cycle, a short CPU match),
 *     GPU-sized in gpu.ini, 0 turns it off;
 *   - bad values are refused with the flag's name; the command line wins
 *     over a file;
 *   - the translation into mcts_params_t and the server configuration.
 */
#include "sp_test.h"

#include "selfplay/config.h"
#include "selfplay/driver.h"

static sp_config_t g_cfg;
static train_config_t g_tcfg;
static cfg_opt_t g_opts[SP_CONFIG_NFLAGS + TRAIN_CONFIG_NFLAGS];

static int table(void) {
    sp_config_default(&g_cfg);
    g_tcfg = train_config_default_for(TRAIN_PROGRAM_SELFPLAY);
    int n = sp_config_flags(&g_cfg, g_opts, SP_CONFIG_NFLAGS);
    return n + train_config_flags(&g_tcfg, g_opts + n, TRAIN_CONFIG_NFLAGS);
}

static int parse(int argc, char **argv, char *err, size_t errlen) {
    int n = table();
    int rc = cfg_parse(g_opts, n, argc, argv, 1, NULL, 0, NULL, "", stdout, err, errlen);
    if (rc == CFG_OK) rc = train_config_check(&g_tcfg, err, errlen);
    if (rc == CFG_OK) rc = sp_config_check(&g_cfg, err, errlen);
    return rc;
}

/* Every key of a file in configs/ changes a default: a restated default
 * would be a second place to keep it (the rows of the flag tables are the
 * one place). Each key is applied alone to fresh defaults and must change
 * the dump. */
static int restated_defaults(const char *path) {
    int restated = 0;
    char err[1024];
    size_t len = 0;
    char *text = compat_read_file(path, &len, err, sizeof err);
    CHECKF(text != NULL, "%s", err);
    int n = table();
    CHECKF(cfg_load_file(g_opts, n, path, err, sizeof err) == CFG_OK, "%s", err);
    int line = 0, keys = 0;
    for (char *p = text; text && *p; line++) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        char key[80], value[600];
        if (sscanf(p, " %79[^ =;] = %599[^\r\n]", key, value) == 2) { /* CRLF on Windows */
            keys++;
            n = table();
            char *def = cfg_dump_string(g_opts, n);
            CHECKF(cfg_set(g_opts, n, key, value, err, sizeof err) == CFG_OK, "%s:%d: %s", path, line + 1, err);
            char *after = cfg_dump_string(g_opts, n);
            if (def && after && strcmp(def, after) == 0) {
                fprintf(stderr, "   %s:%d: '%s = %s' restates the built-in default\n", path, line + 1, key, value);
                restated++;
            }
            free(def);
            free(after);
        }
        p = e ? e + 1 : p + strlen(p);
    }
    fprintf(stderr, "   %s: %d keys, %d of them defaults\n", path, keys, restated);
    free(text);
    return restated;
}

static void test_configs_only_override(void) {
    CHECK(restated_defaults(KOMA_SOURCE_DIR "/configs/cpu.ini") == 0);
    CHECK(restated_defaults(KOMA_SOURCE_DIR "/configs/gpu.ini") == 0);
    /* the check itself: a restated default is caught */
    t_scratch("selfplay_config");
    const char *bad = t_path("restated.ini");
    FILE *f = fopen(bad, "w");
    KOMA_ASSERT(f);
    fprintf(f, "cycles = 11\nvisits = 128\n");
    fclose(f);
    CHECKF(restated_defaults(bad) == 1, "visits = 128 (the default) is reported");
    t_rm_rf(t_dir);
}

/* The defaults are the rows' `def` texts: a bare run's configuration. */
static void test_defaults(void) {
    table();
    CHECK(g_cfg.visits == 128 && g_cfg.visits_fast == 16 && g_cfg.games_per_cycle == 24 && g_cfg.max_ply == 320 &&
          !strcmp(g_cfg.search, "gumbel") && !strcmp(g_cfg.backend, "cpu") && g_cfg.resign_threshold == 0.05 &&
          g_cfg.progress_s == -1 && g_cfg.tree_reuse == 1);
    CHECK(!strcmp(g_tcfg.net, "4x32") && g_tcfg.batch == 64 && g_tcfg.threads == 1);
    train_config_t t = train_config_default();
    CHECK(!strcmp(t.net, "6x64") && t.batch == 128 && t.window_min == 25000 && t.seed == 1 &&
          t.opt.schedule == NN_SCHED_COSINE);
}

static void test_gpu_ini(void) {
    char err[1024];
    char *argv[] = {"selfplay", "--config", KOMA_SOURCE_DIR "/configs/gpu.ini", NULL};
    CHECKF(parse(3, argv, err, sizeof err) == CFG_OK, "gpu.ini: %s", err);
    CHECKF(!strcmp(g_cfg.backend, "cuda") && !strcmp(g_tcfg.backend, "cuda"), "gpu.ini backends %s / %s", g_cfg.backend,
           g_tcfg.backend);
    int32_t b = 0, c = 0;
    CHECKF(nn_net_size_parse(g_tcfg.net, &b, &c) == 0 && b >= 10 && c >= 128, "gpu.ini net %s", g_tcfg.net);
    CHECKF(g_cfg.visits >= 400 && g_cfg.max_batch == 512 && g_cfg.streams >= 2 && g_cfg.streams <= 4,
           "gpu.ini visits %lld, max batch %lld, streams %lld", (long long)g_cfg.visits, (long long)g_cfg.max_batch,
           (long long)g_cfg.streams);
    /* enough leaves in flight to fill batches of 512 on every stream twice */
    int64_t in_flight = g_cfg.threads * g_cfg.games_per_thread * g_cfg.leaves_per_game;
    CHECKF(in_flight >= 2 * g_cfg.max_batch * g_cfg.streams, "gpu.ini: %lld leaves in flight", (long long)in_flight);
    CHECKF((g_cfg.games_per_thread / 2) * g_cfg.leaves_per_game >= 128, "gpu.ini: submissions of %lld leaves",
           (long long)((g_cfg.games_per_thread / 2) * g_cfg.leaves_per_game));
}

static void test_eval_flags(void) {
    char err[1024];
    char *a0[] = {"selfplay", NULL};
    CHECKF(parse(1, a0, err, sizeof err) == CFG_OK, "%s", err);
    CHECKF(g_cfg.eval_every == 1 && g_cfg.eval_games == 8 && g_cfg.eval_visits == 32, "eval defaults %lld / %lld / %lld",
           (long long)g_cfg.eval_every, (long long)g_cfg.eval_games, (long long)g_cfg.eval_visits);
    char *a1[] = {"selfplay", "--config", KOMA_SOURCE_DIR "/configs/gpu.ini", NULL};
    CHECKF(parse(3, a1, err, sizeof err) == CFG_OK, "%s", err);
    CHECKF(g_cfg.eval_every == 1 && g_cfg.eval_games == 40 && g_cfg.eval_visits == 200, "gpu.ini eval %lld / %lld / %lld",
           (long long)g_cfg.eval_every, (long long)g_cfg.eval_games, (long long)g_cfg.eval_visits);
    char *a2[] = {"selfplay", "--eval-every", "0", "--eval-games", "3", "--eval-visits", "5", NULL};
    CHECKF(parse(7, a2, err, sizeof err) == CFG_OK && g_cfg.eval_every == 0 && g_cfg.eval_games == 3 &&
              g_cfg.eval_visits == 5,
           "%s", err);
    char *a3[] = {"selfplay", "--eval-games", "0", NULL};
    CHECKF(parse(3, a3, err, sizeof err) != CFG_OK && strstr(err, "eval-games"), "--eval-games 0: '%s'", err);
    char *a4[] = {"selfplay", "--eval-every", "-1", NULL};
    CHECKF(parse(3, a4, err, sizeof err) != CFG_OK && strstr(err, "eval-every"), "--eval-every -1: '%s'", err);
}

static void test_flags(void) {
    char err[1024];
    char *a1[] = {"selfplay", "--search", "mcts", NULL};
    CHECKF(parse(3, a1, err, sizeof err) != CFG_OK && strstr(err, "search"), "--search mcts: '%s'", err);
    char *a2[] = {"selfplay", "--backend", "tpu", NULL};
    CHECKF(parse(3, a2, err, sizeof err) != CFG_OK && strstr(err, "backend"), "--backend tpu: '%s'", err);
    char *a3[] = {"selfplay", "--full-prob", "1.5", NULL};
    CHECKF(parse(3, a3, err, sizeof err) != CFG_OK && strstr(err, "full-prob"), "--full-prob 1.5: '%s'", err);
    char *a4[] = {"selfplay", "--net", "6y64", NULL};
    CHECKF(parse(3, a4, err, sizeof err) != CFG_OK && strstr(err, "net"), "--net 6y64: '%s'", err);
    /* the command line wins over the file; negative values parse */
    char *a5[] = {"selfplay", "--visits", "99", "--config", KOMA_SOURCE_DIR "/configs/gpu.ini", "--resign-threshold",
                  "0.125", "--no-tree-reuse", "--search", "puct", "--progress", "-1", NULL};
    CHECKF(parse(12, a5, err, sizeof err) == CFG_OK, "%s", err);
    CHECKF(g_cfg.visits == 99 && g_cfg.resign_threshold == 0.125 && !g_cfg.tree_reuse && !strcmp(g_cfg.backend, "cuda") &&
               g_cfg.progress_s == -1,
           "visits %lld threshold %g reuse %d backend %s progress %g", (long long)g_cfg.visits, g_cfg.resign_threshold,
           g_cfg.tree_reuse, g_cfg.backend, g_cfg.progress_s);

    mcts_params_t p;
    sp_config_mcts(&g_cfg, 5, &p);
    CHECKF(p.root_mode == MCTS_ROOT_PUCT && p.visits_full == 99 && p.visits_fast == (int32_t)g_cfg.visits_fast &&
              fabsf(p.full_prob - (float)g_cfg.full_prob) < 1e-6f && p.noise && p.move_temp_plies == 0 &&
              p.max_ply == (int32_t)g_cfg.max_ply && p.node_limit >= 2 * 99,
           "mcts params: mode %d visits %d/%d noise %d temp plies %d nodes %d", p.root_mode, p.visits_full,
           p.visits_fast, p.noise, p.move_temp_plies, p.node_limit);
    nn_server_config_t sc = sp_config_server(&g_cfg);
    int64_t half = (g_cfg.games_per_thread + 1) / 2 * g_cfg.leaves_per_game;
    CHECKF(sc.queue_positions >= 2 * g_cfg.threads * half && sc.max_batch == 512 && !strcmp(sc.backend, "cuda") &&
              sc.expect_features_version == ENC_FEATURES_VERSION,
           "server: queue %d for %lld threads x 2 x %lld", sc.queue_positions, (long long)g_cfg.threads,
           (long long)half);
}

/* Errors a user sees from `selfplay` flags say what is wrong with the value. */
static void test_flag_errors(void) {
    char err[1024];
    char *a1[] = {"selfplay", "--net", "100x1000"};
    CHECKF(parse(3, a1, err, sizeof err) == CFG_ERROR && strstr(err, "100x1000") && strstr(err, "blocks must be 1..64"),
           "--net 100x1000: %s", err);
    char *a2[] = {"selfplay", "--net", "6x5000"};
    CHECKF(parse(3, a2, err, sizeof err) == CFG_ERROR && strstr(err, "channels must be 1..1024"), "--net 6x5000: %s",
           err);
    char *a3[] = {"selfplay", "--net", "6by64"};
    CHECKF(parse(3, a3, err, sizeof err) == CFG_ERROR && strstr(err, "is not BLOCKSxCHANNELS"), "--net 6by64: %s", err);
    char *a4[] = {"selfplay", "--sync-train", "maybe"};
    CHECKF(parse(3, a4, err, sizeof err) == CFG_ERROR && strstr(err, "sync-train") && strstr(err, "not a boolean"),
           "--sync-train maybe: %s", err);
    /* The resign threshold is a win probability since schema 4 (USI's unit): an old W-L value is refused. */
    char *a4b[] = {"selfplay", "--resign-threshold", "-0.9"};
    CHECKF(parse(3, a4b, err, sizeof err) == CFG_ERROR && strstr(err, "resign-threshold") && strstr(err, "-0.9") &&
               strstr(err, "win probability"),
           "--resign-threshold -0.9: %s", err);
    char *a5[] = {"selfplay", "--config", KOMA_SOURCE_DIR "/configs"};
    CHECKF(parse(3, a5, err, sizeof err) == CFG_ERROR && strstr(err, "is a directory"), "--config configs: %s", err);
}

/* Game slots: --games-per-thread is capped by --games-per-cycle (65536 slots
 * for a 2-game cycle held 65536 trees), and slots whose search trees cannot
 * fit in memory are refused up front, naming the flags and the bytes
 * ("out of memory for 1 x 2 game slots" said neither). */
static void test_slots(void) {
    char err[1024];
    char *a1[] = {"selfplay", "--games-per-thread", "65536", "--games-per-cycle", "2", "--threads", "1", "--visits", "8"};
    CHECKF(parse(9, a1, err, sizeof err) == CFG_OK, "%s", err);
    CHECKF(sp_config_games_per_thread(&g_cfg) == 2, "65536 games per thread for a 2-game cycle: %lld",
           (long long)sp_config_games_per_thread(&g_cfg));
    char *a2[] = {"selfplay", "--games-per-thread", "8", "--games-per-cycle", "24"};
    CHECK(parse(5, a2, err, sizeof err) == CFG_OK && sp_config_games_per_thread(&g_cfg) == 8);
    char *a3[] = {"selfplay", "--games-per-thread", "5", "--games-per-cycle", "1"};
    CHECK(parse(5, a3, err, sizeof err) == CFG_OK && sp_config_games_per_thread(&g_cfg) == 2); /* two halves */

    /* --visits 10000000: trees of 16M nodes and 2G edges, about 25 GiB a game */
    char *a4[] = {"selfplay", "--visits", "10000000", "--threads", "1", "--games-per-thread", "2"};
    int n = table();
    CHECK(cfg_parse(g_opts, n, 7, a4, 1, NULL, 0, NULL, "", stdout, err, sizeof err) == CFG_OK);
    int64_t slot = sp_config_slot_bytes(&g_cfg);
    CHECKF(slot > ((int64_t)20 << 30) && slot < ((int64_t)40 << 30), "slot bytes at 1e7 visits: %lld", (long long)slot);
    int rc = sp_config_check_memory(&g_cfg, (int64_t)8 << 30, "this machine's memory", err, sizeof err);
    fprintf(stderr, "--visits 10000000: %s\n", err);
    CHECKF(rc != 0 && strstr(err, "--visits 10000000 with 2 games at once (--threads 1 x --games-per-thread 2)") &&
               strstr(err, "GiB per game") && strstr(err, "more than the 8.0 GiB of this machine's memory") &&
               strstr(err, "lower --visits"),
           "--visits 10000000: %s", err);
    if (sp_machine_memory() > 0 && sp_machine_memory() < ((int64_t)50 << 30)) { /* the real check, where it applies */
        CHECKF(sp_config_check(&g_cfg, err, sizeof err) != 0 && strstr(err, "--visits 10000000"), "%s", err);
    }
    char *a5[] = {"selfplay", "--visits-fast", "10000000", "--visits", "64", "--threads", "1"};
    n = table();
    CHECK(cfg_parse(g_opts, n, 7, a5, 1, NULL, 0, NULL, "", stdout, err, sizeof err) == CFG_OK);
    CHECKF(sp_config_check_memory(&g_cfg, (int64_t)8 << 30, "x", err, sizeof err) != 0 &&
               strstr(err, "--visits-fast 10000000") && strstr(err, "lower --visits-fast"),
           "--visits-fast 10000000: %s", err);
    /* the defaults and gpu.ini fit their machines */
    table();
    CHECKF(sp_config_check_memory(&g_cfg, (int64_t)1 << 30, "1 GiB", err, sizeof err) == 0, "defaults: %s", err);
    char *a6[] = {"selfplay", "--config", KOMA_SOURCE_DIR "/configs/gpu.ini"};
    n = table();
    CHECK(cfg_parse(g_opts, n, 3, a6, 1, NULL, 0, NULL, "", stdout, err, sizeof err) == CFG_OK);
    CHECKF(sp_config_check_memory(&g_cfg, (int64_t)32 << 30, "32 GiB", err, sizeof err) == 0, "gpu.ini: %s", err);
}

/* --help at 80 columns (not a terminal): every line fits, the texts start in
 * one column, and allowed words the help already gives are not repeated
 * ("0, 1 or 3: 0, 1 or 3"). */
static void test_help(void) {
    int n = table();
    const char *path = KOMA_TEST_TMP "/selfplay_help.txt";
    FILE *f = fopen(path, "wb"); /* binary: no CR before each newline on Windows */
    KOMA_ASSERT(f);
    cfg_print_help(g_opts, n, "usage: selfplay [flags]", f);
    fclose(f);
    char err[256];
    size_t len = 0;
    char *text = compat_read_file(path, &len, err, sizeof err);
    KOMA_ASSERT(text);
    int longest = 0, lines = 0, col = -1, misaligned = 0;
    for (char *p = text; *p;) {
        char *e = strchr(p, '\n');
        int l = e ? (int)(e - p) : (int)strlen(p);
        if (l > longest) longest = l;
        if (!strncmp(p, "  --", 4)) { /* a row: its text after two spaces at least */
            int k = 2;
            while (k < l && p[k] != ' ') k++; /* --name */
            k++;
            while (k < l && p[k] != ' ') k++; /* TYPE */
            if (k < l) {
                while (k < l && p[k] == ' ') k++;
                if (col < 0) col = k;
                else if (k != col) misaligned++;
            }
        } else if (l > 0 && p[0] == ' ' && col > 0) { /* a continuation line */
            int k = 0;
            while (k < l && p[k] == ' ') k++;
            if (k != col) misaligned++;
        }
        lines++;
        p = e ? e + 1 : p + l;
    }
    fprintf(stderr, "--help: %d lines, the longest %d characters, texts at column %d, %d misaligned\n", lines, longest,
            col, misaligned);
    CHECKF(longest <= 80, "--help has a line of %d characters", longest);
    CHECKF(misaligned == 0 && col > 20, "--help: %d lines off the column %d", misaligned, col);
    CHECKF(strstr(text, "0, 1 or 3: 0, 1 or 3") == NULL && strstr(text, "0, 1 or 3") != NULL, "leaf-mate's help");
    CHECKF(strstr(text, "(cpu, cuda or auto; default: cpu)") != NULL, "backend's help lists its words");
    free(text);
    compat_remove_file(path);
}

int main(void) {
    test_defaults();
    test_slots();
    test_help();
    test_configs_only_override();
    test_flag_errors();
    test_gpu_ini();
    test_eval_flags();
    test_flags();
    return t_done("test_selfplay_config");
}
