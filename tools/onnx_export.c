/* onnx_export.c - `onnx-export` (installed as koma-onnx-export): a Koma net
 * (nn/weights.h: a run's models/NNNN.safetensors, nets/koma-default.safetensors)
 * as an ONNX model that ONNX Runtime, TensorRT or any ONNX engine can run.
 *
 *   onnx-export NET.safetensors OUT.onnx
 *
 * Owns: the graph (the inference forward of nn/net.c written as ONNX nodes),
 * batch norm folded into the convolutions by the backend's own bn_fold (the
 * weights are bit for bit those Koma's inference runs), and a protobuf writer
 * of the few onnx.proto3 messages it needs (ModelProto, GraphProto,
 * NodeProto, AttributeProto, TensorProto, ValueInfoProto).
 * Does not own: the net's definition (nn/net.h), the encoding (engine/encode.h).
 *
 * The model (opset 17, IR version 8; the batch dimension is "N", dynamic):
 *   input  "planes" float (N, 68, 9, 9): the feature planes of engine/encode.h
 *          expanded to 0/1 (plane p, view square s = bit p*81 + s of
 *          encode_position's packed bits; view square s = (file - 1) * 9 +
 *          (rank - 1) as engine/types.h, so tensor row = file - 1, column =
 *          rank - 1, in the side to move's view)
 *   input  "hand"   float (N, 14): encode_position's hand values, as they are
 *          (the net spreads each over a 9x9 plane after the 68 planes)
 *   output "policy" float (N, 2187): logits, label = direction * 81 + view
 *          square (engine/encode.h); softmax over the legal labels
 *   output "value"  float (N, 3): win/draw/loss LOGITS from the side to
 *          move's view (softmax gives the probabilities)
 *   output "legal"  float (N, 2187): the legal-move head's logits (every Koma
 *          net has one; sigmoid > 0.5 = predicted legal)
 *   output "moves_left" float (N, 1): a net with the moves-left head ("4x32m"):
 *          plies until the game ends, >= 0 (20 * Relu(raw), nn/net.h); the
 *          opponent-reply head ("o") is training-only and not exported
 * Plain nets ("6x64") and global-pooling nets ("6x64g2": ReduceMean,
 * ReduceMax, Gemm, Unsqueeze, Add) both export; either activation (relu:
 * Relu; silu: x * Sigmoid(x), opset 17 has no SiLU).
 *
 * Errors: a file that nn_weights_load refuses, an output that is not named
 * *.onnx (so a net, shard or database is never replaced), that
 * run_output_check refuses (a run's file, a directory, a FIFO, a missing
 * folder) or that cannot be written; the output is written to a temporary
 * name, fsync'ed and renamed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "compat/version.h"
#include "data/run.h"
#include "nn/backend.h"
#include "nn/net.h"
#include "nn/weights.h"

static const char *g_prog = "onnx-export"; /* the name it was run as (koma-onnx-export installed) */

#define ONNX_OPSET 17
#define ONNX_IR_VERSION 8 /* ONNX 1.12, the first with opset 17 */

/* ---- a protobuf writer (wire format: varints and length-delimited fields) ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} pb_t;

static void pb_raw(pb_t *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(pb_t *b, uint64_t v) {
    uint8_t t[10];
    int n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_raw(b, t, (size_t)n);
}

enum { PB_VARINT = 0, PB_LEN = 2 };
static void pb_tag(pb_t *b, int field, int wire) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire); }
static void pb_int(pb_t *b, int field, int64_t v) {
    pb_tag(b, field, PB_VARINT);
    pb_varint(b, (uint64_t)v); /* negative int64: ten bytes, two's complement */
}
static void pb_bytes(pb_t *b, int field, const void *d, size_t n) {
    pb_tag(b, field, PB_LEN);
    pb_varint(b, n);
    pb_raw(b, d, n);
}
static void pb_str(pb_t *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
/* sub as a nested message in field; frees sub. */
static void pb_msg(pb_t *b, int field, pb_t *sub) {
    if (sub->oom) b->oom = 1;
    pb_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}

/* onnx.proto3 field numbers used here. */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3, MODEL_DOC = 6, MODEL_GRAPH = 7,
    MODEL_OPSET = 8, MODEL_META = 14,
    OPSET_DOMAIN = 1, OPSET_VERSION = 2,
    KV_KEY = 1, KV_VALUE = 2,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_DOC = 10, GRAPH_INPUT = 11, GRAPH_OUTPUT = 12,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP = 4, NODE_ATTR = 5,
    ATTR_NAME = 1, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20,
    ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7,
    TENSOR_DIMS = 1, TENSOR_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW = 9,
    DT_FLOAT = 1, DT_INT64 = 7,
    VI_NAME = 1, VI_TYPE = 2, VI_DOC = 3,
    TYPE_TENSOR = 1, TT_ELEM = 1, TT_SHAPE = 2, SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
};

