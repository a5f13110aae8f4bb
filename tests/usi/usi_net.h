/* usi_net.h - a random net for the USI tests that run koma with one
 * (blocks x channels, ReLU, this build's features; seed fixes its weights). */
#ifndef KOMA_TESTS_USI_NET_H
#define KOMA_TESTS_USI_NET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/encode.h"
#include "nn/net.h"
#include "nn/weights.h"

static inline bool usi_write_net(const char *path, int blocks, int channels, uint64_t seed) {
    char err[512];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t c = {blocks, channels, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = nn_net_new(be, &c, seed, err, sizeof err);
    bool ok = net && nn_weights_save(net, NULL, path, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "write_net %s: %s\n", path, err);
    nn_net_free(net);
    nn_backend_free(be);
    return ok;
}

#endif
