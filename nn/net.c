/* net.c - the Koma network's definition composed from backend ops:
 * parameters, BN folding, inference contexts and the inference forward.
 *
 * Owns: the tensor table and the single parameter / statistics / folded
 * allocations of a net, the inference arena (nn_ctx) and the order in which
 * the inference ops run.
 * Does not own: the training step, losses, optimizer, schedule and metrics
 * (nn/net_train.c), how an op computes (the backend), files (nn/weights.c).
 * Errors: every public call that runs ops checks the backend's sticky error
 * (nn/backend.h) before and after them and fails with its message; out of
 * memory names host or device memory and the bytes asked.
 */
#include "nn/net.h"
#include "nn/net_int.h"
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
int nnet_be_check(nn_backend_t *be, const char *what, char *err, size_t errlen) {
    const char *e = nn_backend_error(be);
    if (!e) return 0;
    set_err(err, errlen, "%s: %s backend failed: %s", what, be->name, e);
    return -1;
}

/* "out of host memory allocating N bytes (cpu backend)" and the like; host
 * memory under an address-space limit names it (ulimit -v). */
void nnet_set_oom(char *err, size_t errlen, const char *what, const nn_backend_t *be, size_t bytes) {
    const char *mem = nn_backend_memory(be);
    char l[96] = "";
    if (strcmp(mem, "host") == 0) compat_address_space_note(l, sizeof l);
    set_err(err, errlen, "%s: out of %s memory%s allocating %llu bytes (%s backend)", what, mem, l,
            (unsigned long long)bytes, be->name);
}

/* ---- size string ---------------------------------------------------------- */
/* "BxC[gK][m][o]" -> blocks, channels, gpool (0 without the suffix), heads. */
static int arch_parse(const char *s, int32_t *blocks, int32_t *channels, int32_t *gpool, int32_t *heads) {
    if (!s) return -1;
    int64_t v[3] = {0, 0, 0};
    int part = 0, digits = 0;
    int32_t hd = 0;
    const char *p = s;
    for (;; p++) {
        if (*p >= '0' && *p <= '9') {
            v[part] = v[part] * 10 + (*p - '0');
            if (v[part] > 1000000) return -1;
            digits++;
        } else if ((*p == 'x' || *p == 'X') && part == 0 && digits) {
            part = 1;
            digits = 0;
        } else if ((*p == 'g' || *p == 'G') && part == 1 && digits) {
            part = 2;
            digits = 0;
        } else if (part >= 1 && digits) {
            break; /* the head suffixes, or the end */
        } else {
            return -1;
        }
    }
    if (*p == 'm' || *p == 'M') hd |= NN_HEAD_MOVES_LEFT, p++;
    if (*p == 'o' || *p == 'O') hd |= NN_HEAD_OPP_POLICY, p++;
    if (*p != '\0') return -1;
    if (v[0] < 1 || v[0] > NN_MAX_BLOCKS || v[1] < 1 || v[1] > NN_MAX_CHANNELS) return -1;
    if (part == 2 && (v[2] < 1 || v[2] > v[0])) return -1;
    *blocks = (int32_t)v[0];
    *channels = (int32_t)v[1];
    *gpool = (int32_t)v[2];
    *heads = hd;
    return 0;
}

int nn_net_size_parse(const char *s, int32_t *blocks, int32_t *channels) {
    int32_t g, h;
    return arch_parse(s, blocks, channels, &g, &h);
}

char *nn_net_size_format(int32_t blocks, int32_t channels, char *buf, size_t len) {
    snprintf(buf, len, "%dx%d", (int)blocks, (int)channels);
    return buf;
}

int nn_net_arch_parse(const char *s, nn_net_config_t *cfg) {
    int32_t b, c, g, h;
    if (arch_parse(s, &b, &c, &g, &h) != 0) return -1;
    cfg->blocks = b;
    cfg->channels = c;
    cfg->gpool = g;
    cfg->heads = h;
    return 0;
}

char *nn_net_arch_format(const nn_net_config_t *cfg, char *buf, size_t len) {
    char g[16] = "";
    if (cfg->gpool > 0) snprintf(g, sizeof g, "g%d", (int)cfg->gpool);
    snprintf(buf, len, "%dx%d%s%s%s", (int)cfg->blocks, (int)cfg->channels, g,
             (cfg->heads & NN_HEAD_MOVES_LEFT) ? "m" : "", (cfg->heads & NN_HEAD_OPP_POLICY) ? "o" : "");
    return buf;
}

