/* test_usi_match_koma.c - usi-match with Koma's own engine on both sides:
 * two games, nodes-limited (NodeLimit), engine1 with a tiny random net
 * written here, engine2 with no net (uniform policy). Every move must replay
 * legally, the games end by the rules (koma never loses on time or by an
 * illegal move), and the match is recorded with engine1 as a model of the
 * run. Built only when the `koma` target exists.
 *
 *   test_usi_match_koma USI_MATCH KOMA
 */
#include "engine/encode.h"
#include "match_check.h"
#include "nn/net.h"
#include "nn/weights.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_usi_match_koma USI_MATCH KOMA\n");
        return 2;
    }
    t_scratch("test_usi_match_koma");
    char err[DB_ERR_MAX];
    /* A tiny net, registered as the run's cycle 0. */
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t nc = {1, 8, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = nn_net_new(be, &nc, 5, err, sizeof err);
    KOMA_ASSERT(net);
    KOMA_ASSERT(compat_mkdir_p(t_path("models"), err, sizeof err) == 0);
    KOMA_ASSERT(nn_weights_save(net, NULL, t_path("models/cycle-0000.safetensors"), err, sizeof err) == 0);
    nn_net_free(net);
    nn_backend_free(be);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(t_path("koma.db"), 0, &db, err, sizeof err) == DB_OK);
    db_model_t m;
    memset(&m, 0, sizeof m);
    strcpy(m.path, "models/cycle-0000.safetensors");
    strcpy(m.xxh3, "0123456789abcdef");
    strcpy(m.arch, "1x8");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    KOMA_ASSERT(db_model_insert(db, &m) == DB_OK);
    db_close(db);

    char e1[1200], e2[1200], net_opt[1000];
    snprintf(e1, sizeof e1, "\"%s\"", argv[2]);
    snprintf(e2, sizeof e2, "\"%s\"", argv[2]);
    snprintf(net_opt, sizeof net_opt, "Net=%s", t_path("models/cycle-0000.safetensors"));
    const char *run[] = {argv[1], "--engine1", e1, "--engine2", e2, "--option1", net_opt, "--option1", "NodeLimit=24",
                         "--option1", "Threads=1", "--option1", "Backend=cpu", "--option1", "USI_Hash=16",
                         "--option2", "Net=none", "--option2", "NodeLimit=24", "--option2", "Threads=1", "--option2", "Backend=cpu",
                         "--option2", "USI_Hash=16", "--name2", "koma-uniform", "--games", "2", "--byoyomi", "60000",
                         "--max-ply", "120", "--run", t_dir, "--cycle1", "0", "--csa-dir", t_path("csa"),
                         "--engine-stderr", t_path("koma.stderr"), NULL};
    CHECK(t_run(run) == 0);
    mc_games_t g;
    CHECK(mc_read(t_path("koma.db"), &g) == 2);
    for (int i = 0; i < g.n; i++) {
        fprintf(stderr, "game %d: black %s, result %d, %s after %d plies: %s\n", i + 1, g.black[i], g.result[i],
                g.reason[i], g.plies[i], g.detail[i]);
        mc_check_game(&g, i, 120);
        CHECK(strcmp(g.reason[i], "time") != 0 && strcmp(g.reason[i], "illegal_move") != 0);
    }
    for (int gi = 1; gi <= 2; gi++) mc_check_csa(t_path("csa"), gi, &g);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT wins + draws + losses FROM matches") == 2);
    CHECK(t_sql_int(t_path("koma.db"), "SELECT count(*) FROM match_games WHERE match_id = (SELECT id FROM matches)") == 2);
    int rc = t_done("test_usi_match_koma");
    if (rc == 0) t_rm_rf(t_dir);
    return rc;
}
