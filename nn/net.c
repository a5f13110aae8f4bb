/* net.c - the Koma network composed from backend ops: parameters, inference,
 * training step, losses, optimizer and schedule.
 *
 * Owns: the tensor table and the single parameter / statistics / folded
 * allocations of a net, the inference arena (nn_ctx), the trainer (gradients,
 * momentum, training arena) and the order in which ops run.
 * Does not own: how an op computes (the backend), files (nn/weights.c).
 * Errors: every public call that runs ops checks the backend's sticky error
 * (nn/backend.h) before and after them and fails with its message; out of
 * memory names host or device memory and the bytes asked.
 */
#include "nn/net.h"
#include "compat/bits.h"
#include "compat/err.h"

#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

/* 0, or -1 with err when be has failed (its sticky error names the cause). */
static int be_check(nn_backend_t *be, const char *what, char *err, size_t errlen) {
    const char *e = nn_backend_error(be);
    if (!e) return 0;
    set_err(err, errlen, "%s: %s backend failed: %s", what, be->name, e);
    return -1;
}

/* "out of host memory allocating N bytes (cpu backend)" and the like; host
 * memory under an address-space limit names it (ulimit -v). */
static void set_oom(char *err, size_t errlen, const char *what, const nn_backend_t *be, size_t bytes) {
    const char *mem = nn_backend_memory(be);
    char l[96] = "";
    if (strcmp(mem, "host") == 0) compat_address_space_note(l, sizeof l);
    set_err(err, errlen, "%s: out of %s memory%s allocating %llu bytes (%s backend)", what, mem, l,
            (unsigned long long)bytes, be->name);
}

/* ---- size string ---------------------------------------------------------- */
int nn_net_size_parse(const char *s, int32_t *blocks, int32_t *channels) {
    if (!s) return -1;
    int64_t v[2] = {0, 0};
    int part = 0, digits = 0;
    for (const char *p = s;; p++) {
        if (*p >= '0' && *p <= '9') {
            v[part] = v[part] * 10 + (*p - '0');
            if (v[part] > 1000000) return -1;
            digits++;
        } else if ((*p == 'x' || *p == 'X') && part == 0 && digits) {
            part = 1;
            digits = 0;
        } else if (*p == '\0' && part == 1 && digits) {
            break;
        } else {
            return -1;
        }
    }
    if (v[0] < 1 || v[0] > NN_MAX_BLOCKS || v[1] < 1 || v[1] > NN_MAX_CHANNELS) return -1;
    *blocks = (int32_t)v[0];
    *channels = (int32_t)v[1];
    return 0;
}

char *nn_net_size_format(int32_t blocks, int32_t channels, char *buf, size_t len) {
    snprintf(buf, len, "%dx%d", (int)blocks, (int)channels);
    return buf;
}

/* ---- the net ------------------------------------------------------------- */
/* A conv unit: conv (no bias) -> BN -> act, or conv + bias (head outputs). */
typedef struct {
    int32_t cin, cout, k;
    int32_t w, bias;                  /* tensor indices; bias -1 when BN follows */
    int32_t gamma, beta, rmean, rvar; /* BN tensors, -1 for head outputs */
    int64_t fw, fb;                   /* folded weight / bias offsets (BN units) */
} nn_unit_t;

/* Units: 0 stem; 1 + 2i, 2 + 2i block i; then the heads. */
#define U_STEM 0
#define U_PCONV(n) (1 + 2 * (n))
#define U_POUT(n) (2 + 2 * (n))
#define U_LCONV(n) (3 + 2 * (n))
#define U_LOUT(n) (4 + 2 * (n))
#define U_VCONV(n) (5 + 2 * (n))
#define U_COUNT(n) (6 + 2 * (n))

struct nn_net {
    nn_backend_t *be;
    nn_net_config_t cfg;
    int32_t n_tensors;
    nn_tensor_info_t *tensors;
    int32_t n_units;
    nn_unit_t *units;
    int32_t fc1_w, fc1_b, fc2_w, fc2_b;
    int64_t n_params, n_decay, n_stats, n_folded;
    float *params; /* (n_params) all trained tensors, decayed first */
    float *stats;  /* (n_stats) BN running mean / var */
    float *folded; /* (n_folded) BN folded into conv weights + bias, for inference */
    int dirty;     /* folded is stale */
    /* The policy and legal heads' 3x3 convolutions run as ONE (cout 2C) when
     * both heads are wanted: the legal unit's tensors sit right after their
     * policy twins (params, stats, folded; no padding between), so the pair
     * is one (2C, C, 3, 3) weight with (2C) BN tensors, whatever changes the
     * weights. 0: two convolutions (the route before; tests compare). */
    int32_t merge_heads;
    compat_mutex_t mu;
};

static int32_t add_tensor(nn_net_t *net, nn_tensor_kind_t kind, int32_t decay, int32_t ndim,
                          const int64_t *shape, const char *fmt, ...) {
    nn_tensor_info_t *t = &net->tensors[net->n_tensors];
    memset(t, 0, sizeof(*t));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    t->kind = kind;
    t->decay = decay;
    t->ndim = ndim;
    t->numel = 1;
    for (int32_t i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= shape[i];
    }
    return net->n_tensors++;
}

static void add_unit(nn_net_t *net, int32_t u, const char *prefix, const char *conv,
                     const char *bn, int32_t cin, int32_t cout, int32_t k) {
    nn_unit_t *un = &net->units[u];
    un->cin = cin;
    un->cout = cout;
    un->k = k;
    int64_t ws[4] = {cout, cin, k, k}, c1[1] = {cout};
    un->w = add_tensor(net, NN_TENSOR_PARAM, 1, 4, ws, "%s.%s.weight", prefix, conv);
    if (bn) {
        un->bias = -1;
        un->gamma = add_tensor(net, NN_TENSOR_PARAM, 0, 1, c1, "%s.%s.weight", prefix, bn);
        un->beta = add_tensor(net, NN_TENSOR_PARAM, 0, 1, c1, "%s.%s.bias", prefix, bn);
        un->rmean = add_tensor(net, NN_TENSOR_STAT, 0, 1, c1, "%s.%s.running_mean", prefix, bn);
        un->rvar = add_tensor(net, NN_TENSOR_STAT, 0, 1, c1, "%s.%s.running_var", prefix, bn);
    } else {
        un->bias = add_tensor(net, NN_TENSOR_PARAM, 0, 1, c1, "%s.%s.bias", prefix, conv);
        un->gamma = un->beta = un->rmean = un->rvar = -1;
    }
}

/* The twin of tensor t in the head pair (policy conv unit <-> legal conv
 * unit, same role), or -1; *second: t is the legal one (placed after its twin). */
static int32_t head_twin(const nn_net_t *net, int32_t t, int *second) {
    int32_t n = net->cfg.blocks;
    const nn_unit_t *pu = &net->units[U_PCONV(n)], *lu = &net->units[U_LCONV(n)];
    const int32_t pt[5] = {pu->w, pu->gamma, pu->beta, pu->rmean, pu->rvar};
    const int32_t lt[5] = {lu->w, lu->gamma, lu->beta, lu->rmean, lu->rvar};
    for (int k = 0; k < 5; k++) {
        if (t == pt[k]) return *second = 0, lt[k];
        if (t == lt[k]) return *second = 1, pt[k];
    }
    return -1;
}

/* Offset of tensor i at *off (a head twin's right after it), then *off
 * rounded up to 16 floats. */
static void place_tensor(nn_net_t *net, int32_t i, int64_t *off) {
    int second = 0;
    int32_t tw = head_twin(net, i, &second);
    if (tw >= 0 && second) return; /* placed with its twin */
    net->tensors[i].offset = *off;
    *off += net->tensors[i].numel;
    if (tw >= 0) {
        net->tensors[tw].offset = *off;
        *off += net->tensors[tw].numel;
    }
    *off = (*off + 15) & ~(int64_t)15;
}