int nn_net_arch_is(const char *s, const nn_net_config_t *cfg) {
    int32_t b, c, g, h;
    return arch_parse(s, &b, &c, &g, &h) == 0 && b == cfg->blocks && c == cfg->channels && g == cfg->gpool &&
           h == cfg->heads;
}

int nn_net_gpool_block(const nn_net_config_t *cfg, int32_t i) {
    return cfg->gpool > 0 && (i + 1) % cfg->gpool == 0;
}

/* ---- the net ------------------------------------------------------------- */

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
            int last = strstr(nm, ".out.") || strstr(nm, "fc2") || strstr(nm, ".gpool.");
            double std = sqrt((last ? 1.0 : 2.0) / (double)fan_in);
            for (int64_t j = 0; j < t->numel; j++) d[j] = (float)(std * rand_normal(&s));
        }
    }
}

/* nn_net_new's refusals: a config out of range, or a head or block the
 * backend cannot run. */
static int net_config_check(const nn_backend_t *be, const nn_net_config_t *cfg, char *err, size_t errlen) {
    if (!be || !cfg) {
        set_err(err, errlen, "nn_net_new: no backend or config");
        return -1;
    }
    if (cfg->blocks < 1 || cfg->blocks > NN_MAX_BLOCKS || cfg->channels < 1 ||
        cfg->channels > NN_MAX_CHANNELS || cfg->in_planes < 1 || cfg->in_planes > 4096 ||
        cfg->in_hand < 0 || cfg->in_hand > 4096 || cfg->act < 0 || cfg->act >= NN_ACT_NB || cfg->gpool < 0 ||
        cfg->gpool > cfg->blocks || (cfg->heads & ~NN_HEAD_ALL)) {
        set_err(err, errlen,
                "nn_net_new: invalid config (blocks %d, channels %d, planes %d, hand %d, act %d, gpool %d, heads %d)",
                cfg->blocks, cfg->channels, cfg->in_planes, cfg->in_hand, (int)cfg->act, (int)cfg->gpool,
                (int)cfg->heads);
        return -1;
    }
    if ((cfg->heads & NN_HEAD_MOVES_LEFT) && !be->moves_left_loss) {
        char a[48];
        set_err(err, errlen, "nn_net_new: the %s backend has no moves-left head (a net like %s); use a net "
                "without the 'm' suffix or another backend", be->name, nn_net_arch_format(cfg, a, sizeof a));
        return -1;
    }
    if (cfg->gpool > 0 && !(be->pool_fwd && be->pool_bwd && be->chan_bias_fwd && be->chan_bias_bwd)) {
        set_err(err, errlen, "nn_net_new: the %s backend has no global pooling (a net like %dx%dg%d); use a plain "
                "net (%dx%d) or another backend", be->name, cfg->blocks, cfg->channels, cfg->gpool, cfg->blocks,
                cfg->channels);
        return -1;
    }
    return 0;
}

/* The net's units and tensors in their order (names, shapes, kinds): the
 * stem, the blocks (with their global-pooling tensors), the heads, then the
 * optional heads. */