static void attr_int(pb_t *attrs, const char *name, int64_t v) {
    pb_t a = {0};
    pb_str(&a, ATTR_NAME, name);
    pb_int(&a, ATTR_TYPE, ATTR_TYPE_INT);
    pb_int(&a, ATTR_I, v);
    pb_msg(attrs, NODE_ATTR, &a);
}

static void attr_ints(pb_t *attrs, const char *name, const int64_t *v, int n) {
    pb_t a = {0};
    pb_str(&a, ATTR_NAME, name);
    pb_int(&a, ATTR_TYPE, ATTR_TYPE_INTS);
    for (int i = 0; i < n; i++) pb_int(&a, ATTR_INTS, v[i]);
    pb_msg(attrs, NODE_ATTR, &a);
}

/* ---- the graph ------------------------------------------------------------------- */
typedef struct {
    pb_t nodes; /* GraphProto's node fields */
    pb_t inits; /* its initializer fields */
    int32_t n_nodes;
    nn_backend_t *be;
    nn_net_t *net;
    nn_act_t act;
    int failed; /* a download or fold failed (the backend's error says why) */
} graph_t;

/* A node op(in...) -> out with attrs (NODE_ATTR fields, consumed; NULL: none). */
static void node(graph_t *g, const char *op, const char *out, pb_t *attrs, const char *in0, const char *in1,
                 const char *in2) {
    pb_t n = {0};
    const char *in[3] = {in0, in1, in2};
    for (int i = 0; i < 3; i++)
        if (in[i]) pb_str(&n, NODE_INPUT, in[i]);
    pb_str(&n, NODE_OUTPUT, out);
    char name[96];
    snprintf(name, sizeof name, "%s_%d", op, (int)g->n_nodes++);
    pb_str(&n, NODE_NAME, name);
    pb_str(&n, NODE_OP, op);
    if (attrs) {
        if (attrs->oom) n.oom = 1;
        pb_raw(&n, attrs->p, attrs->n);
        free(attrs->p);
        memset(attrs, 0, sizeof *attrs);
    }
    pb_msg(&g->nodes, GRAPH_NODE, &n);
}

static void init_tensor(graph_t *g, const char *name, int32_t dtype, int ndim, const int64_t *dims,
                        const void *data, size_t bytes) {
    pb_t t = {0};
    for (int i = 0; i < ndim; i++) pb_int(&t, TENSOR_DIMS, dims[i]);
    pb_int(&t, TENSOR_TYPE, dtype);
    pb_str(&t, TENSOR_NAME, name);
    pb_bytes(&t, TENSOR_RAW, data, bytes); /* little-endian, as Koma's own files */
    pb_msg(&g->inits, GRAPH_INIT, &t);
}

static void init_f32(graph_t *g, const char *name, int ndim, const int64_t *dims, const float *data) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    init_tensor(g, name, DT_FLOAT, ndim, dims, data, sizeof(float) * (size_t)n);
}

static void init_i64(graph_t *g, const char *name, int n, const int64_t *v) {
    int64_t dims[1] = {n};
    init_tensor(g, name, DT_INT64, 1, dims, v, sizeof(int64_t) * (size_t)n);
}

