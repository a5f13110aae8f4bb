/* test_onnx_export.c - onnx-export's models run in a real ONNX runtime (npm's
 * onnxruntime-node, driven by tests/tools/onnx_run.js) give Koma's outputs.
 *
 *   test_onnx_export ONNX_EXPORT [PYTHON3]
 *
 * Nets: random 2x16 relu, 3x16g2 silu (global pooling in block 1) and
 * 10x128g3 relu nets (pooling in blocks 2, 5, 8), each with random
 * batch-norm statistics, scales and biases (so the folding is exercised, not
 * the identity), saved with nn_weights_save, and the shipped
 * nets/koma-default.safetensors (4x32), and a 2x16mo silu net (the moves-left
 * head exported as a fourth output; checked by the checker, its outputs in
 * the runtime as the others'). Positions: every start of
 * tests/data/openings.sfen and the start position, then random playouts from
 * each (a position every third ply), 330 in all. Koma's CPU backend
 * (nn_forward) and ONNX Runtime see the same positions; the largest
 * difference of each head is printed and bounded, per position and head:
 *   |onnx - koma| <= 1e-4 + 2e-5 * (the largest |koma| logit of that row).
 * Why that bound: both sides run float32 with the same folded weights (the
 * exporter folds with the backend's bn_fold) and differ only in the order
 * of the sums (Koma's Winograd F(3x3,3x3) or oneDNN convolutions and BLAS vs
 * ONNX Runtime's MLAS), an error proportional to the size of the
 * activations, which the row's largest logit measures (a small logit of a
 * row with large ones carries the same absolute error). Measured with
 * onnxruntime-node 1.30.0: at most 3.7e-6 of the row's largest logit (1.7e-5
 * absolute on the shipped net, logits up to 20; 5.6e-4 on the 10x128g3 net,
 * logits up to 324). A wrong plane order, hand spreading, fold, pooling,
 * residual, activation or label order gives errors of the size of the
 * logits (swapping the pooled mean and max: 0.3 on logits of about 1).
 * Also: when python3 has the onnx package (Debian's python3-onnx),
 * onnx.checker.check_model(full_check=True) on every file; the tool's
 * refusals (an output not named *.onnx, a directory, a missing input) name
 * the file.
 * Without node or onnxruntime-node the exports, refusals and checker still
 * run (a failure fails the test), then it exits 77 with the reason: the
 * runtime comparison, the point of the test, did not run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/encode.h"
#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "nn/backend.h"
#include "nn/net.h"
#include "nn/weights.h"
#include "tests/tools/tools_test.h"

#define MAX_POS 400
#define ATOL 1e-4
#define RTOL 2e-5

static const char *g_export, *g_python;
static int g_ort; /* onnxruntime-node loads: the outputs are compared */
static char g_script[1024];

typedef struct {
    int32_t n;
    uint8_t packed[MAX_POS][ENC_PACKED_BYTES];
    float hand[MAX_POS][ENC_HAND];
} positions_t;

static void add_pos(positions_t *ps, const pos_t *pos) {
    if (ps->n >= MAX_POS) return;
    encode_position(pos, ps->packed[ps->n], ps->hand[ps->n]);
    ps->n++;
}

/* "startpos moves ..." or an SFEN into pos; 0 or -1. */
static int set_line(pos_t *pos, const char *line) {
    char err[256];
    if (strncmp(line, "startpos", 8) != 0) return sfen_parse_cstr(pos, line, err, sizeof err) == SFEN_OK ? 0 : -1;
    pos_set_startpos(pos);
    const char *p = strstr(line, " moves");
    if (!p) return 0;
    p += 6;
    for (;;) {
        while (*p == ' ') p++;
        if (!*p || *p == '\n' || *p == '\r') return 0;
        const char *q = p;
        while (*q && *q != ' ' && *q != '\n' && *q != '\r') q++;
        move_t m = move_from_usi(pos, p, (size_t)(q - p));
        if (m == MOVE_NONE) return -1;
        pos_do_move(pos, m);
        p = q;
    }
}

/* The start position, every start of openings.sfen, then from each a random
 * playout of up to 110 plies, every third position kept. */