static double rand_normal(uint64_t *s) {
    double u1 = ((double)(compat_splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(compat_splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

static void net_init_random(nn_net_t *net, uint64_t seed, float *hp, float *hs) {
    uint64_t s = seed ^ 0x4B4F4D41ull; /* "KOMA" */
    for (int32_t i = 0; i < net->n_tensors; i++) {
        const nn_tensor_info_t *t = &net->tensors[i];
        float *d = (t->kind == NN_TENSOR_PARAM ? hp : hs) + t->offset;
        const char *nm = t->name;
        size_t L = strlen(nm);
        int is_bias = L > 5 && strcmp(nm + L - 5, ".bias") == 0;
        if (t->kind == NN_TENSOR_STAT) {
            float v = strstr(nm, "running_var") ? 1.0f : 0.0f;
            for (int64_t j = 0; j < t->numel; j++) d[j] = v;
        } else if (t->ndim == 1) { /* BN gamma = 1, BN beta and biases = 0 */
            float v = is_bias ? 0.0f : 1.0f;
            for (int64_t j = 0; j < t->numel; j++) d[j] = v;
        } else {
            int64_t fan_in = t->numel / t->shape[0];
            int last = strstr(nm, ".out.") || strstr(nm, "fc2");
            double std = sqrt((last ? 1.0 : 2.0) / (double)fan_in);
            for (int64_t j = 0; j < t->numel; j++) d[j] = (float)(std * rand_normal(&s));
        }
    }
}

nn_net_t *nn_net_new(nn_backend_t *be, const nn_net_config_t *cfg, uint64_t seed, char *err,
                     size_t errlen) {
    if (!be || !cfg) {
        set_err(err, errlen, "nn_net_new: no backend or config");
        return NULL;
    }
    if (cfg->blocks < 1 || cfg->blocks > NN_MAX_BLOCKS || cfg->channels < 1 ||
        cfg->channels > NN_MAX_CHANNELS || cfg->in_planes < 1 || cfg->in_planes > 4096 ||
        cfg->in_hand < 0 || cfg->in_hand > 4096 || cfg->act < 0 || cfg->act >= NN_ACT_NB) {
        set_err(err, errlen, "nn_net_new: invalid config (blocks %d, channels %d, planes %d, hand %d, act %d)",
                cfg->blocks, cfg->channels, cfg->in_planes, cfg->in_hand, (int)cfg->act);
        return NULL;
    }
    nn_net_t *net = calloc(1, sizeof(*net));
    if (!net) {
        set_err(err, errlen, "nn_net_new: out of memory");
        return NULL;
    }
    int32_t n = cfg->blocks, C = cfg->channels;
    int32_t max_tensors = U_COUNT(n) * 5 + 8;
    net->tensors = calloc((size_t)max_tensors, sizeof(nn_tensor_info_t));
    net->n_units = U_COUNT(n);
    net->units = calloc((size_t)net->n_units, sizeof(nn_unit_t));
    if (!net->tensors || !net->units) {
        nn_net_free(net);
        set_err(err, errlen, "nn_net_new: out of memory");
        return NULL;
    }
    net->be = be;
    net->cfg = *cfg;
    compat_mutex_init(&net->mu);
    int32_t cin = cfg->in_planes + cfg->in_hand;
    add_unit(net, U_STEM, "stem", "conv", "bn", cin, C, 3);
    for (int32_t i = 0; i < n; i++) {
        char pre[32];
        snprintf(pre, sizeof(pre), "blocks.%d", (int)i);
        add_unit(net, 1 + 2 * i, pre, "conv1", "bn1", C, C, 3);
        add_unit(net, 2 + 2 * i, pre, "conv2", "bn2", C, C, 3);
    }
    add_unit(net, U_PCONV(n), "policy", "conv", "bn", C, C, 3);
    add_unit(net, U_POUT(n), "policy", "out", NULL, C, NN_POLICY_CH, 1);
    add_unit(net, U_LCONV(n), "legal", "conv", "bn", C, C, 3);
    add_unit(net, U_LOUT(n), "legal", "out", NULL, C, NN_POLICY_CH, 1);
    add_unit(net, U_VCONV(n), "value", "conv", "bn", C, NN_VALUE_CH, 1);
    int64_t s1[2] = {NN_VALUE_HIDDEN, NN_VALUE_CH * NN_HW}, b1[1] = {NN_VALUE_HIDDEN};
    int64_t s2[2] = {NN_VALUE_NB, NN_VALUE_HIDDEN}, b2[1] = {NN_VALUE_NB};
    net->fc1_w = add_tensor(net, NN_TENSOR_PARAM, 1, 2, s1, "value.fc1.weight");
    net->fc1_b = add_tensor(net, NN_TENSOR_PARAM, 0, 1, b1, "value.fc1.bias");
    net->fc2_w = add_tensor(net, NN_TENSOR_PARAM, 1, 2, s2, "value.fc2.weight");
    net->fc2_b = add_tensor(net, NN_TENSOR_PARAM, 0, 1, b2, "value.fc2.bias");
    KOMA_ASSERT(net->n_tensors <= max_tensors);

    /* Offsets: decayed params, then the other params; stats apart. Every
     * tensor starts 16-float aligned so backends may vectorise per tensor,
     * except the legal head conv's, each right after its policy twin (the
     * pair is one tensor of 2C output channels: merge_heads). */
    int64_t off = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int32_t i = 0; i < net->n_tensors; i++) {
            nn_tensor_info_t *t = &net->tensors[i];
            if (t->kind != NN_TENSOR_PARAM || t->decay != pass) continue;
            place_tensor(net, i, &off);
            if (pass == 1) net->n_decay = off;
        }
    net->n_params = off;
    off = 0;
    for (int32_t i = 0; i < net->n_tensors; i++)
        if (net->tensors[i].kind == NN_TENSOR_STAT) place_tensor(net, i, &off);
    net->n_stats = off;
    off = 0;
    nn_unit_t *lu = &net->units[U_LCONV(n)];
    for (int32_t u = 0; u < net->n_units; u++) {
        nn_unit_t *un = &net->units[u];
        if (un->gamma < 0 || u == U_LCONV(n)) continue;
        int pair = u == U_PCONV(n); /* the legal unit's folded weight and bias follow the policy's */
        int64_t wn = (int64_t)un->cout * un->cin * un->k * un->k;
        un->fw = off;
        if (pair) lu->fw = off + wn;
        off += ((pair ? 2 : 1) * wn + 15) & ~(int64_t)15;
        un->fb = off;
        if (pair) lu->fb = off + un->cout;
        off += ((pair ? 2 : 1) * un->cout + 15) & ~(int64_t)15;
    }
    net->n_folded = off;
    const char *merge = getenv("KOMA_MERGE_HEADS");
    net->merge_heads = !(merge && strcmp(merge, "0") == 0);

    size_t bytes = sizeof(float) * (size_t)(net->n_params + net->n_stats + net->n_folded);
    net->params = be->buf_alloc(be, sizeof(float) * (size_t)net->n_params);
    net->stats = be->buf_alloc(be, sizeof(float) * (size_t)net->n_stats);
    net->folded = be->buf_alloc(be, sizeof(float) * (size_t)net->n_folded);
    if (!net->params || !net->stats || !net->folded) {
        nn_net_free(net);
        set_oom(err, errlen, "nn_net_new", be, bytes);
        return NULL;
    }
    float *hp = calloc((size_t)net->n_params, sizeof(float));
    float *hs = calloc((size_t)net->n_stats, sizeof(float));
    if (!hp || !hs) {
        free(hp);
        free(hs);
        nn_net_free(net);
        set_err(err, errlen, "nn_net_new: out of host memory allocating %llu bytes", (unsigned long long)bytes);
        return NULL;
    }
    net_init_random(net, seed, hp, hs);
    be->upload(be, net->params, hp, sizeof(float) * (size_t)net->n_params);
    be->upload(be, net->stats, hs, sizeof(float) * (size_t)net->n_stats);
    free(hp);
    free(hs);
    net->dirty = 1;
    if (be_check(be, "nn_net_new", err, errlen) != 0) {
        nn_net_free(net);
        return NULL;
    }
    return net;
}

void nn_net_free(nn_net_t *net) {
    if (!net) return;
    if (net->be) {
        net->be->buf_free(net->be, net->params);
        net->be->buf_free(net->be, net->stats);
        net->be->buf_free(net->be, net->folded);
        compat_mutex_destroy(&net->mu);
    }
    free(net->tensors);
    free(net->units);
    free(net);
}

void nn_net_set_merge_heads(nn_net_t *net, int32_t on) { net->merge_heads = on != 0; }
int32_t nn_net_merge_heads(const nn_net_t *net) { return net->merge_heads; }
const nn_net_config_t *nn_net_config(const nn_net_t *net) { return &net->cfg; }
nn_backend_t *nn_net_backend(const nn_net_t *net) { return net->be; }
int32_t nn_net_tensor_count(const nn_net_t *net) { return net->n_tensors; }
const nn_tensor_info_t *nn_net_tensor(const nn_net_t *net, int32_t i) {
    KOMA_ASSERT(i >= 0 && i < net->n_tensors);
    return &net->tensors[i];
}
int32_t nn_net_tensor_find(const nn_net_t *net, const char *name) {
    for (int32_t i = 0; i < net->n_tensors; i++)
        if (strcmp(net->tensors[i].name, name) == 0) return i;
    return -1;
}
float *nn_net_tensor_data(nn_net_t *net, int32_t i) {
    const nn_tensor_info_t *t = nn_net_tensor(net, i);
    return (t->kind == NN_TENSOR_PARAM ? net->params : net->stats) + t->offset;
}
float *nn_net_params(nn_net_t *net, int64_t *n_params, int64_t *n_decay) {
    if (n_params) *n_params = net->n_params;
    if (n_decay) *n_decay = net->n_decay;
    return net->params;
}
float *nn_net_stats(nn_net_t *net, int64_t *n_stats) {
    if (n_stats) *n_stats = net->n_stats;
    return net->stats;
}
void nn_net_mark_dirty(nn_net_t *net) {
    compat_mutex_lock(&net->mu);
    net->dirty = 1;
    compat_mutex_unlock(&net->mu);
}

static int same_config(const nn_net_config_t *a, const nn_net_config_t *b) {
    return a->blocks == b->blocks && a->channels == b->channels && a->act == b->act &&
           a->in_planes == b->in_planes && a->in_hand == b->in_hand &&
           a->features_version == b->features_version;
}

int nn_net_copy_weights(nn_net_t *dst, nn_net_t *src, char *err, size_t errlen) {
    const char *what = "nn_net_copy_weights";
    if (!same_config(&dst->cfg, &src->cfg)) {
        set_err(err, errlen, "%s: nets differ in configuration", what);
        return -1;
    }
    if (strcmp(dst->be->name, src->be->name) != 0) {
        set_err(err, errlen, "%s: backends differ (%s, %s)", what, dst->be->name, src->be->name);
        return -1;
    }
    /* The source's queued work (an SGD step on its own stream) ends before
     * the destination's queue reads its buffers. */
    if (src->be != dst->be && src->be->sync) src->be->sync(src->be);
    if (be_check(src->be, what, err, errlen) != 0 || be_check(dst->be, what, err, errlen) != 0) return -1;
    dst->be->copy(dst->be, dst->params, src->params, sizeof(float) * (size_t)src->n_params);
    dst->be->copy(dst->be, dst->stats, src->stats, sizeof(float) * (size_t)src->n_stats);
    if (dst->be->sync) dst->be->sync(dst->be);
    nn_net_mark_dirty(dst);
    return be_check(dst->be, what, err, errlen);
}

int32_t nn_net_nonfinite_tensor(const nn_net_t *net, const float *params, const float *stats, int64_t *elem) {
    for (int32_t i = 0; i < net->n_tensors; i++) {
        const nn_tensor_info_t *t = &net->tensors[i];
        const float *d = (t->kind == NN_TENSOR_PARAM ? params : stats) + t->offset;
        for (int64_t j = 0; j < t->numel; j++)
            if (!isfinite(d[j])) {
                if (elem) *elem = j;
                return i;
            }
    }
    return -1;
}

int nn_net_check_finite(nn_net_t *net, char *err, size_t errlen) {
    nn_backend_t *be = net->be;
    size_t n = (size_t)(net->n_params + net->n_stats);
    float *h = malloc(sizeof(float) * (n ? n : 1));
    if (!h) {
        set_err(err, errlen, "nn_net_check_finite: out of host memory allocating %llu bytes",
                (unsigned long long)(sizeof(float) * n));
        return -1;
    }
    if (be->sync) be->sync(be);
    be->download(be, h, net->params, sizeof(float) * (size_t)net->n_params);
    be->download(be, h + net->n_params, net->stats, sizeof(float) * (size_t)net->n_stats);
    int rc = be_check(be, "nn_net_check_finite", err, errlen);
    int64_t j = 0;
    int32_t i = rc ? -1 : nn_net_nonfinite_tensor(net, h, h + net->n_params, &j);
    if (i >= 0) {
        const float *d = (net->tensors[i].kind == NN_TENSOR_PARAM ? h : h + net->n_params) + net->tensors[i].offset;
        set_err(err, errlen, "tensor '%s' has a non-finite value (%g at element %lld)", net->tensors[i].name,
                (double)d[j], (long long)j);
        rc = -1;
    }
    free(h);
    return rc;
}

static const float *P(const nn_net_t *net, int32_t t) { return net->params + net->tensors[t].offset; }
static float *S(nn_net_t *net, int32_t t) { return net->stats + net->tensors[t].offset; }

/* Refolds BN into the inference weights when params or stats changed. */
static void net_fold(nn_net_t *net, nn_backend_t *be) {
    compat_mutex_lock(&net->mu);
    if (net->dirty) {
        for (int32_t u = 0; u < net->n_units; u++) {
            const nn_unit_t *un = &net->units[u];
            if (un->gamma < 0) continue;
            be->bn_fold(be, P(net, un->w), P(net, un->gamma), P(net, un->beta), S(net, un->rmean),
                        S(net, un->rvar), un->cout, un->cin * un->k * un->k, NN_BN_EPS,
                        net->folded + un->fw, net->folded + un->fb);
        }
        if (be->sync) be->sync(be);
        net->dirty = nn_backend_error(be) != NULL; /* a failed fold is no fold */
    }
    compat_mutex_unlock(&net->mu);
}

static size_t max_conv_ws(const nn_net_t *net, nn_backend_t *be, int32_t B) {
    size_t m = 0;
    for (int32_t u = 0; u < net->n_units; u++) {
        const nn_unit_t *un = &net->units[u];
        size_t w = be->conv_ws_bytes(be, B, un->cin, un->cout, un->k);
        if (w > m) m = w;
    }
    const nn_unit_t *pu = &net->units[U_PCONV(net->cfg.blocks)]; /* the merged head convolution */
    size_t w = be->conv_ws_bytes(be, B, pu->cin, 2 * pu->cout, pu->k);
    return w > m ? w : m;
}

/* ---- arena carving --------------------------------------------------------- */
typedef struct {
    char *base; /* NULL on the sizing pass */
    size_t off;
} carve_t;

static void *take(carve_t *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += (bytes + 63) & ~(size_t)63;
    return p;
}
#define TAKEF(c, n) ((float *)take((c), sizeof(float) * (size_t)(n)))

/* ---- inference --------------------------------------------------------------- */
typedef struct {
    float *x0;             /* (B, in_planes + in_hand, 9, 9) */
    float *h[3];           /* (B, C, 9, 9) ping-pong trunk buffers, carved one after the other: the two
                              that do not hold the trunk's output hold the merged head conv's (B, 2C, 9, 9) */
    float *v;              /* (B, 8, 9, 9) value conv output */
    float *fc1;            /* (B, 128) */
    float *policy, *legal; /* (B, 2187) logits */
    float *value;          /* (B, 3) logits */
    void *ws;              /* conv workspace */
} infer_bufs_t;

/* Device work of the same shape (a forward: batch, heads, input buffers; a
 * training step: batch and settings) seen this many times is recorded once
 * (graph_begin/graph_end) and then replayed with graph_launch: one launch
 * instead of a hundred ops (a thousand for a step), on backends that record. */
#define NN_GRAPH_AFTER 3
#define NN_GRAPH_SEEN 16

typedef struct {
    struct {
        uint64_t key;
        int32_t n;
    } e[NN_GRAPH_SEEN]; /* keys seen, round robin */
    int32_t next;
} graph_seen_t;

/* How often key was seen, this time included. */
static int32_t graph_seen(graph_seen_t *s, uint64_t key) {
    for (int i = 0; i < NN_GRAPH_SEEN; i++)
        if (s->e[i].n > 0 && s->e[i].key == key) return ++s->e[i].n;
    int i = s->next;
    s->next = (i + 1) % NN_GRAPH_SEEN;
    s->e[i].key = key;
    s->e[i].n = 1;
    return 1;
}

/* Queues ops(arg) on be: key's recording replayed where there is one, else
 * the ops, recorded first once key has come back NN_GRAPH_AFTER times (the
 * first runs choose algorithms and grow workspaces). A recording that fails
 * leaves the ops to run as ops. */
static void run_recorded(nn_backend_t *be, graph_seen_t *seen, uint64_t key, void (*ops)(void *), void *arg) {
    if (be->graph_launch) {
        if (be->graph_launch(be, key) == 0) return;
        if (graph_seen(seen, key) >= NN_GRAPH_AFTER && be->graph_begin(be) == 0) {
            ops(arg);
            if (be->graph_end(be, key) == 0 && be->graph_launch(be, key) == 0) return;
        }
    }
    ops(arg);
}

/* A number never handed out twice: recordings of a freed context or trainer never match. */
static uint64_t next_uid(void) {
    static _Atomic uint64_t uid = 1;
    return atomic_fetch_add(&uid, 1);
}

struct nn_ctx {
    nn_net_t *net;
    nn_backend_t *be;
    int32_t max_batch;
    uint64_t uid;
    graph_seen_t seen; /* device forwards */
    void *arena; /* one allocation: everything below */
    uint8_t *packed; /* (max_batch, nn_packed_bytes(in_planes)) staging */
    float *hand;     /* (max_batch, in_hand) staging */
    infer_bufs_t f;
};

static void layout_infer(const nn_net_t *net, int32_t B, size_t ws, carve_t *c, infer_bufs_t *f) {
    int32_t C = net->cfg.channels, cin = net->cfg.in_planes + net->cfg.in_hand;
    f->x0 = TAKEF(c, (int64_t)B * cin * NN_HW);
    for (int i = 0; i < 3; i++) f->h[i] = TAKEF(c, (int64_t)B * C * NN_HW);
    f->v = TAKEF(c, (int64_t)B * NN_VALUE_CH * NN_HW);
    f->fc1 = TAKEF(c, (int64_t)B * NN_VALUE_HIDDEN);
    f->policy = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    f->legal = TAKEF(c, (int64_t)B * NN_POLICY_NB);
    f->value = TAKEF(c, (int64_t)B * NN_VALUE_NB);
    f->ws = take(c, ws);
}

/* slice (B, C, 9, 9) <- channels [c0, c0 + C) of full (B, C2, 9, 9)
 * (to_full 0), or those channels <- slice (to_full 1): one copy_2d, or one
 * copy per position where the backend has none. */
static void channel_slice(nn_backend_t *be, float *slice, float *full, int32_t B, int32_t C, int32_t C2, int32_t c0,
                          int to_full) {
    size_t row = sizeof(float) * (size_t)C * NN_HW, pitch = sizeof(float) * (size_t)C2 * NN_HW;
    float *f0 = full + (int64_t)c0 * NN_HW;
    if (be->copy_2d) {
        if (to_full) be->copy_2d(be, f0, pitch, slice, row, row, (size_t)B);
        else be->copy_2d(be, slice, row, f0, pitch, row, (size_t)B);
        return;
    }
    for (int32_t b = 0; b < B; b++) {
        float *a = slice + (int64_t)b * C * NN_HW, *z = f0 + (int64_t)b * C2 * NN_HW;
        if (to_full) be->copy(be, z, a, row);
        else be->copy(be, a, z, row);
    }
}

/* The value head of the inference forward from the trunk's output h (native
 * layout where the backend fuses units). */
static void value_infer(nn_net_t *net, nn_backend_t *be, int32_t B, infer_bufs_t *f, const float *h) {
    const nn_unit_t *vu = &net->units[U_VCONV(net->cfg.blocks)];
    const float *fo = net->folded;
    nn_act_t act = net->cfg.act;
    if (be->conv_fwd_act) {
        be->conv_fwd_act(be, h, fo + vu->fw, fo + vu->fb, NULL, B, vu->cin, vu->cout, vu->k, act, f->v, f->ws,
                         NN_CONV_X_NATIVE);
    } else {
        be->conv_fwd(be, h, fo + vu->fw, fo + vu->fb, B, vu->cin, vu->cout, vu->k, f->v, f->ws);
        be->act_fwd(be, f->v, NULL, (int64_t)B * vu->cout * NN_HW, act, f->v);
    }
    be->dense_fwd(be, f->v, P(net, net->fc1_w), P(net, net->fc1_b), B, NN_VALUE_CH * NN_HW,
                  NN_VALUE_HIDDEN, f->fc1);
    be->act_fwd(be, f->fc1, NULL, (int64_t)B * NN_VALUE_HIDDEN, act, f->fc1);
    be->dense_fwd(be, f->fc1, P(net, net->fc2_w), P(net, net->fc2_b), B, NN_VALUE_HIDDEN,
                  NN_VALUE_NB, f->value);
}

/* The heads of the inference forward with the policy and legal head
 * convolutions merged (nn_net_set_merge_heads), from the trunk's output h
 * (one of f->h[0], f->h[2]). Value first: h is then free for the heads. One
 * convolution (2C output channels, NCHW) into the two other trunk buffers,
 * which are contiguous; each wanted head's half is copied into h (NCHW) and
 * its output convolution reads it. */
static void heads_infer_merged(nn_net_t *net, nn_backend_t *be, int32_t B, infer_bufs_t *f, float *h,
                               int32_t outputs) {
    int32_t n = net->cfg.blocks, C = net->cfg.channels;
    nn_act_t act = net->cfg.act;
    const float *fo = net->folded;
    if (outputs & NN_OUT_VALUE) value_infer(net, be, B, f, h);
    const nn_unit_t *pu = &net->units[U_PCONV(n)];
    int64_t half = (int64_t)B * C * NN_HW;
    float *hm = h == f->h[0] ? f->h[1] : f->h[0];
    KOMA_ASSERT(h != f->h[1] && f->h[1] - f->h[0] == f->h[2] - f->h[1] && f->h[2] - f->h[1] >= half);
    if (be->conv_fwd_act) {
        be->conv_fwd_act(be, h, fo + pu->fw, fo + pu->fb, NULL, B, C, 2 * C, pu->k, act, hm, f->ws, NN_CONV_X_NATIVE);
    } else {
        be->conv_fwd(be, h, fo + pu->fw, fo + pu->fb, B, C, 2 * C, pu->k, hm, f->ws);
        be->act_fwd(be, hm, NULL, 2 * half, act, hm);
    }
    const nn_unit_t *outs[2] = {&net->units[U_POUT(n)], &net->units[U_LOUT(n)]};
    float *logits[2] = {f->policy, f->legal};
    for (int hd = 0; hd < 2; hd++) {
        if (!(outputs & (hd ? NN_OUT_LEGAL : NN_OUT_POLICY))) continue;
        channel_slice(be, h, hm, B, C, 2 * C, hd * C, 0);
        if (be->conv_fwd_act)
            be->conv_fwd_act(be, h, P(net, outs[hd]->w), P(net, outs[hd]->bias), NULL, B, C, NN_POLICY_CH, 1, act,
                             logits[hd], f->ws, NN_CONV_NO_ACT);
        else
            be->conv_fwd(be, h, P(net, outs[hd]->w), P(net, outs[hd]->bias), B, C, NN_POLICY_CH, 1, logits[hd],
                         f->ws);
    }
}

/* Inference forward with folded BN: f->x0 must hold the expanded input;
 * only the heads in outputs (NN_OUT_*) run. Where the backend fuses the unit
 * (conv_fwd_act), trunk and head-conv activations stay in its native layout
 * (NN_CONV_*_NATIVE) between units. */
static void forward_infer(nn_net_t *net, nn_backend_t *be, int32_t B, infer_bufs_t *f, int32_t outputs) {
    const nn_net_config_t *cfg = &net->cfg;
    int32_t n = cfg->blocks, C = cfg->channels;
    nn_act_t act = cfg->act;
    const float *fo = net->folded;
    const int32_t X = NN_CONV_X_NATIVE, Y = NN_CONV_Y_NATIVE;
#define FCONV(u, in, out, res, fl)                                                               \
    do {                                                                                         \
        const nn_unit_t *un_ = &net->units[u];                                                   \
        if (be->conv_fwd_act) {                                                                  \
            be->conv_fwd_act(be, (in), fo + un_->fw, fo + un_->fb, (res), B, un_->cin, un_->cout, \
                             un_->k, act, (out), f->ws, (fl));                                   \
            break;                                                                               \
        }                                                                                        \
        be->conv_fwd(be, (in), fo + un_->fw, fo + un_->fb, B, un_->cin, un_->cout, un_->k, (out), \
                     f->ws);                                                                     \
        be->act_fwd(be, (out), (res), (int64_t)B * un_->cout * NN_HW, act, (out));               \
    } while (0)
#define OUTCONV(o, in, out)                                                                      \
    do {                                                                                         \
        if (be->conv_fwd_act)                                                                    \
            be->conv_fwd_act(be, (in), P(net, (o)->w), P(net, (o)->bias), NULL, B, C,            \
                             NN_POLICY_CH, 1, act, (out), f->ws, X | NN_CONV_NO_ACT);            \
        else                                                                                     \
            be->conv_fwd(be, (in), P(net, (o)->w), P(net, (o)->bias), B, C, NN_POLICY_CH, 1,     \
                         (out), f->ws);                                                          \
    } while (0)
    float *h = f->h[0], *t1 = f->h[1], *t2 = f->h[2];
    FCONV(U_STEM, f->x0, h, NULL, Y);
    for (int32_t i = 0; i < n; i++) {
        FCONV(1 + 2 * i, h, t1, NULL, X | Y);
        FCONV(2 + 2 * i, t1, t2, h, X | Y);
        float *tmp = h;
        h = t2;
        t2 = tmp;
    }
    const nn_unit_t *po = &net->units[U_POUT(n)], *lo = &net->units[U_LOUT(n)];
    if (net->merge_heads && (outputs & NN_OUT_LEGAL)) {
        heads_infer_merged(net, be, B, f, h, outputs);
        return;
    }
    if (outputs & NN_OUT_POLICY) {
        FCONV(U_PCONV(n), h, t1, NULL, X | Y);
        OUTCONV(po, t1, f->policy);
    }
    if (outputs & NN_OUT_LEGAL) {
        FCONV(U_LCONV(n), h, t1, NULL, X | Y);
        OUTCONV(lo, t1, f->legal);
    }
    if (outputs & NN_OUT_VALUE) value_infer(net, be, B, f, h);
#undef OUTCONV
#undef FCONV
}

nn_ctx_t *nn_ctx_new(nn_net_t *net, nn_backend_t *be, int32_t max_batch, char *err, size_t errlen) {
    if (!be) be = net->be;
    if (max_batch < 1 || max_batch > (1 << 20)) {
        set_err(err, errlen, "nn_ctx_new: max_batch %d out of range", max_batch);
        return NULL;
    }
    nn_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        set_err(err, errlen, "nn_ctx_new: out of memory");
        return NULL;
    }
    ctx->net = net;
    ctx->be = be;
    ctx->max_batch = max_batch;
    ctx->uid = next_uid();
    size_t ws = max_conv_ws(net, be, max_batch);
    for (int pass = 0; pass < 2; pass++) {
        carve_t c = {pass ? ctx->arena : NULL, 0};
        ctx->packed = take(&c, (size_t)(max_batch * nn_packed_bytes(net->cfg.in_planes)));
        ctx->hand = TAKEF(&c, (int64_t)max_batch * net->cfg.in_hand);
        layout_infer(net, max_batch, ws, &c, &ctx->f);
        if (pass == 0) {
            ctx->arena = be->buf_alloc(be, c.off);
            if (!ctx->arena) {
                free(ctx);
                set_oom(err, errlen, "nn_ctx_new", be, c.off);
                return NULL;
            }
        }
    }
    if (be_check(be, "nn_ctx_new", err, errlen) != 0) { /* e.g. no cuDNN algorithm for a shape */
        nn_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

void nn_ctx_free(nn_ctx_t *ctx) {
    if (!ctx) return;
    ctx->be->buf_free(ctx->be, ctx->arena);
    free(ctx);
}

int32_t nn_ctx_max_batch(const nn_ctx_t *ctx) { return ctx->max_batch; }

void nn_ctx_buffers(nn_ctx_t *ctx, uint8_t **packed, float **hand, float **policy, float **value,
                    float **legal) {
    if (packed) *packed = ctx->packed;
    if (hand) *hand = ctx->hand;
    if (policy) *policy = ctx->f.policy;
    if (value) *value = ctx->f.value;
    if (legal) *legal = ctx->f.legal;
}

/* The key of a device forward's recording: everything the recorded ops
 * depend on that can change between calls of one context. */
static uint64_t graph_key(const nn_ctx_t *ctx, int32_t B, const uint8_t *packed_dev, const float *hand_dev,
                          int32_t outputs) {
    uint64_t h = compat_mix64(ctx->uid * 0x9E3779B97F4A7C15ull + (uint64_t)B);
    h = compat_mix64(h ^ ((uint64_t)outputs << 32 | (uint64_t)ctx->net->merge_heads));
    h = compat_mix64(h ^ (uint64_t)(uintptr_t)packed_dev);
    return compat_mix64(h ^ (uint64_t)(uintptr_t)hand_dev);
}

typedef struct {
    nn_ctx_t *ctx;
    int32_t B, outputs;
    const uint8_t *packed_dev;
    const float *hand_dev;
} fwd_args_t;

static void forward_ops(void *arg) {
    const fwd_args_t *a = arg;
    nn_net_t *net = a->ctx->net;
    nn_backend_t *be = a->ctx->be;
    be->expand_planes(be, a->packed_dev, a->hand_dev, a->B, net->cfg.in_planes, net->cfg.in_hand, a->ctx->f.x0);
    forward_infer(net, be, a->B, &a->ctx->f, a->outputs);
}

int nn_forward_dev(nn_ctx_t *ctx, int32_t B, const uint8_t *packed_dev, const float *hand_dev, int32_t outputs) {
    KOMA_ASSERT(B >= 1 && B <= ctx->max_batch);
    nn_net_t *net = ctx->net;
    nn_backend_t *be = ctx->be;
    if (nn_backend_error(be)) return -1;
    net_fold(net, be); /* outside any recording: it runs only when the weights changed */
    fwd_args_t a = {ctx, B, outputs, packed_dev, hand_dev};
    run_recorded(be, &ctx->seen, graph_key(ctx, B, packed_dev, hand_dev, outputs), forward_ops, &a);
    return nn_backend_error(be) ? -1 : 0;
}

int nn_forward(nn_ctx_t *ctx, int32_t B, const uint8_t *packed, const float *hand, float *policy,
               float *value, float *legal) {
    KOMA_ASSERT(B >= 1 && B <= ctx->max_batch);
    nn_backend_t *be = ctx->be;
    const nn_net_config_t *cfg = &ctx->net->cfg;
    be->upload(be, ctx->packed, packed, (size_t)(B * nn_packed_bytes(cfg->in_planes)));
    if (cfg->in_hand) be->upload(be, ctx->hand, hand, sizeof(float) * (size_t)B * cfg->in_hand);
    int32_t outputs = (policy ? NN_OUT_POLICY : 0) | (value ? NN_OUT_VALUE : 0) | (legal ? NN_OUT_LEGAL : 0);
    (void)nn_forward_dev(ctx, B, ctx->packed, ctx->hand, outputs); /* its error is sticky: checked below */
    if (policy) be->download(be, policy, ctx->f.policy, sizeof(float) * (size_t)B * NN_POLICY_NB);
    if (value) be->download(be, value, ctx->f.value, sizeof(float) * (size_t)B * NN_VALUE_NB);
    if (legal) be->download(be, legal, ctx->f.legal, sizeof(float) * (size_t)B * NN_POLICY_NB);
    if (be->sync) be->sync(be);
    return nn_backend_error(be) ? -1 : 0;
}

/* ---- schedule ---------------------------------------------------------------- */
nn_train_config_t nn_train_config_default(void) {
    nn_train_config_t c;
    memset(&c, 0, sizeof(c));
    c.lr = 0.02f;
    c.momentum = 0.9f;
    c.nesterov = 1;
    c.weight_decay = 1e-4f;
    c.clip_norm = 10.0f;
    c.warmup_steps = 100;
    c.schedule = NN_SCHED_COSINE;
    c.total_steps = 100000;
    c.lr_min_frac = 0.01f;
    c.step_size = 20000;
    c.step_gamma = 0.1f;
    c.w_policy = 1.0f;
    c.w_value = 1.0f;
    c.w_legal = 1.0f;
    c.q_mix = 0.75f; /* docs/LEARNING.md: +186 Elo over 0.25 at equal CPU time */
    c.q_draw = 0.0f;
    c.bn_momentum = 0.01f;
    return c;
}

float nn_lr_at(const nn_train_config_t *c, int64_t step) {
    if (step < 0) step = 0;
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        return c->lr * (float)(step + 1) / (float)c->warmup_steps;
    int64_t s = step - (c->warmup_steps > 0 ? c->warmup_steps : 0);
    switch (c->schedule) {
    case NN_SCHED_COSINE: {
        int64_t T = c->total_steps - (c->warmup_steps > 0 ? c->warmup_steps : 0);
        double t = T > 0 ? (double)s / (double)T : 1.0;
        if (t > 1.0) t = 1.0;
        double f = c->lr_min_frac + (1.0 - c->lr_min_frac) * 0.5 * (1.0 + cos(3.14159265358979323846 * t));
        return (float)(c->lr * f);
    }
    case NN_SCHED_STEP: {
        int64_t k = c->step_size > 0 ? s / c->step_size : 0;
        return (float)(c->lr * pow(c->step_gamma, (double)k));
    }
    default: return c->lr;
    }
}

/* ---- trainer ----------------------------------------------------------------- */
struct nn_trainer {
    nn_net_t *net;
    nn_backend_t *be;
    nn_train_config_t cfg;
    int32_t max_batch;
    int64_t step;
    uint64_t uid;
    graph_seen_t seen; /* steps on staged batches */
    float *grads;    /* (n_params) same layout as the params */
    float *momentum; /* (n_params) optimizer state */
    void *arena;     /* one allocation: everything below */
    /* batch staging */
    uint8_t *planes;   /* (max_batch, nn_packed_bytes(in_planes)) */
    float *hand;       /* (max_batch, in_hand) */
    uint8_t *legal;    /* (max_batch, nn_packed_bytes(27)) */
    uint32_t *offsets; /* (max_batch + 1) */
    uint16_t *labels;  /* (max_batch * 2187) */
    float *probs;      /* (max_batch * 2187) */
    int8_t *result;    /* (max_batch) */
    float *q;          /* (max_batch) */
    /* targets */
    float *legal_t; /* (B, 2187) 0/1 */
    float *value_t; /* (B, 3) */
    /* activations, per unit u: c (B, cout, 81) conv out, z pre-activation
     * (aliases y for relu), y (B, cout, 81) output, mean/invstd (cout) */
    float *x0;                 /* (B, cin, 9, 9) */
    float **c, **z, **y, **mean, **invstd;
    float *fc1_z, *fc1_y;      /* (B, 128) */
    float *policy, *legal_out; /* (B, 2187) logits */
    float *value;              /* (B, 3) */
    /* gradients of activations */
    float *g[3];               /* (B, C, 9, 9) */
    float *gh;                 /* (B, 2C, 9, 9) head scratch (the merged heads' gradient) */
    float *hsplit;             /* the merged head conv's output, one head after the other: policy (B, C, 9, 9)
                                  at 0, legal at head_stride */
    int64_t head_stride;       /* max_batch*C*81 rounded up to 16 floats: where the second head starts (hsplit,
                                  and the legal unit's buffers inside the policy unit's) */
    float *gv;                 /* (B, 8, 9, 9) */
    float *gfc1;               /* (B, 128) */
    float *dpolicy, *dlegal;   /* (B, 2187) */
    float *dvalue;             /* (B, 3) */
    float *stats;              /* (NN_STAT_NB) */
    float *hyper;              /* (4) the step's lr and weight decay, then lr and 0 (sgd_step's hyper) */
    void *ws;
    infer_bufs_t f;            /* for nn_eval_batch (aliases the above) */
    float *rm_backup;          /* (n_stats) running stats saved by nn_train_grad */
    /* One step late (nn_train_step_launch): two metric records, each the
     * step's stats copied into host memory (page-locked where the backend has
     * host_alloc) and what turns them into nn_metrics_t. */
    float *late_host;          /* (2, NN_LATE_STRIDE) host; late_pinned: from host_alloc */
    int32_t late_pinned;
    struct {
        int32_t pending;       /* launched, metrics not read yet */
        int32_t fenced;        /* the copy was queued behind fence `slot`: wait for it */
        int64_t step;          /* the step count after this step: the record's name */
        int32_t B, n_policy;
        nn_train_config_t cfg; /* loss weights and schedule at launch */
    } late[2];
    float *ptrs[];             /* storage for c, z, y, mean, invstd */
};

#define NN_LATE_STRIDE 16 /* floats per record (>= NN_STAT_NB, 64 bytes) */

nn_trainer_t *nn_trainer_new(nn_net_t *net, const nn_train_config_t *cfg, int32_t max_batch,
                             char *err, size_t errlen) {
    if (max_batch < 1 || max_batch > (1 << 20)) {
        set_err(err, errlen, "nn_trainer_new: max_batch %d out of range", max_batch);
        return NULL;
    }
    int32_t nu = net->n_units;
    nn_trainer_t *tr = calloc(1, sizeof(*tr) + sizeof(float *) * 5 * (size_t)nu);
    if (!tr) {
        set_err(err, errlen, "nn_trainer_new: out of memory");
        return NULL;
    }
    nn_backend_t *be = net->be;
    tr->net = net;
    tr->be = be;
    tr->cfg = cfg ? *cfg : nn_train_config_default();
    tr->max_batch = max_batch;
    tr->uid = next_uid();
    tr->c = tr->ptrs;
    tr->z = tr->ptrs + nu;
    tr->y = tr->ptrs + 2 * nu;
    tr->mean = tr->ptrs + 3 * nu;
    tr->invstd = tr->ptrs + 4 * nu;
    const nn_net_config_t *nc = &net->cfg;
    int32_t B = max_batch, C = nc->channels, cin = nc->in_planes + nc->in_hand;
    size_t ws = max_conv_ws(net, be, B);
    tr->head_stride = ((int64_t)B * C * NN_HW + 15) & ~(int64_t)15;
    for (int pass = 0; pass < 2; pass++) {
        carve_t c = {pass ? tr->arena : NULL, 0};
        tr->planes = take(&c, (size_t)(B * nn_packed_bytes(nc->in_planes)));
        tr->hand = TAKEF(&c, (int64_t)B * nc->in_hand);
        tr->legal = take(&c, (size_t)(B * nn_packed_bytes(NN_POLICY_CH)));
        tr->offsets = take(&c, sizeof(uint32_t) * (size_t)(B + 1));
        tr->labels = take(&c, sizeof(uint16_t) * (size_t)B * NN_POLICY_NB);
        tr->probs = TAKEF(&c, (int64_t)B * NN_POLICY_NB);
        tr->result = take(&c, (size_t)B);
        tr->q = TAKEF(&c, B);
        tr->legal_t = TAKEF(&c, (int64_t)B * NN_POLICY_NB);
        tr->value_t = TAKEF(&c, (int64_t)B * NN_VALUE_NB);
        tr->x0 = TAKEF(&c, (int64_t)B * cin * NN_HW);
        int32_t pu = U_PCONV(nc->blocks), lu = U_LCONV(nc->blocks);
        for (int32_t u = 0; u < nu; u++) {
            const nn_unit_t *un = &net->units[u];
            int64_t n = (int64_t)B * un->cout * NN_HW;
            if (un->gamma < 0 || u == lu) { /* head outputs: the logits buffers below; legal: see below */
                tr->c[u] = tr->z[u] = tr->y[u] = tr->mean[u] = tr->invstd[u] = NULL;
                continue;
            }
            /* the head pair: (B, 2C, 81) merged, or the two units one after the other */
            int64_t k = u == pu ? 2 * tr->head_stride : n;
            tr->c[u] = TAKEF(&c, k);
            tr->y[u] = TAKEF(&c, k);
            tr->z[u] = nc->act == NN_ACT_RELU ? tr->y[u] : TAKEF(&c, k);
            tr->mean[u] = TAKEF(&c, (u == pu ? 2 : 1) * un->cout);
            tr->invstd[u] = TAKEF(&c, (u == pu ? 2 : 1) * un->cout);
        }
        if (tr->c[pu]) {
            tr->c[lu] = tr->c[pu] + tr->head_stride;
            tr->y[lu] = tr->y[pu] + tr->head_stride;
            tr->z[lu] = tr->z[pu] + tr->head_stride;
            tr->mean[lu] = tr->mean[pu] + C;
            tr->invstd[lu] = tr->invstd[pu] + C;
        }
        tr->fc1_z = TAKEF(&c, (int64_t)B * NN_VALUE_HIDDEN);
        tr->fc1_y = nc->act == NN_ACT_RELU ? tr->fc1_z : TAKEF(&c, (int64_t)B * NN_VALUE_HIDDEN);
        tr->policy = TAKEF(&c, (int64_t)B * NN_POLICY_NB);
        tr->legal_out = TAKEF(&c, (int64_t)B * NN_POLICY_NB);
        tr->value = TAKEF(&c, (int64_t)B * NN_VALUE_NB);
        for (int i = 0; i < 3; i++) tr->g[i] = TAKEF(&c, (int64_t)B * C * NN_HW);
        tr->gh = TAKEF(&c, (int64_t)B * 2 * C * NN_HW);
        tr->hsplit = TAKEF(&c, 2 * tr->head_stride);
        tr->gv = TAKEF(&c, (int64_t)B * NN_VALUE_CH * NN_HW);
        tr->gfc1 = TAKEF(&c, (int64_t)B * NN_VALUE_HIDDEN);
        tr->dpolicy = TAKEF(&c, (int64_t)B * NN_POLICY_NB);
        tr->dlegal = TAKEF(&c, (int64_t)B * NN_POLICY_NB);
        tr->dvalue = TAKEF(&c, (int64_t)B * NN_VALUE_NB);
        tr->stats = TAKEF(&c, NN_STAT_NB);
        tr->hyper = TAKEF(&c, 4);
        tr->rm_backup = TAKEF(&c, net->n_stats);
        tr->ws = take(&c, ws);
        if (pass == 0) {
            tr->arena = be->buf_alloc(be, c.off);
            tr->grads = be->buf_alloc(be, sizeof(float) * (size_t)net->n_params);
            tr->momentum = be->buf_alloc(be, sizeof(float) * (size_t)net->n_params);
            if (!tr->arena || !tr->grads || !tr->momentum) {
                nn_trainer_free(tr);
                set_oom(err, errlen, "nn_trainer_new", be, c.off + 2 * sizeof(float) * (size_t)net->n_params);
                return NULL;
            }
        }
    }
    /* nn_eval_batch runs the inference forward inside the training arena. */
    tr->f.x0 = tr->x0;
    tr->f.h[0] = tr->g[0];
    tr->f.h[1] = tr->g[1];
    tr->f.h[2] = tr->g[2];
    tr->f.v = tr->gv;
    tr->f.fc1 = tr->gfc1;
    tr->f.policy = tr->policy;
    tr->f.legal = tr->legal_out;
    tr->f.value = tr->value;
    tr->f.ws = tr->ws;
    _Static_assert(NN_STAT_NB <= NN_LATE_STRIDE, "a metric record holds the stats");
    size_t late_bytes = 2 * NN_LATE_STRIDE * sizeof(float);
    if (be->host_alloc && (tr->late_host = be->host_alloc(be, late_bytes)) != NULL) tr->late_pinned = 1;
    else if (!(tr->late_host = malloc(late_bytes))) {
        nn_trainer_free(tr);
        set_err(err, errlen, "nn_trainer_new: out of host memory");
        return NULL;
    }
    be->memset_zero(be, tr->grads, sizeof(float) * (size_t)net->n_params);
    be->memset_zero(be, tr->momentum, sizeof(float) * (size_t)net->n_params);
    if (be_check(be, "nn_trainer_new", err, errlen) != 0) {
        nn_trainer_free(tr);
        return NULL;
    }
    return tr;
}

void nn_trainer_free(nn_trainer_t *tr) {
    if (!tr) return;
    tr->be->buf_free(tr->be, tr->arena);
    tr->be->buf_free(tr->be, tr->grads);
    tr->be->buf_free(tr->be, tr->momentum);
    if (tr->late_pinned) tr->be->host_free(tr->be, tr->late_host);
    else free(tr->late_host);
    free(tr);
}

nn_net_t *nn_trainer_net(const nn_trainer_t *tr) { return tr->net; }
const nn_train_config_t *nn_trainer_config(const nn_trainer_t *tr) { return &tr->cfg; }
void nn_trainer_set_config(nn_trainer_t *tr, const nn_train_config_t *cfg) { tr->cfg = *cfg; }
float *nn_trainer_grads(nn_trainer_t *tr) { return tr->grads; }
float *nn_trainer_momentum(nn_trainer_t *tr) { return tr->momentum; }
int64_t nn_trainer_step_count(const nn_trainer_t *tr) { return tr->step; }
void nn_trainer_set_step_count(nn_trainer_t *tr, int64_t step) { tr->step = step; }
void nn_trainer_staging(nn_trainer_t *tr, nn_train_staging_t *st, int32_t *max_batch) {
    *st = (nn_train_staging_t){tr->planes, tr->hand, tr->legal, tr->offsets, tr->labels, tr->probs, tr->result, tr->q};
    if (max_batch) *max_batch = tr->max_batch;
}

/* The columns of a host batch (policy offsets checked already): labels
 * checked, then everything uploaded into the staging. */
static int upload_columns(nn_trainer_t *tr, const nn_batch_t *bt, char *err, size_t errlen) {
    const nn_net_config_t *nc = &tr->net->cfg;
    nn_backend_t *be = tr->be;
    int32_t B = bt->B;
    uint32_t nnz = bt->policy_offsets[B];
    for (uint32_t j = 0; j < nnz; j++)
        if (bt->policy_label[j] >= NN_POLICY_NB) {
            set_err(err, errlen, "policy_label[%u] = %u >= %d", j, bt->policy_label[j], NN_POLICY_NB);
            return -1;
        }
    be->upload(be, tr->planes, bt->planes, (size_t)(B * nn_packed_bytes(nc->in_planes)));
    if (nc->in_hand) be->upload(be, tr->hand, bt->hand, sizeof(float) * (size_t)B * nc->in_hand);
    be->upload(be, tr->legal, bt->legal, (size_t)(B * nn_packed_bytes(NN_POLICY_CH)));
    be->upload(be, tr->offsets, bt->policy_offsets, sizeof(uint32_t) * (size_t)(B + 1));
    if (nnz) {
        be->upload(be, tr->labels, bt->policy_label, sizeof(uint16_t) * nnz);
        be->upload(be, tr->probs, bt->policy_prob, sizeof(float) * nnz);
    }
    be->upload(be, tr->result, bt->result, (size_t)B);
    be->upload(be, tr->q, bt->root_q, sizeof(float) * (size_t)B);
    return 0;
}

/* Checks a batch's size and policy offsets on the host. */
static int check_batch(nn_trainer_t *tr, const nn_batch_t *bt, char *err, size_t errlen) {
    const nn_net_config_t *nc = &tr->net->cfg;
    int32_t B = bt->B;
    if (B < 1 || B > tr->max_batch) {
        set_err(err, errlen, "batch size %d out of range 1..%d", B, tr->max_batch);
        return -1;
    }
    if (!bt->policy_offsets || (!bt->staged && (!bt->planes || !bt->legal || !bt->result || !bt->root_q ||
                                                 (nc->in_hand && !bt->hand)))) {
        set_err(err, errlen, "batch is missing a column");
        return -1;
    }
    const uint32_t *off = bt->policy_offsets;
    if (off[0] != 0) {
        set_err(err, errlen, "policy_offsets[0] is %u, not 0", off[0]);
        return -1;
    }
    for (int32_t b = 0; b < B; b++)
        if (off[b + 1] < off[b] || off[b + 1] - off[b] > NN_POLICY_NB) {
            set_err(err, errlen, "policy_offsets[%d..%d] = %u..%u invalid", b, b + 1, off[b], off[b + 1]);
            return -1;
        }
    return 0;
}

/* The staged batch's inputs and targets expanded on the device. */
static void expand_batch(nn_trainer_t *tr, int32_t B) {
    const nn_net_config_t *nc = &tr->net->cfg;
    nn_backend_t *be = tr->be;
    be->expand_planes(be, tr->planes, tr->hand, B, nc->in_planes, nc->in_hand, tr->x0);
    be->expand_planes(be, tr->legal, NULL, B, NN_POLICY_CH, 0, tr->legal_t);
    be->value_target(be, tr->result, tr->q, B, tr->cfg.q_mix, tr->cfg.q_draw, tr->value_t);
}

/* Checks the batch, uploads a host batch's columns, expands: the batch ready
 * for a forward. */
static int upload_batch(nn_trainer_t *tr, const nn_batch_t *bt, char *err, size_t errlen) {
    if (check_batch(tr, bt, err, errlen) != 0) return -1;
    if (!bt->staged && upload_columns(tr, bt, err, errlen) != 0) return -1;
    expand_batch(tr, bt->B);
    return 0;
}

/* Training-mode unit forward: y = act(BN(conv(in)) + res), unit un (the
 * merged head pair: the policy unit with 2C output channels) into the
 * buffers of unit u. */
static void unit_fwd_train(nn_trainer_t *tr, const nn_unit_t *un, int32_t u, int32_t B, const float *in,
                           const float *res) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    int64_t n = (int64_t)B * un->cout * NN_HW;
    nn_act_t act = net->cfg.act;
    be->conv_fwd(be, in, P(net, un->w), NULL, B, un->cin, un->cout, un->k, tr->c[u], tr->ws);
    if (act == NN_ACT_RELU && be->bn_relu_fwd_train) { /* one op: z == y */
        be->bn_relu_fwd_train(be, tr->c[u], P(net, un->gamma), P(net, un->beta), res, B, un->cout, NN_HW,
                              NN_BN_EPS, tr->cfg.bn_momentum, S(net, un->rmean), S(net, un->rvar), tr->y[u],
                              tr->mean[u], tr->invstd[u]);
        return;
    }
    be->bn_fwd_train(be, tr->c[u], P(net, un->gamma), P(net, un->beta), B, un->cout, NN_HW,
                     NN_BN_EPS, tr->cfg.bn_momentum, S(net, un->rmean), S(net, un->rvar), tr->z[u],
                     tr->mean[u], tr->invstd[u]);
    if (act == NN_ACT_RELU) {
        be->act_fwd(be, tr->z[u], res, n, act, tr->y[u]); /* z == y */
    } else {
        if (res) be->add(be, tr->z[u], res, n, tr->z[u]);
        be->act_fwd(be, tr->z[u], NULL, n, act, tr->y[u]);
    }
}

/* Training-mode unit backward from dy (B, cout, 81) = gradient at the unit's
 * output; dy is overwritten (dBN input). Writes dW, dgamma, dbeta, and the
 * input gradient into dx (accumulate: +=) when dx != NULL. If dres != NULL the
 * gradient at the residual sum is copied there first. */
static void unit_bwd(nn_trainer_t *tr, const nn_unit_t *un, int32_t u, int32_t B, const float *in, float *dy,
                     float *dres, float *dx, int32_t accumulate) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    int64_t n = (int64_t)B * un->cout * NN_HW;
    float *g = tr->grads;
    if (net->cfg.act == NN_ACT_RELU && be->bn_relu_bwd) { /* one op: z == y */
        be->bn_relu_bwd(be, tr->c[u], tr->z[u], dy, P(net, un->gamma), tr->mean[u], tr->invstd[u], B, un->cout,
                        NN_HW, dres, dy, g + net->tensors[un->gamma].offset, g + net->tensors[un->beta].offset);
    } else {
        be->act_bwd(be, dy, tr->z[u], n, net->cfg.act, dy);
        if (dres) be->copy(be, dres, dy, sizeof(float) * (size_t)n);
        be->bn_bwd(be, tr->c[u], dy, P(net, un->gamma), tr->mean[u], tr->invstd[u], B, un->cout, NN_HW,
                   dy, g + net->tensors[un->gamma].offset, g + net->tensors[un->beta].offset);
    }
    be->conv_bwd_filter(be, in, dy, B, un->cin, un->cout, un->k, g + net->tensors[un->w].offset,
                        NULL, tr->ws);
    if (dx) be->conv_bwd_data(be, dy, P(net, un->w), B, un->cin, un->cout, un->k, dx, accumulate, tr->ws);
}

static void losses(nn_trainer_t *tr, int32_t B) {
    nn_backend_t *be = tr->be;
    const nn_train_config_t *c = &tr->cfg;
    be->policy_loss(be, tr->policy, tr->offsets, tr->labels, tr->probs, B, NN_POLICY_NB,
                    c->w_policy / (float)B, tr->dpolicy, tr->stats);
    be->value_loss(be, tr->value, tr->value_t, B, NN_VALUE_NB, c->w_value / (float)B, tr->dvalue,
                   tr->stats);
    be->legal_loss(be, tr->legal_out, tr->legal_t, B, NN_POLICY_NB,
                   c->w_legal / ((float)B * NN_POLICY_NB), tr->dlegal, tr->stats);
}

static void forward_backward(nn_trainer_t *tr, int32_t B) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    const nn_net_config_t *nc = &net->cfg;
    int32_t n = nc->blocks, C = nc->channels;
    nn_act_t act = nc->act;
    float *g = tr->grads;
    const nn_unit_t *U = net->units;
#define GRAD(t) (g + net->tensors[(t)].offset)
    /* forward */
    unit_fwd_train(tr, &U[U_STEM], U_STEM, B, tr->x0, NULL);
    for (int32_t i = 0; i < n; i++) {
        unit_fwd_train(tr, &U[1 + 2 * i], 1 + 2 * i, B, tr->y[2 * i], NULL);
        unit_fwd_train(tr, &U[2 + 2 * i], 2 + 2 * i, B, tr->y[1 + 2 * i], tr->y[2 * i]);
    }
    const float *T = tr->y[2 * n]; /* trunk output (B, C, 9, 9) */
    const nn_unit_t *po = &U[U_POUT(n)], *lo = &U[U_LOUT(n)];
    const int32_t PC = U_PCONV(n), LC = U_LCONV(n);
    /* The head pair: one unit of 2C channels (merged; its output split into
     * hsplit, one head after the other), or two units. hp / hl: the inputs
     * of the two output convolutions, (B, C, 9, 9) each. */
    nn_unit_t pair = U[PC];
    pair.cout = 2 * C;
    const float *hp, *hl;
    if (net->merge_heads) {
        unit_fwd_train(tr, &pair, PC, B, T, NULL); /* y[PC] (B, 2C, 9, 9) */
        channel_slice(be, tr->hsplit, tr->y[PC], B, C, 2 * C, 0, 0);
        channel_slice(be, tr->hsplit + tr->head_stride, tr->y[PC], B, C, 2 * C, C, 0);
        hp = tr->hsplit;
        hl = tr->hsplit + tr->head_stride; /* 64-byte aligned, as every conv operand */
    } else {
        unit_fwd_train(tr, &U[PC], PC, B, T, NULL);
        unit_fwd_train(tr, &U[LC], LC, B, T, NULL);
        hp = tr->y[PC];
        hl = tr->y[LC];
    }
    be->conv_fwd(be, hp, P(net, po->w), P(net, po->bias), B, C, NN_POLICY_CH, 1, tr->policy, tr->ws);
    be->conv_fwd(be, hl, P(net, lo->w), P(net, lo->bias), B, C, NN_POLICY_CH, 1, tr->legal_out, tr->ws);
    unit_fwd_train(tr, &U[U_VCONV(n)], U_VCONV(n), B, T, NULL);
    const float *vy = tr->y[U_VCONV(n)];
    be->dense_fwd(be, vy, P(net, net->fc1_w), P(net, net->fc1_b), B, NN_VALUE_CH * NN_HW,
                  NN_VALUE_HIDDEN, tr->fc1_z);
    be->act_fwd(be, tr->fc1_z, NULL, (int64_t)B * NN_VALUE_HIDDEN, act, tr->fc1_y);
    be->dense_fwd(be, tr->fc1_y, P(net, net->fc2_w), P(net, net->fc2_b), B, NN_VALUE_HIDDEN,
                  NN_VALUE_NB, tr->value);
    losses(tr, B);

    /* backward: heads into dT = g[0]; g[1], g[2] are free until the trunk's turn */
    float *dT = tr->g[0];
    be->conv_bwd_filter(be, hp, tr->dpolicy, B, C, NN_POLICY_CH, 1, GRAD(po->w), GRAD(po->bias), tr->ws);
    be->conv_bwd_filter(be, hl, tr->dlegal, B, C, NN_POLICY_CH, 1, GRAD(lo->w), GRAD(lo->bias), tr->ws);
    if (net->merge_heads) {
        /* both halves of the pair's gradient, then one backward pass (one
         * backward-data, one backward-filter) for the 2C channels */
        be->conv_bwd_data(be, tr->dpolicy, P(net, po->w), B, C, NN_POLICY_CH, 1, tr->g[1], 0, tr->ws);
        be->conv_bwd_data(be, tr->dlegal, P(net, lo->w), B, C, NN_POLICY_CH, 1, tr->g[2], 0, tr->ws);
        channel_slice(be, tr->g[1], tr->gh, B, C, 2 * C, 0, 1);
        channel_slice(be, tr->g[2], tr->gh, B, C, 2 * C, C, 1);
        unit_bwd(tr, &pair, PC, B, T, tr->gh, NULL, dT, 0);
    } else {
        be->conv_bwd_data(be, tr->dpolicy, P(net, po->w), B, C, NN_POLICY_CH, 1, tr->gh, 0, tr->ws);
        unit_bwd(tr, &U[PC], PC, B, T, tr->gh, NULL, dT, 0);
        be->conv_bwd_data(be, tr->dlegal, P(net, lo->w), B, C, NN_POLICY_CH, 1, tr->gh, 0, tr->ws);
        unit_bwd(tr, &U[LC], LC, B, T, tr->gh, NULL, dT, 1);
    }
    be->dense_bwd(be, tr->fc1_y, P(net, net->fc2_w), tr->dvalue, B, NN_VALUE_HIDDEN, NN_VALUE_NB,
                  tr->gfc1, GRAD(net->fc2_w), GRAD(net->fc2_b));
    be->act_bwd(be, tr->gfc1, tr->fc1_z, (int64_t)B * NN_VALUE_HIDDEN, act, tr->gfc1);
    be->dense_bwd(be, vy, P(net, net->fc1_w), tr->gfc1, B, NN_VALUE_CH * NN_HW, NN_VALUE_HIDDEN,
                  tr->gv, GRAD(net->fc1_w), GRAD(net->fc1_b));
    unit_bwd(tr, &U[U_VCONV(n)], U_VCONV(n), B, T, tr->gv, NULL, dT, 1);

    /* trunk: D = gradient at the block output, S = at the block input */
    float *D = tr->g[0], *Sg = tr->g[1], *E = tr->g[2];
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t u1 = 1 + 2 * i, u2 = 2 + 2 * i;
        /* u2: D -> skip gradient copied to Sg, conv input grad into E */
        unit_bwd(tr, &U[u2], u2, B, tr->y[u1], D, Sg, E, 0);
        /* u1: E -> input grad added to Sg */
        unit_bwd(tr, &U[u1], u1, B, tr->y[2 * i], E, NULL, Sg, 1);
        float *t = D;
        D = Sg;
        Sg = t;
    }
    unit_bwd(tr, &U[U_STEM], U_STEM, B, tr->x0, D, NULL, NULL, 0);
#undef GRAD
}

