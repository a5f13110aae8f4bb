/* weights.c - nets and optimizer state <-> safetensors files (see weights.h).
 *
 * Owns: tensor naming on disk, metadata checks, all-or-nothing loading, and
 * the rule that no non-finite weights are ever written or loaded (a file
 * with a valid checksum but a NaN or Inf tensor, or a negative batch-norm
 * running variance, is refused, naming the tensor and the index).
 * Does not own: byte-level format and checksums (nn/safetensors.c).
 */
#include "nn/weights.h"
#include "compat/err.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/safetensors.h"

#define OPT_PREFIX "opt.momentum."

/* host = params (np), stats (ns), momentum (np, when tr) as downloaded.
 * -1 with err when the backend failed or a tensor is not finite. */
static int refuse_to_save(nn_net_t *net, nn_optim_t *tr, const float *host, const char *path, char *err,
                          size_t errlen) {
    nn_backend_t *be = nn_net_backend(net);
    const char *e = nn_backend_error(be);
    if (e) {
        set_err(err, errlen, "%s: not written: the %s backend failed: %s", path, be->name, e);
        return -1;
    }
    int64_t np = 0, ns = 0, j = 0;
    nn_net_params(net, &np, NULL);
    nn_net_stats(net, &ns);
    const char *prefix = "";
    int32_t bad = nn_net_nonfinite_tensor(net, host, host + np, &j);
    if (bad < 0 && tr) { /* momentum has the params' layout; the stats were checked above */
        prefix = OPT_PREFIX;
        bad = nn_net_nonfinite_tensor(net, host + np + ns, host + np, &j);
    }
    if (bad < 0) return 0;
    set_err(err, errlen, "%s: not written: tensor '%s%s' has a non-finite value at element %" PRId64, path, prefix,
            nn_net_tensor(net, bad)->name, j);
    return -1;
}

/* Whether a caller may add metadata key k: a koma.* key that the writer
 * does not write itself. */
static int meta_key_free(const char *k) {
    static const char *const own[] = {"koma.kind",       "koma.version",          "koma.net",
                                      "koma.activation", "koma.features_version", "koma.in_planes",
                                      "koma.in_hand",    "koma.optimizer"};
    if (strncmp(k, "koma.", 5) != 0 || strncmp(k, "koma.xxh3.", 10) == 0) return 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strcmp(k, own[i]) == 0) return 0;
    return 1;
}

int nn_weights_save(nn_net_t *net, nn_optim_t *tr, const char *path, char *err, size_t errlen) {
    return nn_weights_save_meta(net, tr, NULL, path, err, errlen);
}