/* A tensor of the net, downloaded from the backend (malloc'ed; NULL on failure). */
static float *tensor_host(graph_t *g, const char *name, int64_t *numel) {
    int32_t t = nn_net_tensor_find(g->net, name);
    if (t < 0) {
        fprintf(stderr, "%s: the net has no tensor '%s'\n", g_prog, name);
        g->failed = 1;
        return NULL;
    }
    const nn_tensor_info_t *ti = nn_net_tensor(g->net, t);
    float *h = malloc(sizeof(float) * (size_t)ti->numel);
    if (!h) {
        g->failed = 1;
        return NULL;
    }
    g->be->download(g->be, h, nn_net_tensor_data(g->net, t), sizeof(float) * (size_t)ti->numel);
    if (numel) *numel = ti->numel;
    return h;
}

/* Initializer `onnx_name` from the net's tensor `name`, with its shape. */
static void init_from_net(graph_t *g, const char *onnx_name, const char *name) {
    float *h = tensor_host(g, name, NULL);
    if (!h) return;
    const nn_tensor_info_t *ti = nn_net_tensor(g->net, nn_net_tensor_find(g->net, name));
    init_f32(g, onnx_name, ti->ndim, ti->shape, h);
    free(h);
}

static void act(graph_t *g, const char *in, const char *out) {
    if (g->act == NN_ACT_RELU) {
        node(g, "Relu", out, NULL, in, NULL, NULL);
        return;
    }
    char sig[96];
    snprintf(sig, sizeof sig, "%s.sigmoid", out);
    node(g, "Sigmoid", sig, NULL, in, NULL, NULL);
    node(g, "Mul", out, NULL, in, sig, NULL);
}

/* Conv with bias: x (N, cin, 9, 9) -> out (N, cout, 9, 9), "same" padding. */
static void conv(graph_t *g, const char *x, const char *w, const char *b, int64_t k, const char *out) {
    pb_t a = {0};
    int64_t ks[2] = {k, k}, pads[4] = {k / 2, k / 2, k / 2, k / 2}, strides[2] = {1, 1};
    attr_ints(&a, "kernel_shape", ks, 2);
    attr_ints(&a, "pads", pads, 4);
    attr_ints(&a, "strides", strides, 2);
    node(g, "Conv", out, &a, x, w, b);
}

/* A conv + BN unit ("stem.conv" + "stem.bn") folded by the backend's bn_fold
 * (nn/net.c folds the same way): initializers "<prefix>.folded.weight/bias",
 * then Conv -> out (the activation is the caller's). */
static void conv_bn(graph_t *g, const char *prefix, const char *cname, const char *bname, const char *x,
                    const char *out) {
    char n[5][96];
    snprintf(n[0], sizeof n[0], "%s.%s.weight", prefix, cname);
    snprintf(n[1], sizeof n[1], "%s.%s.weight", prefix, bname);
    snprintf(n[2], sizeof n[2], "%s.%s.bias", prefix, bname);
    snprintf(n[3], sizeof n[3], "%s.%s.running_mean", prefix, bname);
    snprintf(n[4], sizeof n[4], "%s.%s.running_var", prefix, bname);
    int32_t t[5];
    for (int i = 0; i < 5; i++)
        if ((t[i] = nn_net_tensor_find(g->net, n[i])) < 0) {
            fprintf(stderr, "%s: the net has no tensor '%s'\n", g_prog, n[i]);
            g->failed = 1;
            return;
        }
    const nn_tensor_info_t *wi = nn_net_tensor(g->net, t[0]);
    int64_t cout = wi->shape[0], kdim = wi->numel / cout;
    nn_backend_t *be = g->be;
    float *fw = be->buf_alloc(be, sizeof(float) * (size_t)wi->numel);
    float *fb = be->buf_alloc(be, sizeof(float) * (size_t)cout);
    float *hw = malloc(sizeof(float) * (size_t)wi->numel), *hb = malloc(sizeof(float) * (size_t)cout);
    if (fw && fb && hw && hb) {
        be->bn_fold(be, nn_net_tensor_data(g->net, t[0]), nn_net_tensor_data(g->net, t[1]),
                    nn_net_tensor_data(g->net, t[2]), nn_net_tensor_data(g->net, t[3]),
                    nn_net_tensor_data(g->net, t[4]), (int32_t)cout, (int32_t)kdim, NN_BN_EPS, fw, fb);
        be->download(be, hw, fw, sizeof(float) * (size_t)wi->numel);
        be->download(be, hb, fb, sizeof(float) * (size_t)cout);
        char wn[96], bn[96];
        snprintf(wn, sizeof wn, "%s.%s.folded.weight", prefix, cname);
        snprintf(bn, sizeof bn, "%s.%s.folded.bias", prefix, cname);
        int64_t bd[1] = {cout};
        init_f32(g, wn, wi->ndim, wi->shape, hw);
        init_f32(g, bn, 1, bd, hb);
        conv(g, x, wn, bn, wi->shape[2], out);
    } else {
        g->failed = 1;
    }
    if (fw) be->buf_free(be, fw);
    if (fb) be->buf_free(be, fb);
    free(hw);
    free(hb);
}

