/* test_usi_moves_left.c - lc0's moves-left options in the real koma:
 *   - the six MovesLeft* options are announced with lc0's defaults (the
 *     search's, mcts_params_default) and listed by `koma --help`;
 *   - setoption takes a value in range silently and refuses one out of range
 *     (the old value stays);
 *   - a random net with the moves-left head (2x16m, its value head biased
 *     so that every position looks won for the side to move: |Q| passes the
 *     threshold and the utility is at work) loads, names its architecture,
 *     and searches with the utility on and off: a legal bestmove, no Error.
 */
#include "usi_test.h"

#include "compat/compat.h"
#include "engine/encode.h"
#include "nn/net.h"
#include "nn/weights.h"

static usi_proc_t P;
static pos_t *pos;
static char txt[16];

static bool write_ml_net(const char *path) {
    char err[512];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t c = {2, 16, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    c.heads = NN_HEAD_MOVES_LEFT;
    nn_net_t *net = nn_net_new(be, &c, 5, err, sizeof err);
    bool ok = net != NULL;
    int32_t vb = ok ? nn_net_tensor_find(net, "value.fc2.bias") : -1, mb = ok ? nn_net_tensor_find(net, "moves_left.fc2.bias") : -1;
    if (vb >= 0) nn_net_tensor_data(net, vb)[0] = 6.0f; /* W: the side to move wins */
    if (mb >= 0) nn_net_tensor_data(net, mb)[0] = 2.0f; /* about 40 plies left */
    ok = ok && vb >= 0 && mb >= 0 && nn_weights_save(net, NULL, path, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "write_ml_net %s: %s (value bias %d, moves-left bias %d)\n", path, err, vb, mb);
    nn_net_free(net);
    nn_backend_free(be);
    return ok;
}

/* Sends a setoption and an isready; the lines between them. */
static int set_sync(const char *cmd, int *end) {
    int from = P.mark;
    proc_send(&P, "%s", cmd);
    proc_send(&P, "isready");
    proc_expect(&P, "readyok", USI_WAIT_MS);
    *end = P.mark;
    return from;
}

static void go_legal(const char *what) {
    proc_send(&P, "position startpos moves 7g7f 3c3d");
    int from = P.mark;
    proc_send(&P, "go nodes 300");
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    play_moves(pos, "startpos", "7g7f 3c3d");
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "%s: %s", what, bm ? bm : "-");
    CHECKF(!proc_find(&P, from, P.mark, "info string Error"), "%s: an error", what);
}

int main(void) {
    watchdog(170);
    pos = malloc(sizeof *pos);
    const char *dir = t_scratch("usi_moves_left");
    char net[600];
    snprintf(net, sizeof net, "%s/ml.safetensors", dir);
    CHECKF(write_ml_net(net), "net written");

    CHECKF(proc_start(&P, NULL), "start");
    CHECKF(proc_handshake(&P), "handshake");
    static const char *const announced[] = {
        "option name MovesLeftMaxEffect type string default 0.0345",
        "option name MovesLeftThreshold type string default 0.8",
        "option name MovesLeftSlope type string default 0.0027",
        "option name MovesLeftConstantFactor type string default 0",
        "option name MovesLeftScaledFactor type string default 1.6521",
        "option name MovesLeftQuadraticFactor type string default -0.6521",
    };
    for (int i = 0; i < 6; i++) CHECKF(proc_find(&P, 0, P.mark, announced[i]), "announced: %s", announced[i]);

    int end, from = set_sync("setoption name MovesLeftMaxEffect value 0", &end);
    CHECKF(!proc_find(&P, from, end, "info string setoption"), "MovesLeftMaxEffect 0 accepted silently");
    from = set_sync("setoption name MovesLeftMaxEffect value 1.5", &end);
    const char *r = proc_find(&P, from, end, "info string setoption");
    CHECKF(r && strstr(r, "MovesLeftMaxEffect"), "MovesLeftMaxEffect 1.5 refused: %s", r ? r : "(nothing said)");
    from = set_sync("setoption name movesleftthreshold value -0.1", &end);
    r = proc_find(&P, from, end, "info string setoption");
    CHECKF(r && strstr(r, "MovesLeftThreshold"), "MovesLeftThreshold -0.1 refused: %s", r ? r : "(nothing said)");

    /* a net with the head */
    proc_send(&P, "setoption name Backend value cpu");
    proc_send(&P, "setoption name Threads value 1");
    from = set_sync("setoption name MovesLeftMaxEffect value 0.0345", &end);
    CHECKF(!proc_find(&P, from, end, "info string setoption"), "MovesLeftMaxEffect 0.0345 accepted");
    from = P.mark;
    proc_send(&P, "setoption name Net value %s", net);
    proc_send(&P, "isready");
    CHECKF(proc_expect(&P, "readyok", USI_WAIT_MS) != NULL, "readyok with a moves-left net");
    const char *l = proc_find(&P, from, P.mark, "info string net loaded");
    CHECKF(l && strstr(l, "2x16m relu on cpu"), "net loaded: %s", l ? l : "-");
    go_legal("moves-left net, utility on");
    set_sync("setoption name MovesLeftMaxEffect value 0", &end);
    go_legal("moves-left net, utility off");
    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "quit");
    proc_end(&P);

    /* --help lists them */
    const char *help_args[] = {"--help", NULL};
    CHECKF(proc_start_bare(&P, help_args), "start --help");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "--help exits");
    CHECKF(proc_find(&P, 0, P.n_lines, "  MovesLeftMaxEffect") && proc_find(&P, 0, P.n_lines, "  MovesLeftSlope"),
           "--help lists the moves-left options");
    proc_end(&P);
    t_rm_rf(dir);
    free(pos);
    return t_done("test_usi_moves_left");
}
