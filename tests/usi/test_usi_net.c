/* test_usi_net.c - koma with real (random-weight) 6x64 nets on the cpu
 * backend: Net as a file, as a run directory without and with koma.db (its
 * latest model, reloaded when a newer one is registered), a damaged newest
 * model and a newest model that verifies but holds a NaN or a negative
 * running variance (the newest one that loads, said so), PUCT and Gumbel
 * searches, a clock with a net, and the nps of `go nodes 256` (printed). */
#include "usi_test.h"
#include "usi_net.h"

#include <math.h>

#include "compat/compat.h"
#include "data/db.h"
#include "engine/encode.h"
#include "nn/net.h"
#include "nn/safetensors.h"
#include "nn/weights.h"

static usi_proc_t P;
static pos_t *pos;
static char txt[16];
static const char *dir; /* the scratch directory */

static bool write_net(const char *path, uint64_t seed) { return usi_write_net(path, 6, 64, seed); }

/* A net whose file is valid (checksums of its bytes) but whose tensor
 * `name` holds v at index j: NaN, or a negative running variance. */
static bool write_bad_net(const char *path, uint64_t seed, const char *name, int64_t j, float v) {
    char err[512];
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_config_t c = {6, 64, NN_ACT_RELU, ENC_PLANES, ENC_HAND, ENC_FEATURES_VERSION};
    nn_net_t *net = nn_net_new(be, &c, seed, err, sizeof err);
    st_writer_t *w = st_writer_new();
    bool ok = net && w, hit = false;
    for (int32_t i = 0; ok && i < nn_net_tensor_count(net); i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        float *d = nn_net_tensor_data(net, i); /* host memory on the CPU backend */
        if (strcmp(t->name, name) == 0) d[j] = v, hit = true;
        ok = st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, t->shape, d) == 0;
    }
    char b[32];
    const char *meta[][2] = {{"koma.kind", "weights"}, {"koma.version", "1"}, {"koma.net", "6x64"},
                             {"koma.activation", "relu"}, {"koma.features_version", b}, {"koma.in_planes", NULL},
                             {"koma.in_hand", NULL}};
    char planes[16], hand[16];
    snprintf(b, sizeof b, "%d", (int)ENC_FEATURES_VERSION);
    snprintf(planes, sizeof planes, "%d", (int)ENC_PLANES);
    snprintf(hand, sizeof hand, "%d", (int)ENC_HAND);
    meta[5][1] = planes, meta[6][1] = hand;
    for (int k = 0; ok && k < 7; k++) ok = st_writer_meta(w, meta[k][0], meta[k][1]) == 0;
    ok = ok && hit && st_writer_write(w, path, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "write_bad_net %s: %s\n", path, err);
    st_writer_free(w);
    nn_net_free(net);
    nn_backend_free(be);
    return ok;
}

static bool register_model(const char *run, int cycle, const char *rel) {
    char path[600], err[DB_ERR_MAX];
    snprintf(path, sizeof path, "%s/koma.db", run);
    db_t *db = NULL;
    if (db_open(path, 0, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "%s\n", err);
        return false;
    }
    db_model_t m;
    memset(&m, 0, sizeof m);
    m.cycle = cycle;
    m.features_version = ENC_FEATURES_VERSION;
    snprintf(m.path, sizeof m.path, "%s", rel);
    char file[700];
    uint64_t h = 0;
    int64_t bytes = 0;
    snprintf(file, sizeof file, "%s/%s", run, rel);
    if (db_file_xxh3(file, &h, &bytes, err, sizeof err) != 0) fprintf(stderr, "%s\n", err);
    snprintf(m.xxh3, sizeof m.xxh3, "%016llx", (unsigned long long)h);
    snprintf(m.arch, sizeof m.arch, "resnet6x64-relu");
    m.loss_policy = m.loss_value = m.loss_legal = m.loss_total = NAN;
    db_status_t st = db_model_insert(db, &m);
    if (st != DB_OK) fprintf(stderr, "%s\n", db_errmsg(db));
    db_close(db);
    return st == DB_OK;
}

/* setoption Net, isready; returns the "net loaded" line (or NULL). */
static const char *load(const char *net) {
    int from = P.mark;
    proc_send(&P, "setoption name Net value %s", net);
    proc_send(&P, "isready");
    proc_expect(&P, "readyok", USI_WAIT_MS);
    const char *l = proc_find(&P, from, P.mark, "info string net loaded");
    return l;
}