/* Residual block i: h -> out (nn/net.c's nnet_forward_infer). */
static void block(graph_t *g, const nn_net_config_t *cfg, int32_t i, const char *h, const char *out) {
    char pre[32], c1[64], a1[64], c2[64], s2[64];
    snprintf(pre, sizeof pre, "blocks.%d", (int)i);
    snprintf(c1, sizeof c1, "%s.conv1", pre);
    snprintf(a1, sizeof a1, "%s.h1", pre);
    snprintf(c2, sizeof c2, "%s.conv2", pre);
    snprintf(s2, sizeof s2, "%s.sum", pre);
    conv_bn(g, pre, "conv1", "bn1", h, c1);
    act(g, c1, a1);
    const char *h1 = a1;
    char biased[64];
    if (nn_net_gpool_block(cfg, i)) {
        /* KataGo's bias structure: [mean, max] over the squares (N, 2C), dense
         * 2C -> C, added to every square of h1 */
        char mean[64], max[64], pool[64], wn[64], bn[64], gb[64], gb4[64];
        snprintf(mean, sizeof mean, "%s.gpool.mean", pre);
        snprintf(max, sizeof max, "%s.gpool.max", pre);
        snprintf(pool, sizeof pool, "%s.gpool.pooled", pre);
        snprintf(wn, sizeof wn, "%s.gpool.weight", pre);
        snprintf(bn, sizeof bn, "%s.gpool.bias", pre);
        snprintf(gb, sizeof gb, "%s.gpool.dense", pre);
        snprintf(gb4, sizeof gb4, "%s.gpool.dense4", pre);
        snprintf(biased, sizeof biased, "%s.h1b", pre);
        int64_t axes[2] = {2, 3};
        pb_t a = {0};
        attr_ints(&a, "axes", axes, 2);
        attr_int(&a, "keepdims", 0);
        node(g, "ReduceMean", mean, &a, a1, NULL, NULL);
        attr_ints(&a, "axes", axes, 2);
        attr_int(&a, "keepdims", 0);
        node(g, "ReduceMax", max, &a, a1, NULL, NULL);
        attr_int(&a, "axis", 1);
        node(g, "Concat", pool, &a, mean, max, NULL);
        init_from_net(g, wn, wn);
        init_from_net(g, bn, bn);
        attr_int(&a, "transB", 1);
        node(g, "Gemm", gb, &a, pool, wn, bn);
        node(g, "Unsqueeze", gb4, NULL, gb, "const.axes23", NULL);
        node(g, "Add", biased, NULL, a1, gb4, NULL);
        h1 = biased;
    }
    conv_bn(g, pre, "conv2", "bn2", h1, c2);
    node(g, "Add", s2, NULL, c2, h, NULL);
    act(g, s2, out);
}

/* Policy or legal head (prefix "policy" / "legal") from the trunk h -> out (N, 2187). */
static void move_head(graph_t *g, const char *prefix, const char *h, const char *out) {
    char c[64], a[64], o[64], w[64], b[64];
    snprintf(c, sizeof c, "%s.conv", prefix);
    snprintf(a, sizeof a, "%s.h", prefix);
    snprintf(o, sizeof o, "%s.planes", prefix);
    snprintf(w, sizeof w, "%s.out.weight", prefix);
    snprintf(b, sizeof b, "%s.out.bias", prefix);
    conv_bn(g, prefix, "conv", "bn", h, c);
    act(g, c, a);
    init_from_net(g, w, w);
    init_from_net(g, b, b);
    conv(g, a, w, b, 1, o); /* (N, 27, 9, 9): channel = direction */
    pb_t at = {0};
    attr_int(&at, "axis", 1);
    node(g, "Flatten", out, &at, o, NULL, NULL); /* label = direction * 81 + square */
}