static void make_positions(positions_t *ps) {
    static pos_t starts[16], pos;
    int32_t n_starts = 0;
    pos_set_startpos(&starts[n_starts++]);
    char *text = t_read_file(KOMA_SOURCE_DIR "/tests/data/openings.sfen", NULL);
    for (char *line = strtok(text, "\n"); line && n_starts < 16; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || line[0] == 0) continue;
        CHECKF(set_line(&starts[n_starts], line) == 0, "openings.sfen: cannot read '%s'", line);
        n_starts++;
    }
    free(text);
    CHECKF(n_starts >= 10, "%d starts", (int)n_starts);
    for (int32_t s = 0; s < n_starts; s++) add_pos(ps, &starts[s]);
    uint64_t rng = 12345;
    for (int32_t round = 0; ps->n < 330; round++) {
        pos_copy(&pos, &starts[round % n_starts]);
        for (int32_t ply = 0; ply < 110 && ps->n < 330; ply++) {
            move_list_t list;
            if (movegen_legal(&pos, &list) == 0) break;
            pos_do_move(&pos, list.moves[t_splitmix64(&rng) % (uint64_t)list.n]);
            if (ply % 3 == 2) add_pos(ps, &pos);
        }
    }
}

/* Random batch-norm statistics, scales, biases and pooling weights, so that
 * nothing folds to the identity. */
static void perturb(nn_backend_t *be, nn_net_t *net, uint64_t seed) {
    for (int32_t t = 0; t < nn_net_tensor_count(net); t++) {
        const nn_tensor_info_t *ti = nn_net_tensor(net, t);
        const char *nm = ti->name;
        size_t bytes = sizeof(float) * (size_t)ti->numel;
        float *h = malloc(bytes);
        KOMA_ASSERT(h);
        be->download(be, h, nn_net_tensor_data(net, t), bytes);
        int is_w = ti->ndim == 1 && strstr(nm, "bn") && strstr(nm, ".weight");
        for (int64_t i = 0; i < ti->numel; i++) {
            double u = (double)(t_splitmix64(&seed) >> 11) / 9007199254740992.0; /* [0, 1) */
            if (strstr(nm, "running_var")) h[i] = (float)(0.5 + 1.5 * u);
            else if (strstr(nm, "running_mean")) h[i] = (float)(0.6 * (u - 0.5));
            else if (is_w) h[i] = (float)(0.6 + 0.8 * u);
            else if (strstr(nm, ".bias")) h[i] = (float)(0.4 * (u - 0.5));
            else if (strstr(nm, "gpool.weight")) h[i] = (float)(0.4 * (u - 0.5));
        }
        be->upload(be, nn_net_tensor_data(net, t), h, bytes);
        free(h);
    }
    nn_net_mark_dirty(net);
}