static void net_declare(nn_net_t *net) {
    const nn_net_config_t *cfg = &net->cfg;
    int32_t n = cfg->blocks, C = cfg->channels;
    int32_t cin = cfg->in_planes + cfg->in_hand;
    add_unit(net, U_STEM, "stem", "conv", "bn", cin, C, 3);
    for (int32_t i = 0; i < n; i++) {
        char pre[32];
        snprintf(pre, sizeof(pre), "blocks.%d", (int)i);
        add_unit(net, 1 + 2 * i, pre, "conv1", "bn1", C, C, 3);
        add_unit(net, 2 + 2 * i, pre, "conv2", "bn2", C, C, 3);
        net->gp_w[i] = net->gp_b[i] = -1;
        if (nn_net_gpool_block(cfg, i)) {
            int64_t sw[2] = {C, 2 * C}, sb[1] = {C};
            net->gp_w[i] = add_tensor(net, NN_TENSOR_PARAM, 1, 2, sw, "%s.gpool.weight", pre);
            net->gp_b[i] = add_tensor(net, NN_TENSOR_PARAM, 0, 1, sb, "%s.gpool.bias", pre);
        }
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
    net->ml_fc1_w = net->ml_fc1_b = net->ml_fc2_w = net->ml_fc2_b = -1;
    if (net->u_ml >= 0) { /* appended: a net without the head keeps every offset and its random weights */
        add_unit(net, net->u_ml, "moves_left", "conv", "bn", C, NN_ML_CH, 1);
        int64_t m1[2] = {NN_ML_HIDDEN, NN_ML_CH * NN_HW}, mb1[1] = {NN_ML_HIDDEN}, m2[2] = {1, NN_ML_HIDDEN}, mb2[1] = {1};
        net->ml_fc1_w = add_tensor(net, NN_TENSOR_PARAM, 1, 2, m1, "moves_left.fc1.weight");
        net->ml_fc1_b = add_tensor(net, NN_TENSOR_PARAM, 0, 1, mb1, "moves_left.fc1.bias");
        net->ml_fc2_w = add_tensor(net, NN_TENSOR_PARAM, 1, 2, m2, "moves_left.fc2.weight");
        net->ml_fc2_b = add_tensor(net, NN_TENSOR_PARAM, 0, 1, mb2, "moves_left.fc2.bias");
    }
    if (net->u_opp >= 0) add_unit(net, net->u_opp, "opp_policy", "out", NULL, C, NN_POLICY_CH, 1);
}

/* Offsets: decayed params, then the other params; stats apart. Every
 * tensor starts 16-float aligned so backends may vectorise per tensor,
 * except the legal head conv's, each right after its policy twin (the
 * pair is one tensor of 2C output channels: merge_heads). */
static void net_layout(nn_net_t *net) {
    int32_t n = net->cfg.blocks;
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
}

nn_net_t *nn_net_new(nn_backend_t *be, const nn_net_config_t *cfg, uint64_t seed, char *err, size_t errlen) {
    if (net_config_check(be, cfg, err, errlen) != 0) return NULL;
    nn_net_t *net = calloc(1, sizeof(*net));
    if (!net) {
        set_err(err, errlen, "nn_net_new: out of memory");
        return NULL;
    }
    int32_t n = cfg->blocks;
    int32_t max_tensors = U_COUNT(n) * 5 + 8 + 2 * n + 5 + 2 + 4;
    net->tensors = calloc((size_t)max_tensors, sizeof(nn_tensor_info_t));
    /* the optional heads' units after the fixed ones */
    net->u_ml = net->u_opp = -1;
    net->n_units = U_COUNT(n);
    if (cfg->heads & NN_HEAD_MOVES_LEFT) net->u_ml = net->n_units++;
    if (cfg->heads & NN_HEAD_OPP_POLICY) net->u_opp = net->n_units++;
    net->units = calloc((size_t)net->n_units, sizeof(nn_unit_t));
    if (!net->tensors || !net->units) {
        nn_net_free(net);
        set_err(err, errlen, "nn_net_new: out of memory");
        return NULL;
    }
    net->be = be;
    net->cfg = *cfg;
    compat_mutex_init(&net->mu);
    net_declare(net);
    KOMA_ASSERT(net->n_tensors <= max_tensors);
    net_layout(net);
    const char *merge = getenv("KOMA_MERGE_HEADS");
    net->merge_heads = !(merge && strcmp(merge, "0") == 0);

    size_t bytes = sizeof(float) * (size_t)(net->n_params + net->n_stats + net->n_folded);
    net->params = be->buf_alloc(be, sizeof(float) * (size_t)net->n_params);
    net->stats = be->buf_alloc(be, sizeof(float) * (size_t)net->n_stats);
    net->folded = be->buf_alloc(be, sizeof(float) * (size_t)net->n_folded);
    if (!net->params || !net->stats || !net->folded) {
        nn_net_free(net);
        nnet_set_oom(err, errlen, "nn_net_new", be, bytes);
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
    if (nnet_be_check(be, "nn_net_new", err, errlen) != 0) {
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
           a->features_version == b->features_version && a->gpool == b->gpool && a->heads == b->heads;
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
    if (nnet_be_check(src->be, what, err, errlen) != 0 || nnet_be_check(dst->be, what, err, errlen) != 0) return -1;
    dst->be->copy(dst->be, dst->params, src->params, sizeof(float) * (size_t)src->n_params);
    dst->be->copy(dst->be, dst->stats, src->stats, sizeof(float) * (size_t)src->n_stats);
    if (dst->be->sync) dst->be->sync(dst->be);
    nn_net_mark_dirty(dst);
    return nnet_be_check(dst->be, what, err, errlen);
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
    int rc = nnet_be_check(be, "nn_net_check_finite", err, errlen);
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


/* Refolds BN into the inference weights when params or stats changed. */
void nnet_fold(nn_net_t *net, nn_backend_t *be) {
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

size_t nnet_max_conv_ws(const nn_net_t *net, nn_backend_t *be, int32_t B) {
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
void nnet_run_recorded(nn_backend_t *be, graph_seen_t *seen, uint64_t key, void (*ops)(void *), void *arg) {
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
uint64_t nnet_next_uid(void) {
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
    f->gp = net->cfg.gpool > 0 ? TAKEF(c, (int64_t)B * 2 * C) : NULL;
    f->gb = net->cfg.gpool > 0 ? TAKEF(c, (int64_t)B * C) : NULL;
    int ml = net->u_ml >= 0;
    f->mlv = ml ? TAKEF(c, (int64_t)B * NN_ML_CH * NN_HW) : NULL;
    f->mlfc1 = ml ? TAKEF(c, (int64_t)B * NN_ML_HIDDEN) : NULL;
    f->ml = ml ? TAKEF(c, B) : NULL;
    f->opp = NULL; /* the opponent head is training-only: nn_eval_batch's buffers */
    f->ws = nnet_take(c, ws);
}

/* slice (B, C, 9, 9) <- channels [c0, c0 + C) of full (B, C2, 9, 9)
 * (to_full 0), or those channels <- slice (to_full 1): one copy_2d, or one
 * copy per position where the backend has none. */
void nnet_channel_slice(nn_backend_t *be, float *slice, float *full, int32_t B, int32_t C, int32_t C2, int32_t c0,
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

void nnet_gpool_fwd(nn_net_t *net, nn_backend_t *be, int32_t i, int32_t B, float *h1, float *gp, float *gb,
                    float *out) {
    int32_t C = net->cfg.channels;
    be->pool_fwd(be, h1, B, C, gp);
    be->dense_fwd(be, gp, P(net, net->gp_w[i]), P(net, net->gp_b[i]), B, 2 * C, C, gb);
    be->chan_bias_fwd(be, h1, gb, B, C, out);
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

/* The moves-left head of the inference forward from the trunk's output h
 * (native layout where the backend fuses units) into f->ml (B) raw. */
static void moves_left_infer(nn_net_t *net, nn_backend_t *be, int32_t B, infer_bufs_t *f, const float *h) {
    const nn_unit_t *mu = &net->units[net->u_ml];
    const float *fo = net->folded;
    nn_act_t act = net->cfg.act;
    if (be->conv_fwd_act) {
        be->conv_fwd_act(be, h, fo + mu->fw, fo + mu->fb, NULL, B, mu->cin, mu->cout, mu->k, act, f->mlv, f->ws,
                         NN_CONV_X_NATIVE);
    } else {
        be->conv_fwd(be, h, fo + mu->fw, fo + mu->fb, B, mu->cin, mu->cout, mu->k, f->mlv, f->ws);
        be->act_fwd(be, f->mlv, NULL, (int64_t)B * mu->cout * NN_HW, act, f->mlv);
    }
    be->dense_fwd(be, f->mlv, P(net, net->ml_fc1_w), P(net, net->ml_fc1_b), B, NN_ML_CH * NN_HW, NN_ML_HIDDEN,
                  f->mlfc1);
    be->act_fwd(be, f->mlfc1, NULL, (int64_t)B * NN_ML_HIDDEN, act, f->mlfc1);
    be->dense_fwd(be, f->mlfc1, P(net, net->ml_fc2_w), P(net, net->ml_fc2_b), B, NN_ML_HIDDEN, 1, f->ml);
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
    if (outputs & NN_OUT_MOVES_LEFT) moves_left_infer(net, be, B, f, h);
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
        nnet_channel_slice(be, h, hm, B, C, 2 * C, hd * C, 0);
        if (be->conv_fwd_act)
            be->conv_fwd_act(be, h, P(net, outs[hd]->w), P(net, outs[hd]->bias), NULL, B, C, NN_POLICY_CH, 1, act,
                             logits[hd], f->ws, NN_CONV_NO_ACT);
        else
            be->conv_fwd(be, h, P(net, outs[hd]->w), P(net, outs[hd]->bias), B, C, NN_POLICY_CH, 1, logits[hd],
                         f->ws);
        if (hd == 0 && (outputs & NNET_OUT_OPP)) { /* the opponent head reads the policy half too */
            const nn_unit_t *oo = &net->units[net->u_opp];
            if (be->conv_fwd_act)
                be->conv_fwd_act(be, h, P(net, oo->w), P(net, oo->bias), NULL, B, C, NN_POLICY_CH, 1, act, f->opp,
                                 f->ws, NN_CONV_NO_ACT);
            else
                be->conv_fwd(be, h, P(net, oo->w), P(net, oo->bias), B, C, NN_POLICY_CH, 1, f->opp, f->ws);
        }
    }
}

/* Inference forward with folded BN: f->x0 must hold the expanded input;
 * only the heads in outputs (NN_OUT_*) run. Where the backend fuses the unit
 * (conv_fwd_act), trunk and head-conv activations stay in its native layout
 * (NN_CONV_*_NATIVE) between units. */
void nnet_forward_infer(nn_net_t *net, nn_backend_t *be, int32_t B, infer_bufs_t *f, int32_t outputs) {
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
        if (net->gp_w[i] >= 0 && be->conv_fwd_act && be->pool_fwd_native) { /* pooled in the native layout */
            FCONV(1 + 2 * i, h, t1, NULL, X | Y);
            be->pool_fwd_native(be, t1, B, C, f->gp);
            be->dense_fwd(be, f->gp, P(net, net->gp_w[i]), P(net, net->gp_b[i]), B, 2 * C, C, f->gb);
            be->chan_bias_fwd_native(be, t1, f->gb, B, C, t1);
            FCONV(2 + 2 * i, t1, t2, h, X | Y);
        } else if (net->gp_w[i] >= 0) { /* global pooling: h1 in NCHW between the convs, pooled and biased */
            FCONV(1 + 2 * i, h, t1, NULL, X);
            nnet_gpool_fwd(net, be, i, B, t1, f->gp, f->gb, t1);
            FCONV(2 + 2 * i, t1, t2, h, Y);
        } else {
            FCONV(1 + 2 * i, h, t1, NULL, X | Y);
            FCONV(2 + 2 * i, t1, t2, h, X | Y);
        }
        float *tmp = h;
        h = t2;
        t2 = tmp;
    }
    const nn_unit_t *po = &net->units[U_POUT(n)], *lo = &net->units[U_LOUT(n)];
    if (net->merge_heads && (outputs & NN_OUT_LEGAL)) {
        heads_infer_merged(net, be, B, f, h, outputs);
        return;
    }
    if (outputs & (NN_OUT_POLICY | NNET_OUT_OPP)) {
        FCONV(U_PCONV(n), h, t1, NULL, X | Y);
        if (outputs & NN_OUT_POLICY) OUTCONV(po, t1, f->policy);
        if (outputs & NNET_OUT_OPP) OUTCONV((&net->units[net->u_opp]), t1, f->opp);
    }
    if (outputs & NN_OUT_LEGAL) {
        FCONV(U_LCONV(n), h, t1, NULL, X | Y);
        OUTCONV(lo, t1, f->legal);
    }
    if (outputs & NN_OUT_VALUE) value_infer(net, be, B, f, h);
    if (outputs & NN_OUT_MOVES_LEFT) moves_left_infer(net, be, B, f, h);
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
    ctx->uid = nnet_next_uid();
    size_t ws = nnet_max_conv_ws(net, be, max_batch);
    for (int pass = 0; pass < 2; pass++) {
        carve_t c = {pass ? ctx->arena : NULL, 0};
        ctx->packed = nnet_take(&c, (size_t)(max_batch * nn_packed_bytes(net->cfg.in_planes)));
        ctx->hand = TAKEF(&c, (int64_t)max_batch * net->cfg.in_hand);
        layout_infer(net, max_batch, ws, &c, &ctx->f);
        if (pass == 0) {
            ctx->arena = be->buf_alloc(be, c.off);
            if (!ctx->arena) {
                free(ctx);
                nnet_set_oom(err, errlen, "nn_ctx_new", be, c.off);
                return NULL;
            }
        }
    }
    if (nnet_be_check(be, "nn_ctx_new", err, errlen) != 0) { /* e.g. no cuDNN algorithm for a shape */
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

void nn_ctx_buffers(nn_ctx_t *ctx, uint8_t **packed, float **hand, float **policy, float **value,
                    float **legal) {
    if (packed) *packed = ctx->packed;
    if (hand) *hand = ctx->hand;
    if (policy) *policy = ctx->f.policy;
    if (value) *value = ctx->f.value;
    if (legal) *legal = ctx->f.legal;
}

float *nn_ctx_moves_left(nn_ctx_t *ctx) { return ctx->f.ml; }

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
    nnet_forward_infer(net, be, a->B, &a->ctx->f, a->outputs);
}

int nn_forward_dev(nn_ctx_t *ctx, int32_t B, const uint8_t *packed_dev, const float *hand_dev, int32_t outputs) {
    KOMA_ASSERT(B >= 1 && B <= ctx->max_batch);
    nn_net_t *net = ctx->net;
    nn_backend_t *be = ctx->be;
    if (nn_backend_error(be)) return -1;
    if ((outputs & NN_OUT_MOVES_LEFT) && net->u_ml < 0) return -1; /* no such head */
    outputs &= NN_OUT_ALL | NN_OUT_MOVES_LEFT;
    nnet_fold(net, be); /* outside any recording: it runs only when the weights changed */
    fwd_args_t a = {ctx, B, outputs, packed_dev, hand_dev};
    nnet_run_recorded(be, &ctx->seen, graph_key(ctx, B, packed_dev, hand_dev, outputs), forward_ops, &a);
    return nn_backend_error(be) ? -1 : 0;
}

int nn_forward_out(nn_ctx_t *ctx, int32_t B, const uint8_t *packed, const float *hand, const nn_outputs_t *out) {
    KOMA_ASSERT(B >= 1 && B <= ctx->max_batch);
    nn_backend_t *be = ctx->be;
    const nn_net_config_t *cfg = &ctx->net->cfg;
    if (out->moves_left && !(cfg->heads & NN_HEAD_MOVES_LEFT)) return -1; /* a bad argument: no such head */
    be->upload(be, ctx->packed, packed, (size_t)(B * nn_packed_bytes(cfg->in_planes)));
    if (cfg->in_hand) be->upload(be, ctx->hand, hand, sizeof(float) * (size_t)B * cfg->in_hand);
    int32_t outputs = (out->policy ? NN_OUT_POLICY : 0) | (out->value ? NN_OUT_VALUE : 0) |
                      (out->legal ? NN_OUT_LEGAL : 0) | (out->moves_left ? NN_OUT_MOVES_LEFT : 0);
    (void)nn_forward_dev(ctx, B, ctx->packed, ctx->hand, outputs); /* its error is sticky: checked below */
    if (out->policy) be->download(be, out->policy, ctx->f.policy, sizeof(float) * (size_t)B * NN_POLICY_NB);
    if (out->value) be->download(be, out->value, ctx->f.value, sizeof(float) * (size_t)B * NN_VALUE_NB);
    if (out->legal) be->download(be, out->legal, ctx->f.legal, sizeof(float) * (size_t)B * NN_POLICY_NB);
    if (out->moves_left) be->download(be, out->moves_left, ctx->f.ml, sizeof(float) * (size_t)B);
    if (be->sync) be->sync(be);
    if (nn_backend_error(be)) return -1;
    if (out->moves_left)
        for (int32_t b = 0; b < B; b++) out->moves_left[b] = nn_moves_left_plies(out->moves_left[b]);
    return 0;
}

int nn_forward(nn_ctx_t *ctx, int32_t B, const uint8_t *packed, const float *hand, float *policy,
               float *value, float *legal) {
    nn_outputs_t out = {policy, value, legal, NULL};
    return nn_forward_out(ctx, B, packed, hand, &out);
}