static const char *go_legal(const char *moves, const char *go, long long *dt) {
    proc_send(&P, "position startpos moves %s", moves);
    long long t0 = now_ms();
    proc_send(&P, "%s", go);
    const char *bm = proc_expect(&P, "bestmove ", USI_WAIT_MS);
    if (dt) *dt = now_ms() - t0;
    play_moves(pos, "startpos", moves);
    CHECKF(bestmove_of(pos, bm, txt, sizeof txt) != MOVE_NONE, "'%s' after '%s': %s", go, moves, bm ? bm : "-");
    return P.mark >= 2 ? P.lines[P.mark - 2] : NULL; /* the last info line */
}

int main(void) {
    watchdog(170);
    pos = malloc(sizeof *pos);
    char err[256];
    dir = t_scratch("usi_net");
    char models[600], f0[700], f1[700], f2[700], run2[600], run2_models[700];
    snprintf(models, sizeof models, "%s/run/models", dir);
    snprintf(run2, sizeof run2, "%s/run2", dir);
    snprintf(run2_models, sizeof run2_models, "%s/models", run2);
    CHECKF(compat_mkdir_p(models, err, sizeof err) == 0 && compat_mkdir_p(run2_models, err, sizeof err) == 0, "%s",
           err);
    snprintf(f0, sizeof f0, "%s/0000.safetensors", models);
    snprintf(f1, sizeof f1, "%s/0001.safetensors", models);
    CHECKF(write_net(f0, 1) && write_net(f1, 2), "nets written");

    CHECKF(proc_start(&P, NULL), "start");
    CHECKF(proc_handshake(&P), "handshake");
    proc_send(&P, "setoption name Backend value cpu");
    proc_send(&P, "setoption name Threads value 2");
    proc_send(&P, "setoption name BatchSize value 32");

    /* a file */
    const char *l = load(f0);
    CHECKF(l && strstr(l, "6x64 relu on cpu") && strstr(l, "0000.safetensors"), "file: %s", l ? l : "-");
    const char *info = go_legal("7g7f", "go nodes 256", NULL);
    CHECKF(info && strstr(info, " nodes 256 "), "256 visits: %s", info ? info : "-");
    if (info && strstr(info, " nps ")) printf("6x64 cpu, Threads 2, BatchSize 32, go nodes 256: %s\n", info);

    /* a run directory without koma.db: the last model by name */
    char run[600];
    snprintf(run, sizeof run, "%s/run", dir);
    l = load(run);
    CHECKF(l && strstr(l, "0001.safetensors"), "run dir: %s", l ? l : "-");
    /* the same net again: nothing reloaded */
    int from = P.mark;
    proc_send(&P, "isready");
    proc_expect(&P, "readyok", USI_WAIT_MS);
    CHECKF(!proc_find(&P, from, P.mark, "info string net loaded"), "unchanged net not reloaded");
    /* a newer model appears: the next isready takes it */
    snprintf(f2, sizeof f2, "%s/0002.safetensors", models);
    CHECKF(write_net(f2, 3), "third net");
    from = P.mark;
    proc_send(&P, "isready");
    proc_expect(&P, "readyok", USI_WAIT_MS);
    l = proc_find(&P, from, P.mark, "info string net loaded");
    CHECKF(l && strstr(l, "0002.safetensors"), "newer model picked up: %s", l ? l : "-");
    go_legal("2g2f 8c8d", "go btime 0 wtime 0 byoyomi 1000", NULL);

    /* a run directory with koma.db: the latest registered model, not the newest file */
    char r0[800], r1[800];
    snprintf(r0, sizeof r0, "%s/0000.safetensors", run2_models);
    snprintf(r1, sizeof r1, "%s/0001.safetensors", run2_models);
    CHECKF(write_net(r0, 4) && write_net(r1, 5), "run2 nets");
    CHECKF(register_model(run2, 0, "models/0000.safetensors"), "registered cycle 0");
    l = load(run2);
    CHECKF(l && strstr(l, "run2/models/0000.safetensors"), "koma.db's latest: %s", l ? l : "-");
    CHECKF(register_model(run2, 1, "models/0001.safetensors"), "registered cycle 1");
    from = P.mark;
    proc_send(&P, "isready");
    proc_expect(&P, "readyok", USI_WAIT_MS);
    l = proc_find(&P, from, P.mark, "info string net loaded");
    CHECKF(l && strstr(l, "run2/models/0001.safetensors"), "cycle 1 picked up: %s", l ? l : "-");
    /* Gumbel with a net, and a timed search */
    proc_send(&P, "setoption name Search value gumbel");
    go_legal("7g7f 3c3d", "go nodes 128", NULL);
    long long dt = 0;
    go_legal("7g7f 3c3d 2g2f", "go btime 0 wtime 0 byoyomi 1000", &dt);
    CHECKF(dt < 1000, "gumbel byoyomi 1000 answered in %lld ms", dt);
    proc_send(&P, "setoption name Search value puct");
    dt = 0;
    go_legal("7g7f 3c3d", "go btime 2000 wtime 2000 byoyomi 0", &dt);
    CHECKF(dt < 1000, "2 s sudden death with a net: %lld ms", dt);

    /* a damaged newest model of a run: the one before it, said so */
    CHECKF(compat_write_file_durable(r1, "damaged", 7, err, sizeof err) == 0, "%s", err);
    from = P.mark;
    proc_send(&P, "usinewgame");
    proc_send(&P, "isready");
    proc_expect(&P, "readyok", USI_WAIT_MS);
    l = proc_find(&P, from, P.mark, "info string Net: ");
    CHECKF(l && strstr(l, "0001.safetensors") && strstr(l, "does not match koma.db") && strstr(l, "cycle 0"),
           "damaged newest model reported: %s", l ? l : "-");
    l = proc_find(&P, from, P.mark, "info string net loaded");
    CHECKF(l && strstr(l, "run2/models/0000.safetensors"), "fell back to cycle 0: %s", l ? l : "-");
    CHECKF(!proc_find(&P, from, P.mark, "info string Error"), "an error where an earlier model loads");
    go_legal("7g7f", "go nodes 32", NULL);

    /* a newest model that verifies (its XXH3 registered) but holds no net:
     * passed over like a damaged one, naming the tensor (it used to be
     * played with a uniform policy and a zero value, or taken as it was) */
    static const struct {
        const char *rel, *tensor, *want;
        int cycle;
        int64_t index;
        float value;
    } bad[] = {
        {"models/0002.safetensors", "blocks.0.bn1.running_var",
         "0002.safetensors: tensor 'blocks.0.bn1.running_var' holds NaN at index 3", 2, 3, NAN},
        {"models/0003.safetensors", "blocks.1.bn2.running_var",
         "0003.safetensors: tensor 'blocks.1.bn2.running_var' holds -0.5 at index 5: a batch-norm running variance", 3,
         5, -0.5f},
    };
    for (int k = 0; k < 2; k++) {
        char p[900];
        snprintf(p, sizeof p, "%s/%s", run2, bad[k].rel);
        CHECKF(write_bad_net(p, 6 + (uint64_t)k, bad[k].tensor, bad[k].index, bad[k].value) &&
                   register_model(run2, bad[k].cycle, bad[k].rel),
               "bad net %d", k);
        from = P.mark;
        proc_send(&P, "usinewgame");
        proc_send(&P, "isready");
        proc_expect(&P, "readyok", USI_WAIT_MS);
        l = proc_find(&P, from, P.mark, "info string Net: ");
        CHECKF(l && strstr(l, bad[k].want) && strstr(l, "cycle 0"), "a newest model with no net: %s", l ? l : "-");
        l = proc_find(&P, from, P.mark, "info string net loaded"); /* cycle 0 stays loaded: no reload, or of it */
        CHECKF(!l || strstr(l, "run2/models/0000.safetensors"), "not cycle 0: %s", l ? l : "-");
        CHECKF(!proc_find(&P, from, P.mark, "info string Error"), "an error where an earlier model loads");
        go_legal("7g7f", "go nodes 32", NULL);
    }

    proc_send(&P, "quit");
    CHECKF(proc_wait_exit(&P, USI_WAIT_MS), "quit");
    proc_end(&P);
    t_rm_rf(dir);
    free(pos);
    return t_done("test_usi_net");
}