static void value_head(graph_t *g, const char *h, const char *out) {
    conv_bn(g, "value", "conv", "bn", h, "value.conv");
    act(g, "value.conv", "value.h");
    pb_t a = {0};
    attr_int(&a, "axis", 1);
    node(g, "Flatten", "value.flat", &a, "value.h", NULL, NULL); /* (N, 648) */
    const char *names[4] = {"value.fc1.weight", "value.fc1.bias", "value.fc2.weight", "value.fc2.bias"};
    for (int i = 0; i < 4; i++) init_from_net(g, names[i], names[i]);
    attr_int(&a, "transB", 1);
    node(g, "Gemm", "value.fc1", &a, "value.flat", names[0], names[1]);
    act(g, "value.fc1", "value.hidden");
    attr_int(&a, "transB", 1);
    node(g, "Gemm", out, &a, "value.hidden", names[2], names[3]);
}

/* The moves-left head (nn/net.h): its raw output as plies, 20 * Relu(raw). */
static void moves_left_head(graph_t *g, const char *h, const char *out) {
    conv_bn(g, "moves_left", "conv", "bn", h, "moves_left.conv");
    act(g, "moves_left.conv", "moves_left.h");
    pb_t a = {0};
    attr_int(&a, "axis", 1);
    node(g, "Flatten", "moves_left.flat", &a, "moves_left.h", NULL, NULL); /* (N, 648) */
    const char *names[4] = {"moves_left.fc1.weight", "moves_left.fc1.bias", "moves_left.fc2.weight",
                            "moves_left.fc2.bias"};
    for (int i = 0; i < 4; i++) init_from_net(g, names[i], names[i]);
    attr_int(&a, "transB", 1);
    node(g, "Gemm", "moves_left.fc1", &a, "moves_left.flat", names[0], names[1]);
    act(g, "moves_left.fc1", "moves_left.hidden");
    attr_int(&a, "transB", 1);
    node(g, "Gemm", "moves_left.raw", &a, "moves_left.hidden", names[2], names[3]); /* (N, 1) */
    node(g, "Relu", "moves_left.clamped", NULL, "moves_left.raw", NULL, NULL);
    const float scale = NN_ML_SCALE;
    int64_t one[1] = {1};
    init_f32(g, "const.ml_scale", 1, one, &scale);
    node(g, "Mul", out, NULL, "moves_left.clamped", "const.ml_scale", NULL);
}

/* ValueInfoProto: float tensor (N, dims...). */
static void value_info(pb_t *graph, int field, const char *name, int ndim, const int64_t *dims, const char *doc) {
    pb_t shape = {0}, tt = {0}, type = {0}, vi = {0};
    pb_t d = {0};
    pb_str(&d, DIM_PARAM, "N");
    pb_msg(&shape, SHAPE_DIM, &d);
    for (int i = 0; i < ndim; i++) {
        pb_int(&d, DIM_VALUE, dims[i]);
        pb_msg(&shape, SHAPE_DIM, &d);
    }
    pb_int(&tt, TT_ELEM, DT_FLOAT);
    pb_msg(&tt, TT_SHAPE, &shape);
    pb_msg(&type, TYPE_TENSOR, &tt);
    pb_str(&vi, VI_NAME, name);
    pb_msg(&vi, VI_TYPE, &type);
    pb_str(&vi, VI_DOC, doc);
    pb_msg(graph, field, &vi);
}

static void meta(pb_t *model, const char *key, const char *value) {
    pb_t kv = {0};
    pb_str(&kv, KV_KEY, key);
    pb_str(&kv, KV_VALUE, value);
    pb_msg(model, MODEL_META, &kv);
}

