/* eval_engine_test.h - what test_eval_engine and test_eval_gpsusi share: a
 * scratch run with one tiny random net registered as cycle 0. */
#ifndef KOMA_TESTS_TOOLS_EVAL_ENGINE_TEST_H
#define KOMA_TESTS_TOOLS_EVAL_ENGINE_TEST_H

#include "engine/encode.h"
#include "match/play.h"
#include "nn/net.h"
#include "nn/weights.h"
#include "tools_test.h"

/* models/0000.safetensors in the scratch dir: a 1x8 net from seed, registered as cycle 0. */
static inline void eval_engine_run(uint64_t seed) {
    char err[512];
    KOMA_ASSERT(compat_mkdir_p(t_path("models"), err, sizeof err) == 0);
    db_t *db = NULL;
    KOMA_ASSERT(db_open(t_path("koma.db"), 0, &db, err, sizeof err) == DB_OK);
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t nc = {1, 8, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = nn_net_new(be, &nc, seed, err, sizeof err);
    KOMA_ASSERT(net);
    KOMA_ASSERT(nn_weights_save(net, NULL, t_path("models/0000.safetensors"), err, sizeof err) == 0);
    nn_net_free(net);
    nn_backend_free(be);
    db_model_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.path, sizeof m.path, "models/0000.safetensors");
    strcpy(m.xxh3, "0123456789abcdef");
    strcpy(m.arch, "1x8");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    KOMA_ASSERT(db_model_insert(db, &m) == DB_OK);
    db_close(db);
}

#endif