/* Positions of a batch that carry a policy target (playout-cap randomization
 * leaves the fast-search positions without one). */
static int32_t policy_positions(const nn_batch_t *bt) {
    int32_t n = 0;
    for (int32_t b = 0; b < bt->B; b++) n += bt->policy_offsets[b + 1] > bt->policy_offsets[b];
    return n;
}

/* The metrics of a step from its stats s (host copy): config c, step = the
 * step count before it (m->step; callers of an update set step + 1). */
static void metrics_from_stats(const float *s, const nn_train_config_t *c, int64_t step, int32_t B,
                               int32_t n_policy, int grad, nn_metrics_t *m) {
    memset(m, 0, sizeof(*m));
    m->step = step;
    m->lr = nn_lr_at(c, step);
    m->policy_positions = n_policy;
    /* The objective the step minimised: the policy sum over all B positions. */
    double policy_per_position = s[NN_STAT_POLICY_LOSS] / (double)B;
    m->value_loss = s[NN_STAT_VALUE_LOSS] / (double)B;
    m->legal_loss = s[NN_STAT_LEGAL_LOSS] / ((double)B * NN_POLICY_NB);
    m->loss = c->w_policy * policy_per_position + c->w_value * m->value_loss + c->w_legal * m->legal_loss;
    /* What a person reads: over the positions that have a target. */
    m->policy_loss = n_policy > 0 ? s[NN_STAT_POLICY_LOSS] / (double)n_policy : NAN;
    m->policy_acc = n_policy > 0 ? s[NN_STAT_POLICY_CORRECT] / (double)n_policy : NAN;
    double tp = s[NN_STAT_LEGAL_TP], fp = s[NN_STAT_LEGAL_FP], fn = s[NN_STAT_LEGAL_FN];
    m->legal_f1 = (2 * tp + fp + fn) > 0 ? 2 * tp / (2 * tp + fp + fn) : 1.0;
    m->legal_tp = tp, m->legal_fp = fp, m->legal_fn = fn;
    m->grad_norm = grad ? sqrt((double)s[NN_STAT_GNORM2]) : 0.0;
}