int nn_weights_save_meta(nn_net_t *net, nn_optim_t *tr, const char *const *meta, const char *path, char *err,
                         size_t errlen) {
    nn_backend_t *be = nn_net_backend(net);
    const nn_net_config_t *cfg = nn_net_config(net);
    int64_t np = 0, ns = 0;
    float *dp = nn_net_params(net, &np, NULL);
    float *ds = nn_net_stats(net, &ns);
    if (tr && nn_optim_net(tr) != net) {
        set_err(err, errlen, "%s: the trainer does not train this net", path);
        return -1;
    }
    size_t nhost = (size_t)(np + ns + (tr ? np : 0));
    float *host = malloc(sizeof(float) * (nhost ? nhost : 1));
    st_writer_t *w = st_writer_new();
    int32_t nt = nn_net_tensor_count(net);
    char(*names)[ST_MAX_NAME] = calloc((size_t)nt, ST_MAX_NAME);
    if (!host || !w || !names) {
        free(host);
        free(names);
        st_writer_free(w);
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    if (be->sync) be->sync(be);
    be->download(be, host, dp, sizeof(float) * (size_t)np);
    be->download(be, host + np, ds, sizeof(float) * (size_t)ns);
    if (tr) be->download(be, host + np + ns, nn_optim_momentum(tr), sizeof(float) * (size_t)np);
    int64_t step = tr ? nn_optim_step_count(tr) : 0;
    int64_t one = 1;
    int rc = 0;
    /* Never write what a failed backend or a diverged net left behind. */
    if (refuse_to_save(net, tr, host, path, err, errlen) != 0) {
        st_writer_free(w);
        free(names);
        free(host);
        return -1;
    }
    for (int32_t i = 0; i < nt && rc == 0; i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        const float *src = t->kind == NN_TENSOR_PARAM ? host + t->offset : host + np + t->offset;
        rc |= st_writer_add(w, t->name, ST_DTYPE_F32, t->ndim, t->shape, src);
    }
    if (tr) {
        for (int32_t i = 0; i < nt && rc == 0; i++) {
            const nn_tensor_info_t *t = nn_net_tensor(net, i);
            if (t->kind != NN_TENSOR_PARAM) continue;
            snprintf(names[i], ST_MAX_NAME, OPT_PREFIX "%s", t->name);
            rc |= st_writer_add(w, names[i], ST_DTYPE_F32, t->ndim, t->shape, host + np + ns + t->offset);
        }
        if (rc == 0) rc |= st_writer_add(w, "opt.step", ST_DTYPE_I64, 1, &one, &step);
        if (rc == 0) rc |= st_writer_meta(w, "koma.optimizer", "sgd-nesterov");
    }
    char buf[64];
    if (rc == 0) {
        rc |= st_writer_meta(w, "koma.kind", "weights");
        snprintf(buf, sizeof(buf), "%d", NN_WEIGHTS_VERSION);
        rc |= st_writer_meta(w, "koma.version", buf);
        rc |= st_writer_meta(w, "koma.net", nn_net_arch_format(cfg, buf, sizeof(buf))); /* "6x64", "6x64g2", "6x64g2mo" */
        rc |= st_writer_meta(w, "koma.activation", nn_act_name(cfg->act));
        snprintf(buf, sizeof(buf), "%d", (int)cfg->features_version);
        rc |= st_writer_meta(w, "koma.features_version", buf);
        snprintf(buf, sizeof(buf), "%d", (int)cfg->in_planes);
        rc |= st_writer_meta(w, "koma.in_planes", buf);
        snprintf(buf, sizeof(buf), "%d", (int)cfg->in_hand);
        rc |= st_writer_meta(w, "koma.in_hand", buf);
        for (int32_t i = 0; meta && meta[i] && rc == 0; i += 2) {
            if (!meta_key_free(meta[i]) || !meta[i + 1]) {
                st_writer_free(w);
                free(names);
                free(host);
                set_err(err, errlen,
                        "%s: not written: metadata key '%s' is not a koma.* key of the caller's with a value", path,
                        meta[i]);
                return -1;
            }
            rc |= st_writer_meta(w, meta[i], meta[i + 1]);
        }
    }
    if (rc != 0) {
        set_err(err, errlen, "%s: could not describe the net's tensors", path);
    } else {
        rc = st_writer_write(w, path, err, errlen);
    }
    st_writer_free(w);
    free(names);
    free(host);
    return rc ? -1 : 0;
}

static int meta_int(const st_file_t *f, const char *key, int32_t lo, int32_t hi, int32_t *out,
                    char *err, size_t errlen) {
    const char *s = st_meta(f, key);
    if (!s) {
        set_err(err, errlen, "%s: metadata '%s' missing", st_path(f), key);
        return -1;
    }
    errno = 0;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        set_err(err, errlen, "%s: metadata '%s' = '%s' is not an integer in %d..%d", st_path(f), key,
                s, lo, hi);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int read_config(const st_file_t *f, nn_net_config_t *cfg, char *err, size_t errlen) {
    const char *path = st_path(f);
    const char *kind = st_meta(f, "koma.kind");
    if (!kind || strcmp(kind, "weights") != 0) {
        set_err(err, errlen, "%s: not a Koma weights file (koma.kind is %s%s%s)", path,
                kind ? "'" : "", kind ? kind : "missing", kind ? "'" : "");
        return -1;
    }
    int32_t version;
    if (meta_int(f, "koma.version", 0, 1000000, &version, err, errlen)) return -1;
    if (version != NN_WEIGHTS_VERSION) {
        set_err(err, errlen, "%s: weights format version %d, this build reads %d", path, version,
                NN_WEIGHTS_VERSION);
        return -1;
    }
    memset(cfg, 0, sizeof(*cfg));
    const char *size = st_meta(f, "koma.net");
    if (!size || nn_net_arch_parse(size, cfg) != 0) {
        set_err(err, errlen, "%s: metadata 'koma.net' %s%s%s is not a net size like 6x64, 6x64g2 or 6x64g2mo", path,
                size ? "'" : "", size ? size : "missing", size ? "'" : "");
        return -1;
    }
    const char *act = st_meta(f, "koma.activation");
    int a = nn_act_parse(act);
    if (a < 0) {
        set_err(err, errlen, "%s: metadata 'koma.activation' %s%s%s is not relu or silu", path,
                act ? "'" : "", act ? act : "missing", act ? "'" : "");
        return -1;
    }
    cfg->act = (nn_act_t)a;
    if (meta_int(f, "koma.features_version", -2147483647, 2147483647, &cfg->features_version, err, errlen) ||
        meta_int(f, "koma.in_planes", 1, 4096, &cfg->in_planes, err, errlen) ||
        meta_int(f, "koma.in_hand", 0, 4096, &cfg->in_hand, err, errlen))
        return -1;
    return 0;
}

int nn_weights_meta(const char *path, const char *key, char *buf, size_t len, char *err, size_t errlen) {
    st_file_t *f = st_open(path, 0, err, errlen);
    if (!f) return -1;
    const char *v = st_meta(f, key);
    int rc = v ? 0 : 1;
    if (v && strlen(v) >= len) {
        set_err(err, errlen, "%s: metadata '%s' is longer than %lu bytes", path, key,
                (unsigned long)(len ? len - 1 : 0));
        rc = -1;
    } else if (v) {
        memcpy(buf, v, strlen(v) + 1);
    }
    st_close(f);
    return rc;
}

int nn_weights_same_tensors(const char *a, const char *b, char *err, size_t errlen) {
    st_file_t *fa = st_open(a, 0, err, errlen), *fb = fa ? st_open(b, 0, err, errlen) : NULL;
    int same = fa && fb && st_count(fa) == st_count(fb);
    for (int32_t i = 0; same && i < st_count(fa); i++) {
        char key[ST_MAX_NAME + 16];
        snprintf(key, sizeof key, "koma.xxh3.%s", st_at(fa, i)->name);
        const char *ha = st_meta(fa, key), *hb = st_meta(fb, key);
        same = ha && hb && strcmp(ha, hb) == 0;
    }
    int rc = !fa || !fb ? -1 : same;
    st_close(fa);
    st_close(fb);
    return rc;
}

int nn_weights_peek(const char *path, nn_net_config_t *cfg, char *err, size_t errlen) {
    st_file_t *f = st_open(path, 0, err, errlen);
    if (!f) return -1;
    int rc = read_config(f, cfg, err, errlen);
    st_close(f);
    return rc;
}

static int is_running_var(const char *name) {
    size_t n = strlen(name), k = strlen(".running_var");
    return n >= k && strcmp(name + n - k, ".running_var") == 0;
}

/* 0, or -1 with err naming the file, the tensor and the index when x (n
 * floats, possibly unaligned in the mapping) holds a NaN or an infinity, or,
 * for a batch-norm running variance (var), a negative value: a net that
 * diverged or was damaged and re-checksummed would otherwise play with a
 * uniform policy and a zero value, or normalise by the root of a negative. */
static int check_values(const char *path, const char *name, const float *x, int64_t n, int var, char *err,
                        size_t errlen) {
    for (int64_t j = 0; j < n; j++) {
        float v;
        memcpy(&v, x + j, sizeof v);
        if (isnan(v) || isinf(v)) {
            set_err(err, errlen, "%s: tensor '%s' holds %s at index %" PRId64 ": not a usable net (diverged or damaged)",
                    path, name, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", j);
            return -1;
        }
        if (var && v < 0.0f) {
            set_err(err, errlen, "%s: tensor '%s' holds %g at index %" PRId64 ": a batch-norm running variance "
                    "cannot be negative (a damaged net)", path, name, (double)v, j);
            return -1;
        }
    }
    return 0;
}

/* 0, or -1 with err naming the file when it holds a tensor of an optional
 * head (moves_left.*, opp_policy.*, and their optimizer state) that net's
 * architecture (the file's koma.net) does not name: its metadata and its
 * tensors disagree, and loading it would silently drop a trained head. */
static int check_no_stray_head(const nn_net_t *net, const st_file_t *f, char *err, size_t errlen) {
    static const char *prefixes[2] = {"moves_left.", "opp_policy."};
    for (int32_t i = 0; i < st_count(f); i++) {
        const char *name = st_at(f, i)->name;
        if (strncmp(name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0) name += strlen(OPT_PREFIX);
        for (int k = 0; k < 2; k++)
            if (strncmp(name, prefixes[k], strlen(prefixes[k])) == 0 && nn_net_tensor_find(net, name) < 0) {
                char a[48];
                set_err(err, errlen, "%s: tensor '%s' belongs to a head that the file's architecture %s does not "
                        "name (metadata and tensors disagree: a damaged or hand-edited file)", st_path(f),
                        st_at(f, i)->name, nn_net_arch_format(nn_net_config(net), a, sizeof a));
                return -1;
            }
    }
    return 0;
}

/* Checks every tensor first, then uploads: nothing changes on failure. */
static int read_tensors(nn_net_t *net, nn_optim_t *tr, const st_file_t *f, char *err, size_t errlen) {
    const char *path = st_path(f);
    nn_backend_t *be = nn_net_backend(net);
    int64_t np = 0, ns = 0;
    float *dp = nn_net_params(net, &np, NULL);
    float *ds = nn_net_stats(net, &ns);
    int32_t nt = nn_net_tensor_count(net);
    const float **src = calloc((size_t)nt * 2, sizeof(*src));
    if (!src) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = -1;
    int64_t step = 0;
    if (check_no_stray_head(net, f, err, errlen) != 0) goto done;
    for (int32_t i = 0; i < nt; i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        const st_tensor_t *st = st_expect(f, t->name, ST_DTYPE_F32, t->ndim, t->shape, err, errlen);
        if (!st) goto done;
        src[i] = st->data;
        if (tr && t->kind == NN_TENSOR_PARAM) {
            char name[ST_MAX_NAME];
            snprintf(name, sizeof(name), OPT_PREFIX "%s", t->name);
            if (!st_find(f, name)) {
                set_err(err, errlen, "%s: no optimizer state (tensor '%s' missing)", path, name);
                goto done;
            }
            st = st_expect(f, name, ST_DTYPE_F32, t->ndim, t->shape, err, errlen);
            if (!st) goto done;
            src[nt + i] = st->data;
        }
    }
    if (tr) {
        int64_t one = 1;
        if (!st_find(f, "opt.step")) {
            set_err(err, errlen, "%s: no optimizer state (tensor 'opt.step' missing)", path);
            goto done;
        }
        const st_tensor_t *st = st_expect(f, "opt.step", ST_DTYPE_I64, 1, &one, err, errlen);
        if (!st) goto done;
        memcpy(&step, st->data, sizeof(step));
        if (step < 0) {
            set_err(err, errlen, "%s: opt.step is negative (%" PRId64 ")", path, step);
            goto done;
        }
    }
    for (int32_t i = 0; i < nt; i++) { /* a diverged net is no net: refuse it whole */
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        int var = t->kind == NN_TENSOR_STAT && is_running_var(t->name);
        if (check_values(path, t->name, src[i], t->numel, var, err, errlen) != 0) goto done;
        char name[ST_MAX_NAME];
        snprintf(name, sizeof(name), OPT_PREFIX "%s", t->name);
        if (src[nt + i] && check_values(path, name, src[nt + i], t->numel, 0, err, errlen) != 0) goto done;
    }
    for (int32_t i = 0; i < nt; i++) {
        const nn_tensor_info_t *t = nn_net_tensor(net, i);
        float *dst = (t->kind == NN_TENSOR_PARAM ? dp : ds) + t->offset;
        be->upload(be, dst, src[i], sizeof(float) * (size_t)t->numel);
        if (tr && t->kind == NN_TENSOR_PARAM)
            be->upload(be, nn_optim_momentum(tr) + t->offset, src[nt + i], sizeof(float) * (size_t)t->numel);
    }
    if (be->sync) be->sync(be);
    nn_net_mark_dirty(net);
    const char *e = nn_backend_error(be);
    if (e) {
        set_err(err, errlen, "%s: loading into the %s backend failed: %s", path, be->name, e);
        goto done;
    }
    if (tr) nn_optim_set_step_count(tr, step);
    rc = 0;
done:
    free(src);
    return rc;
}

/* path opened with every checksum verified and its configuration read into
 * *cfg and checked against expect_features_version (< 0: any); NULL with err. */
static st_file_t *open_net_file(const char *path, int32_t expect_features_version, nn_net_config_t *cfg, char *err,
                                size_t errlen) {
    st_file_t *f = st_open(path, ST_OPEN_VERIFY, err, errlen);
    if (!f) return NULL;
    if (read_config(f, cfg, err, errlen) != 0) {
        st_close(f);
        return NULL;
    }
    if (expect_features_version >= 0 && cfg->features_version != expect_features_version) {
        set_err(err, errlen, "%s: features_version %d, expected %d (net trained on another input encoding)",
                path, cfg->features_version, expect_features_version);
        st_close(f);
        return NULL;
    }
    return f;
}

nn_net_t *nn_weights_load(nn_backend_t *be, const char *path, int32_t expect_features_version,
                          char *err, size_t errlen) {
    nn_net_config_t cfg;
    st_file_t *f = open_net_file(path, expect_features_version, &cfg, err, errlen);
    if (!f) return NULL;
    nn_net_t *net = nn_net_new(be, &cfg, 0, err, errlen);
    if (!net) goto fail;
    if (read_tensors(net, NULL, f, err, errlen) != 0) goto fail;
    st_close(f);
    return net;
fail:
    nn_net_free(net);
    st_close(f);
    return NULL;
}

int nn_weights_check(const char *path, int32_t expect_features_version, char *err, size_t errlen) {
    /* The file itself, without a net (building one to compare shapes drew
     * random weights: 270 ms for a 10x128 net at every isready of koma). */
    nn_net_config_t cfg;
    st_file_t *f = open_net_file(path, expect_features_version, &cfg, err, errlen);
    if (!f) return -1;
    int rc = 0;
    for (int32_t i = 0; rc == 0 && i < st_count(f); i++) {
        const st_tensor_t *t = st_at(f, i);
        if (t->dtype != ST_DTYPE_F32) continue;
        int var = strncmp(t->name, OPT_PREFIX, strlen(OPT_PREFIX)) != 0 && is_running_var(t->name);
        rc = check_values(path, t->name, t->data, (int64_t)(t->nbytes / sizeof(float)), var, err, errlen);
    }
    st_close(f);
    return rc;
}

int nn_weights_read(nn_net_t *net, nn_optim_t *tr, const char *path, char *err, size_t errlen) {
    if (tr && nn_optim_net(tr) != net) {
        set_err(err, errlen, "%s: the trainer does not train this net", path);
        return -1;
    }
    st_file_t *f = st_open(path, ST_OPEN_VERIFY, err, errlen);
    if (!f) return -1;
    nn_net_config_t cfg;
    const nn_net_config_t *mine = nn_net_config(net);
    int rc = -1;
    if (read_config(f, &cfg, err, errlen) != 0) goto done;
    char a[32], b[32];
    if (cfg.blocks != mine->blocks || cfg.channels != mine->channels || cfg.gpool != mine->gpool ||
        cfg.heads != mine->heads) {
        set_err(err, errlen, "%s: net %s, expected %s", path, nn_net_arch_format(&cfg, a, sizeof(a)),
                nn_net_arch_format(mine, b, sizeof(b)));
        goto done;
    }
    if (cfg.act != mine->act) {
        set_err(err, errlen, "%s: activation %s, expected %s", path, nn_act_name(cfg.act), nn_act_name(mine->act));
        goto done;
    }
    if (cfg.features_version != mine->features_version) {
        set_err(err, errlen, "%s: features_version %d, expected %d", path, cfg.features_version,
                mine->features_version);
        goto done;
    }
    if (cfg.in_planes != mine->in_planes || cfg.in_hand != mine->in_hand) {
        set_err(err, errlen, "%s: input %d planes + %d hand, expected %d + %d", path, cfg.in_planes,
                cfg.in_hand, mine->in_planes, mine->in_hand);
        goto done;
    }
    rc = read_tensors(net, tr, f, err, errlen);
done:
    st_close(f);
    return rc;
}