static int write_file(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(a, 1, na, f) == na && fwrite(b, 1, nb, f) == nb;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* Every value of each position's row (w values) within ATOL + RTOL * the
 * row's largest |koma|; prints the largest difference. 1 when within. */
static int compare(const char *what, const char *net, const float *onnx, const float *koma, int32_t N, int32_t w) {
    double maxd = 0, maxref = 0, maxrel = 0;
    int64_t bad = 0, first = -1;
    for (int32_t b = 0; b < N; b++) {
        const float *o = onnx + (int64_t)b * w, *k = koma + (int64_t)b * w;
        double scale = 0;
        for (int32_t i = 0; i < w; i++) scale = fabs(k[i]) > scale ? fabs(k[i]) : scale;
        maxref = scale > maxref ? scale : maxref;
        for (int32_t i = 0; i < w; i++) {
            double d = fabs((double)o[i] - k[i]);
            if (!(d <= maxd)) maxd = d; /* NaN sticks */
            if (scale > 0 && d / scale > maxrel) maxrel = d / scale;
            if (!(d <= ATOL + RTOL * scale)) {
                if (first < 0) first = (int64_t)b * w + i;
                bad++;
            }
        }
    }
    printf("%-11s %-7s max |onnx - koma| %.3g, %.2g of the row's largest |logit| (largest %.3g) over %lld values\n",
           net, what, maxd, maxrel, maxref, (long long)N * w);
    if (bad)
        fprintf(stderr, "%s %s: %lld values off the bound %g + %g * the row's largest |koma|; first [%lld]: onnx %.7g "
                "koma %.7g\n", net, what, (long long)bad, ATOL, RTOL, (long long)first, onnx[first], koma[first]);
    return t_judge(bad == 0);
}

/* Exports net_path, runs it in ONNX Runtime and compares with Koma's CPU forward. */
static void check_net(const char *label, const char *net_path, const positions_t *ps) {
    char err[512], onnx[1024], in[1024], out[1024];
    snprintf(onnx, sizeof onnx, "%s", t_path(label));
    strcat(onnx, ".onnx");
    snprintf(in, sizeof in, "%s.in", t_path(label));
    snprintf(out, sizeof out, "%s.out", t_path(label));
    const char *ex[] = {g_export, net_path, onnx, NULL};
    int ok = t_run(ex) == 0;
    CHECKF(ok, "onnx-export %s", net_path);
    if (!ok) return;
    if (g_python) {
        char code[1400];
        snprintf(code, sizeof code,
                 "import onnx; m = onnx.load('%s'); onnx.checker.check_model(m, full_check=True); "
                 "print('onnx %%s checker: %s ok' %% onnx.__version__)",
                 onnx, label);
        const char *py[] = {g_python, "-c", code, NULL};
        CHECKF(t_run(py) == 0, "onnx.checker on %s", onnx);
    }
    if (!g_ort) return;

    nn_backend_t *be = nn_backend_cpu_new(2);
    nn_net_t *net = be ? nn_weights_load(be, net_path, -1, err, sizeof err) : NULL;
    CHECKF(net != NULL, "%s: %s", net_path, err);
    if (!net) {
        nn_backend_free(be);
        return;
    }
    const nn_net_config_t *cfg = nn_net_config(net);
    int32_t N = ps->n, P = cfg->in_planes, H = cfg->in_hand;
    CHECK(P == ENC_PLANES && H == ENC_HAND);
    float *x = calloc((size_t)N * (P * 81 + H), sizeof(float));
    float *koma = calloc((size_t)N * (2 * NN_POLICY_NB + NN_VALUE_NB), sizeof(float));
    KOMA_ASSERT(x && koma);
    float *kp = koma, *kv = koma + (int64_t)N * NN_POLICY_NB, *kl = kv + (int64_t)N * NN_VALUE_NB;
    float *hand = x + (int64_t)N * P * 81;
    for (int32_t b = 0; b < N; b++) {
        for (int32_t i = 0; i < P * 81; i++) x[(int64_t)b * P * 81 + i] = encode_bit(ps->packed[b], i) ? 1.0f : 0.0f;
        memcpy(hand + (int64_t)b * H, ps->hand[b], sizeof(float) * (size_t)H);
    }
    nn_ctx_t *ctx = nn_ctx_new(net, NULL, 64, err, sizeof err);
    KOMA_ASSERT(ctx);
    for (int32_t b = 0; b < N; b += 64) {
        int32_t n = N - b < 64 ? N - b : 64;
        CHECK(nn_forward(ctx, n, ps->packed[b], ps->hand[b], kp + (int64_t)b * NN_POLICY_NB,
                         kv + (int64_t)b * NN_VALUE_NB, kl + (int64_t)b * NN_POLICY_NB) == 0);
    }
    nn_ctx_free(ctx);
    nn_net_free(net);
    nn_backend_free(be);

    CHECK(write_file(in, x, sizeof(float) * (size_t)N * P * 81, hand, sizeof(float) * (size_t)N * H) == 0);
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", (int)N);
    const char *run[] = {"node", g_script, onnx, in, nbuf, out, NULL};
    ok = t_run(run) == 0;
    CHECKF(ok, "onnx_run.js on %s", onnx);
    if (ok) {
        size_t len = 0;
        char *o = t_read_file(out, &len);
        size_t want = sizeof(float) * (size_t)N * (2 * NN_POLICY_NB + NN_VALUE_NB);
        CHECKF(len == want, "%s: %lu bytes, want %lu", out, (unsigned long)len, (unsigned long)want);
        if (len == want) {
            const float *op = (const float *)o, *ov = op + (int64_t)N * NN_POLICY_NB,
                        *ol = ov + (int64_t)N * NN_VALUE_NB;
            compare("policy", label, op, kp, N, NN_POLICY_NB);
            compare("value", label, ov, kv, N, NN_VALUE_NB);
            compare("legal", label, ol, kl, N, NN_POLICY_NB);
        }
        free(o);
    }
    free(x);
    free(koma);
}

/* A random net of architecture arch and activation a, perturbed, saved to
 * t_path(name); the path in a buffer of its own (t_path's rotate). */
static const char *random_net(const char *name, const char *arch, nn_act_t a, uint64_t seed) {
    static char paths[3][1024];
    static int at;
    char err[512];
    nn_net_config_t cfg = {.act = a, .in_planes = ENC_PLANES, .in_hand = ENC_HAND,
                           .features_version = ENC_FEATURES_VERSION};
    KOMA_ASSERT(nn_net_arch_parse(arch, &cfg) == 0);
    nn_backend_t *be = nn_backend_cpu_new(1);
    nn_net_t *net = nn_net_new(be, &cfg, seed, err, sizeof err);
    KOMA_ASSERT(net);
    perturb(be, net, seed * 7 + 1);
    char *path = paths[at++ % 3];
    snprintf(path, sizeof paths[0], "%s", t_path(name));
    CHECKF(nn_weights_save(net, NULL, path, err, sizeof err) == 0, "%s", err);
    nn_net_free(net);
    nn_backend_free(be);
    return path;
}

/* The tool's usage and refusals: exit status and a message, no file. */
static void check_refusals(const char *net_path) {
    char err[256];
    const char *help[] = {g_export, "--help", NULL};
    int status = -1;
    CHECK(compat_run_io(help, t_path("help.txt"), "", &status, err, sizeof err) == 0 && status == 0);
    char *text = t_read_file(t_path("help.txt"), NULL);
    CHECKF(strstr(text, "usage: onnx-export NET.safetensors OUT.onnx") && strstr(text, "planes (N,68,9,9)") &&
               strstr(text, "value (N,3) win/draw/loss logits"),
           "--help:\n%s", text);
    for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] ? 1 : 0))
        CHECKF(strcspn(l, "\n") <= 80, "--help line over 80 columns: %.*s", (int)strcspn(l, "\n"), l);
    free(text);
    const char *bad_flag[] = {g_export, "--no-such-flag", NULL};
    CHECK(t_run(bad_flag) == 2);
    const char *bad_name[] = {g_export, net_path, t_path("out.safetensors"), NULL};
    CHECK(t_run(bad_name) == 2);
    CHECK(!compat_file_exists(t_path("out.safetensors")));
    const char *missing[] = {g_export, t_path("missing.safetensors"), t_path("x.onnx"), NULL};
    CHECK(t_run(missing) == 1);
    CHECK(!compat_file_exists(t_path("x.onnx")));
    CHECK(compat_mkdir_p(t_path("dir.onnx"), err, sizeof err) == 0); /* data/run.h's run_output_check */
    const char *dir[] = {g_export, net_path, t_path("dir.onnx"), NULL};
    CHECK(t_run(dir) == 1);
    CHECK(compat_is_dir(t_path("dir.onnx")));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_onnx_export ONNX_EXPORT [PYTHON3]\n");
        return 2;
    }
    g_export = argv[1];
    snprintf(g_script, sizeof g_script, "%s/tests/tools/onnx_run.js", KOMA_SOURCE_DIR);
    const char *probe[] = {"node", g_script, "--probe", NULL};
    int st = t_run(probe);
    g_ort = st == 0;
    const char *why =
        st == 77 ? "onnxruntime-node is not installed (see above)" : "node (Node.js) cannot run onnx_run.js here";
    if (argc > 2) {
        const char *py[] = {argv[2], "-c", "import onnx", NULL};
        if (t_run(py) == 0) g_python = argv[2];
        else printf("onnx.checker: not run (python3 has no onnx module: apt-get install python3-onnx)\n");
    }
    t_scratch("onnx_export");
    static positions_t ps;
    make_positions(&ps);
    CHECKF(ps.n == 330, "%d positions", (int)ps.n);
    printf("%d positions (openings.sfen, the start position, random playouts)\n", (int)ps.n);

    const char *relu = random_net("relu2x16.safetensors", "2x16", NN_ACT_RELU, 11);
    const char *silu = random_net("silu3x16g2.safetensors", "3x16g2", NN_ACT_SILU, 12);
    const char *big = random_net("relu10x128g3.safetensors", "10x128g3", NN_ACT_RELU, 13);
    check_refusals(relu);
    check_net("relu2x16", relu, &ps);
    check_net("silu3x16g2", silu, &ps);
    check_net("relu10x128g3", big, &ps);
    check_net("silu2x16mo", random_net("silu2x16mo.safetensors", "2x16mo", NN_ACT_SILU, 14), &ps);
    check_net("shipped", KOMA_SOURCE_DIR "/nets/koma-default.safetensors", &ps);
    int rc = t_done("test_onnx_export");
    if (rc == 0) t_rm_rf(t_dir);
    if (rc == 0 && !g_ort) {
        /* the exports (and the checker) passed, the runtime comparison did not run */
        printf("skip: no comparison in ONNX Runtime: %s\n", why);
        return 77;
    }
    return rc;
}