static void fill_metrics(nn_trainer_t *tr, int32_t B, int32_t n_policy, int grad, nn_metrics_t *m) {
    float s[NN_STAT_NB];
    tr->be->download(tr->be, s, tr->stats, sizeof(s));
    metrics_from_stats(s, &tr->cfg, tr->step, B, n_policy, grad, m);
}

/* The learning rate of the step about to be queued, and the weight decay,
 * into tr->hyper (queued before the step: the step reads them on the device,
 * so a recorded step replays with this step's values). */
static void hyper_upload(nn_trainer_t *tr) {
    float lr = nn_lr_at(&tr->cfg, tr->step), h[4] = {lr, tr->cfg.weight_decay, lr, 0.0f};
    tr->be->upload(tr->be, tr->hyper, h, sizeof h);
}

/* The SGD step with the gradients in tr->grads and their squared norm in
 * tr->stats[NN_STAT_GNORM2] (clipping), lr and weight decay from tr->hyper. */
static void sgd_apply(nn_trainer_t *tr) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    nn_sgd_args_t a = {.momentum = tr->cfg.momentum,
                       .nesterov = tr->cfg.nesterov,
                       .clip_norm = tr->cfg.clip_norm,
                       .hyper = tr->hyper};
    be->sgd_step(be, net->params, tr->grads, tr->momentum, net->n_decay, tr->stats + NN_STAT_GNORM2, &a);
    a.hyper = tr->hyper + 2; /* no decay: BN parameters and biases */
    be->sgd_step(be, net->params + net->n_decay, tr->grads + net->n_decay, tr->momentum + net->n_decay,
                 net->n_params - net->n_decay, tr->stats + NN_STAT_GNORM2, &a);
}