static const char GRAPH_DOC_TEXT[] =
    "Koma shogi net. Inputs: planes (N,P,9,9) float 0/1, the feature planes of Koma's engine/encode.h "
    "from the side to move's view; hand (N,H) float, encode.h's hand values. Outputs: policy (N,2187) "
    "logits, label = direction*81 + view square (encode.h); value (N,3) win/draw/loss logits for the "
    "side to move; legal (N,2187) legal-move logits. Batch norm is folded into the convolutions.";

/* The whole model into *out (caller frees out->p). 0, or -1 (message printed). */
static int build_model(nn_backend_t *be, nn_net_t *net, const char *src, pb_t *out) {
    const nn_net_config_t *cfg = nn_net_config(net);
    graph_t g = {.be = be, .net = net, .act = cfg->act};
    int64_t axes23[2] = {2, 3}, ones99[4] = {1, 1, 9, 9};
    init_i64(&g, "const.axes23", 2, axes23);
    /* the stem's input: the planes, then each hand value spread over a plane */
    const char *x = "planes";
    if (cfg->in_hand > 0) {
        init_i64(&g, "const.shape_hand", 4, ones99);
        node(&g, "Unsqueeze", "hand4", NULL, "hand", "const.axes23", NULL); /* (N, H, 1, 1) */
        node(&g, "Expand", "hand_planes", NULL, "hand4", "const.shape_hand", NULL); /* (N, H, 9, 9) */
        pb_t a = {0};
        attr_int(&a, "axis", 1);
        node(&g, "Concat", "input", &a, "planes", "hand_planes", NULL);
        x = "input";
    }
    conv_bn(&g, "stem", "conv", "bn", x, "stem.conv");
    act(&g, "stem.conv", "trunk.0");
    char h[32], next[32];
    snprintf(h, sizeof h, "trunk.0");
    for (int32_t i = 0; i < cfg->blocks; i++) {
        snprintf(next, sizeof next, "trunk.%d", (int)i + 1);
        block(&g, cfg, i, h, next);
        memcpy(h, next, sizeof h);
    }
    move_head(&g, "policy", h, "policy");
    value_head(&g, h, "value");
    move_head(&g, "legal", h, "legal");
    if (cfg->heads & NN_HEAD_MOVES_LEFT) moves_left_head(&g, h, "moves_left");
    if (g.failed || nn_backend_error(be)) {
        fprintf(stderr, "%s: %s: reading the weights failed: %s\n", g_prog, src,
                nn_backend_error(be) ? nn_backend_error(be) : "a tensor is missing");
        free(g.nodes.p);
        free(g.inits.p);
        return -1;
    }

    char arch[64], num[32];
    nn_net_arch_format(cfg, arch, sizeof arch);
    pb_t graph = {0};
    pb_raw(&graph, g.nodes.p, g.nodes.n);
    pb_str(&graph, GRAPH_NAME, "koma");
    pb_raw(&graph, g.inits.p, g.inits.n);
    if (g.nodes.oom || g.inits.oom) graph.oom = 1;
    free(g.nodes.p);
    free(g.inits.p);
    pb_str(&graph, GRAPH_DOC, GRAPH_DOC_TEXT);
    int64_t planes_dims[3] = {cfg->in_planes, 9, 9}, hand_dims[1] = {cfg->in_hand};
    int64_t policy_dims[1] = {NN_POLICY_NB}, value_dims[1] = {NN_VALUE_NB};
    value_info(&graph, GRAPH_INPUT, "planes", 3, planes_dims,
               "feature planes (engine/encode.h), 0/1, side to move's view; [n, p, file-1, rank-1]");
    if (cfg->in_hand > 0)
        value_info(&graph, GRAPH_INPUT, "hand", 1, hand_dims,
                   "hand values (engine/encode.h): us then them, P L N S B R G, count / most");
    value_info(&graph, GRAPH_OUTPUT, "policy", 1, policy_dims, "policy logits, label = direction*81 + view square");
    value_info(&graph, GRAPH_OUTPUT, "value", 1, value_dims, "win/draw/loss logits, side to move");
    value_info(&graph, GRAPH_OUTPUT, "legal", 1, policy_dims, "legal-move logits, labels as policy");
    int64_t ml_dims[1] = {1};
    if (cfg->heads & NN_HEAD_MOVES_LEFT)
        value_info(&graph, GRAPH_OUTPUT, "moves_left", 1, ml_dims, "plies until the game ends (>= 0)");

    pb_t model = {0}, opset = {0};
    pb_int(&model, MODEL_IR_VERSION, ONNX_IR_VERSION);
    pb_str(&opset, OPSET_DOMAIN, "");
    pb_int(&opset, OPSET_VERSION, ONNX_OPSET);
    pb_msg(&model, MODEL_OPSET, &opset);
    pb_str(&model, MODEL_PRODUCER, "koma-onnx-export");
    pb_str(&model, MODEL_PRODUCER_VERSION, KOMA_VERSION_STRING);
    pb_str(&model, MODEL_DOC, GRAPH_DOC_TEXT);
    pb_msg(&model, MODEL_GRAPH, &graph);
    meta(&model, "koma.net", arch);
    meta(&model, "koma.activation", nn_act_name(cfg->act));
    snprintf(num, sizeof num, "%d", (int)cfg->features_version);
    meta(&model, "koma.features_version", num);
    meta(&model, "koma.value", "logits: win, draw, loss (side to move)");
    meta(&model, "koma.policy", "logits: label = direction*81 + view square (engine/encode.h)");
    if (model.oom) {
        fprintf(stderr, "%s: out of memory building the model of %s\n", g_prog, src);
        free(model.p);
        return -1;
    }
    *out = model;
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int main(int argc, char **argv) {
    g_prog = koma_program_name(argc > 0 ? argv[0] : NULL, "onnx-export");
    if (koma_version_asked(argc, argv, g_prog)) return 0;
    int help = argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    if (argc != 3 || argv[1][0] == '-') {
        fprintf(help ? stdout : stderr,
                "usage: %s NET.safetensors OUT.onnx\n"
                "  writes a Koma net (a run's models/NNNN.safetensors, the shipped net) as an\n"
                "  ONNX model, opset %d, batch N dynamic:\n"
                "  inputs  planes (N,68,9,9) and hand (N,14), as engine/encode.h encodes them\n"
                "  outputs policy (N,2187) logits, value (N,3) win/draw/loss logits,\n"
                "          legal (N,2187) logits (docs/ONNX.md)\n",
                g_prog, ONNX_OPSET);
        return help ? 0 : 2;
    }
    const char *in = argv[1], *out = argv[2];
    char err[1024];
    if (!ends_with(out, ".onnx")) {
        fprintf(stderr, "%s: %s: the output's name must end in .onnx (a net, shard or database is never replaced)\n",
                g_prog, out);
        return 2;
    }
    if (run_output_check(out, NULL, "the ONNX model", "OUT", err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    if (compat_check_regular_file(in, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        return 1;
    }
    nn_backend_t *be = nn_backend_cpu_new(1);
    if (!be) {
        fprintf(stderr, "%s: cannot open the CPU backend (out of memory?)\n", g_prog);
        return 1;
    }
    nn_net_t *net = nn_weights_load(be, in, -1, err, sizeof err);
    if (!net) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        nn_backend_free(be);
        return 1;
    }
    pb_t model = {0};
    int rc = build_model(be, net, in, &model);
    if (rc == 0 && compat_write_file_durable(out, model.p, model.n, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", g_prog, err);
        rc = -1;
    }
    if (rc == 0) {
        char arch[64];
        const nn_net_config_t *cfg = nn_net_config(net);
        printf("%s: %s %s net from %s, opset %d, %lld bytes; inputs planes (N,%d,9,9), hand (N,%d); "
               "outputs policy (N,%d), value (N,%d) W/D/L logits, legal (N,%d)%s\n",
               out, nn_net_arch_format(cfg, arch, sizeof arch), nn_act_name(cfg->act), in, ONNX_OPSET, (long long)model.n,
               (int)cfg->in_planes, (int)cfg->in_hand, NN_POLICY_NB, NN_VALUE_NB, NN_LEGAL_NB,
               (cfg->heads & NN_HEAD_MOVES_LEFT) ? ", moves_left (N,1) plies" : "");
    }
    free(model.p);
    nn_net_free(net);
    nn_backend_free(be);
    return rc == 0 ? 0 : 1;
}