/* The ops of a step, queued: the batch uploaded, forward, losses, backward,
 * the gradient norm into tr->stats and, when update, the SGD step. 0, or -1
 * with err for a failed backend or an invalid batch (nothing queued). */
typedef struct {
    nn_trainer_t *tr;
    int32_t B, update;
} step_args_t;

/* A step's device work, from the staged batch to the updated weights: what
 * a recording of the step holds. */
static void step_ops(void *arg) {
    const step_args_t *a = arg;
    nn_trainer_t *tr = a->tr;
    nn_backend_t *be = tr->be;
    expand_batch(tr, a->B);
    be->memset_zero(be, tr->stats, sizeof(float) * NN_STAT_NB);
    forward_backward(tr, a->B);
    be->sum_squares(be, tr->grads, tr->net->n_params, tr->stats + NN_STAT_GNORM2);
    if (a->update) sgd_apply(tr);
}

/* The key of a recorded step: the trainer, the batch size and every setting
 * the recorded ops hold as a value (the lr and weight decay are read from
 * tr->hyper instead). */
static uint64_t step_key(const nn_trainer_t *tr, int32_t B) {
    const nn_train_config_t *c = &tr->cfg;
    float v[9] = {c->momentum, c->clip_norm, c->w_policy, c->w_value, c->w_legal, c->q_mix, c->q_draw, c->bn_momentum,
                  (float)c->nesterov};
    uint64_t h = compat_mix64(tr->uid * 0x9E3779B97F4A7C15ull + (uint64_t)B);
    h = compat_mix64(h ^ (uint64_t)tr->net->merge_heads ^ 0x7472616E00000000ull); /* "tran" */
    for (int i = 0; i < 9; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        h = compat_mix64(h ^ u);
    }
    return h;
}

static int queue_step(nn_trainer_t *tr, const nn_batch_t *bt, int update, const char *what, char *err,
                      size_t errlen) {
    nn_backend_t *be = tr->be;
    if (be_check(be, what, err, errlen) != 0) return -1;
    if (check_batch(tr, bt, err, errlen) != 0) return -1;
    if (!bt->staged && upload_columns(tr, bt, err, errlen) != 0) return -1;
    if (update) hyper_upload(tr);
    step_args_t a = {tr, bt->B, update};
    /* A step on a staged batch (gathered on the device) is device work only,
     * from the same buffers every time: recorded where the backend records.
     * A host batch's uploads stay outside any recording. */
    if (bt->staged && update) run_recorded(be, &tr->seen, step_key(tr, bt->B), step_ops, &a);
    else step_ops(&a);
    return 0;
}

static int train_common(nn_trainer_t *tr, const nn_batch_t *bt, nn_metrics_t *m, int update,
                        char *err, size_t errlen) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    const char *what = update ? "nn_train_step" : "nn_train_grad";
    size_t stats_bytes = sizeof(float) * (size_t)net->n_stats;
    if (!update) be->copy(be, tr->rm_backup, net->stats, stats_bytes); /* the forward moves them */
    if (queue_step(tr, bt, update, what, err, errlen) != 0) return -1;
    if (!update) be->copy(be, net->stats, tr->rm_backup, stats_bytes);
    int32_t B = bt->B;
    if (m) fill_metrics(tr, B, policy_positions(bt), 1, m);
    if (be->sync) be->sync(be);
    if (update) nn_net_mark_dirty(net); /* whatever happened, the weights were written */
    if (be_check(be, what, err, errlen) != 0) return -1;
    if (m && update) m->step = tr->step + 1;
    if (update) tr->step++;
    return 0;
}

int nn_train_step(nn_trainer_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    return train_common(tr, bt, m, 1, err, errlen);
}

/* ---- one step late ----------------------------------------------------------- */
int nn_train_step_launch(nn_trainer_t *tr, const nn_batch_t *bt, int64_t *step, char *err, size_t errlen) {
    nn_net_t *net = tr->net;
    nn_backend_t *be = tr->be;
    const char *what = "nn_train_step";
    int32_t slot = tr->late[0].pending ? 1 : 0;
    if (tr->late[slot].pending) {
        set_err(err, errlen, "%s: the metrics of steps %lld and %lld were not read (nn_train_step_metrics)", what,
                (long long)tr->late[0].step, (long long)tr->late[1].step);
        return -1;
    }
    if (queue_step(tr, bt, 1, what, err, errlen) != 0) return -1;
    int32_t B = bt->B;
    /* The stats into this slot's record: queued behind a fence where the
     * backend can (the next step is queued before anyone waits for it), else
     * a download (the CPU's ops are done already: nothing to wait for). */
    float *h = tr->late_host + (size_t)slot * NN_LATE_STRIDE;
    int fenced = tr->late_pinned && be->download_async && be->fence_record && be->fence_wait;
    if (fenced) {
        be->download_async(be, h, tr->stats, sizeof(float) * NN_STAT_NB);
        be->fence_record(be, slot);
    } else {
        be->download(be, h, tr->stats, sizeof(float) * NN_STAT_NB);
    }
    nn_net_mark_dirty(net); /* whatever happened, the weights were written */
    if (be_check(be, what, err, errlen) != 0) return -1; /* a failure seen so far (queued work: at the read) */
    tr->late[slot].pending = 1;
    tr->late[slot].fenced = fenced;
    tr->late[slot].step = tr->step + 1;
    tr->late[slot].B = B;
    tr->late[slot].n_policy = policy_positions(bt);
    tr->late[slot].cfg = tr->cfg;
    tr->step++;
    if (step) *step = tr->step;
    return 0;
}

int nn_train_step_metrics(nn_trainer_t *tr, int64_t step, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    int32_t slot = -1;
    for (int32_t i = 0; i < 2; i++)
        if (tr->late[i].pending && tr->late[i].step == step) slot = i;
    if (slot < 0) {
        set_err(err, errlen, "nn_train_step_metrics: no metrics of step %lld on their way", (long long)step);
        return -1;
    }
    tr->late[slot].pending = 0;
    /* A record copied by a download was complete at launch; a fenced one is
     * complete once its fence has passed on a backend that has not failed. */
    if (tr->late[slot].fenced) {
        be->fence_wait(be, slot);
        if (be_check(be, "nn_train_step", err, errlen) != 0) return -1;
    }
    if (m) {
        metrics_from_stats(tr->late_host + (size_t)slot * NN_LATE_STRIDE, &tr->late[slot].cfg, step - 1,
                           tr->late[slot].B, tr->late[slot].n_policy, 1, m);
        m->step = step;
    }
    return 0;
}

int32_t nn_train_steps_pending(const nn_trainer_t *tr) { return tr->late[0].pending + tr->late[1].pending; }

int nn_train_grad(nn_trainer_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    return train_common(tr, bt, m, 0, err, errlen);
}

int nn_train_step_grads(nn_trainer_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    if (be_check(be, "nn_train_step_grads", err, errlen) != 0) return -1;
    if (upload_batch(tr, bt, err, errlen) != 0) return -1;
    be->memset_zero(be, tr->stats, sizeof(float) * NN_STAT_NB);
    forward_backward(tr, bt->B); /* running statistics updated, as in nn_train_step */
    be->sum_squares(be, tr->grads, tr->net->n_params, tr->stats + NN_STAT_GNORM2);
    if (m) fill_metrics(tr, bt->B, policy_positions(bt), 1, m);
    if (be->sync) be->sync(be);
    nn_net_mark_dirty(tr->net); /* the running statistics changed */
    return be_check(be, "nn_train_step_grads", err, errlen);
}

int nn_train_step_apply(nn_trainer_t *tr, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    if (be_check(be, "nn_train_step_apply", err, errlen) != 0) return -1;
    float *g2 = tr->stats + NN_STAT_GNORM2;
    be->memset_zero(be, g2, sizeof(float));
    be->sum_squares(be, tr->grads, tr->net->n_params, g2); /* the norm of the gradients as they are now */
    hyper_upload(tr);
    sgd_apply(tr);
    float h = 0.0f;
    if (m) be->download(be, &h, g2, sizeof h);
    if (be->sync) be->sync(be);
    nn_net_mark_dirty(tr->net);
    if (be_check(be, "nn_train_step_apply", err, errlen) != 0) return -1;
    if (m) {
        m->lr = nn_lr_at(&tr->cfg, tr->step);
        m->grad_norm = sqrt((double)h);
        m->step = tr->step + 1;
    }
    tr->step++;
    return 0;
}

int nn_eval_batch(nn_trainer_t *tr, const nn_batch_t *bt, nn_metrics_t *m, char *err, size_t errlen) {
    nn_backend_t *be = tr->be;
    if (be_check(be, "nn_eval_batch", err, errlen) != 0) return -1;
    if (upload_batch(tr, bt, err, errlen) != 0) return -1;
    int32_t B = bt->B;
    net_fold(tr->net, be);
    forward_infer(tr->net, be, B, &tr->f, NN_OUT_ALL);
    be->memset_zero(be, tr->stats, sizeof(float) * NN_STAT_NB);
    losses(tr, B);
    if (m) fill_metrics(tr, B, policy_positions(bt), 0, m);
    if (be->sync) be->sync(be);
    return be_check(be, "nn_eval_batch", err, errlen);
}
