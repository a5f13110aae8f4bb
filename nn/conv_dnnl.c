/* conv_dnnl.c - the fast CPU convolution route on oneDNN (see conv_dnnl.h).
 *
 * Owns: one engine + stream per instance, a cache of primitives keyed by
 * (kind, B, cin, cout, k, flags, act) with their memory objects and reorders,
 * and grow-only buffers for the tensors in oneDNN's layouts and for the
 * scratchpad. A call looks its entry up (building it once: oneDNN picks the
 * layouts, format_tag_any), reorders the NCHW/OIHW inputs into those layouts
 * when they differ, runs the primitive, and reorders the outputs back (with a
 * sum post-op when the op accumulates). Inference convolutions fuse bias,
 * residual add (sum post-op) and the activation (eltwise post-op).
 * Does not own: the op semantics (nn/backend.h), the fallback (backend_cpu.c).
 * Threads: one thread at a time per instance; omp_set_num_threads(threads)
 * before every primitive is created or run, which sets the calling thread's
 * OpenMP team size (oneDNN fixes a primitive's thread split at creation).
 * Errors: DNNL_TRY keeps file:line, the call, oneDNN's status and a hint in
 * d->err and returns -1; nothing aborts.
 */
#include "nn/conv_dnnl.h"

#include <stdio.h>
#include <string.h>

#include "compat/err.h"
#include "nn/backend.h"

#ifndef KOMA_HAVE_DNNL

nn_dnnl_t *nn_dnnl_new(int32_t threads, char *err, size_t errlen) {
    (void)threads;
    set_err(err, errlen, "built without oneDNN (install libdnnl-dev and reconfigure)");
    return NULL;
}
void nn_dnnl_free(nn_dnnl_t *d) { (void)d; }
const char *nn_dnnl_error(const nn_dnnl_t *d) { (void)d; return ""; }
const char *nn_dnnl_version(void) { return "none"; }
int nn_dnnl_conv_fwd(nn_dnnl_t *d, const float *x, const float *w, const float *bias,
                     const float *res, int32_t act, int32_t B, int32_t cin, int32_t cout,
                     int32_t k, float *y, int32_t layout) {
    (void)d, (void)x, (void)w, (void)bias, (void)res, (void)act, (void)B, (void)cin, (void)cout,
        (void)k, (void)y, (void)layout;
    return -1;
}
int nn_dnnl_conv_bwd_data(nn_dnnl_t *d, const float *dy, const float *w, int32_t B, int32_t cin,
                          int32_t cout, int32_t k, float *dx, int32_t accumulate) {
    (void)d, (void)dy, (void)w, (void)B, (void)cin, (void)cout, (void)k, (void)dx, (void)accumulate;
    return -1;
}
int nn_dnnl_conv_bwd_filter(nn_dnnl_t *d, const float *x, const float *dy, int32_t B, int32_t cin,
                            int32_t cout, int32_t k, float *dw, float *dbias) {
    (void)d, (void)x, (void)dy, (void)B, (void)cin, (void)cout, (void)k, (void)dw, (void)dbias;
    return -1;
}

#else

#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <stdlib.h>

#include "compat/compat.h"

enum { K_FWD, K_BWD_DATA, K_BWD_W };
enum { F_BIAS = 1, F_RES = 2, F_ACCUM = 4, F_INFER = 8, F_X_NHWC = 16, F_Y_NHWC = 32 };
#define DNNL_MAX_ARGS 4
#define DNNL_CACHE_MAX 256
#define DNNL_SLOT_SCRATCH DNNL_MAX_ARGS
#define DNNL_SLOTS (DNNL_MAX_ARGS + 1)

/* One primitive argument: `user` wraps the caller's NCHW/OIHW/x pointer; when
 * oneDNN chose another layout, `prim` wraps a ctx buffer in that layout and
 * `reorder` converts user -> prim (inputs) or prim -> user (outputs). */
typedef struct {
    int32_t arg, out;
    dnnl_memory_t user, prim;
    dnnl_primitive_t reorder;
    size_t bytes; /* size of the prim layout */
} arg_t;

typedef struct {
    int32_t kind, B, cin, cout, k, flags, act;
    int32_t relax; /* F_X/Y_NHWC: the primitive's own layouts (reorders), as oneDNN had only its
                      reference kernel for NHWC (AVX2 and a stem of 118 channels: 100x slower) */
    uint64_t used;
    dnnl_primitive_t prim;
    int32_t nargs;
    arg_t a[DNNL_MAX_ARGS];
    dnnl_memory_t res_user;       /* fwd with F_RES and a dst reorder: the residual, NCHW */
    dnnl_primitive_t res_reorder; /* res_user -> the dst layout */
    dnnl_memory_t scratch;        /* NULL when the primitive needs none */
    size_t scratch_bytes;
} entry_t;

struct nn_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    int32_t threads;
    uint64_t clock;
    int32_t n;
    entry_t *e[DNNL_CACHE_MAX];
    void *buf[DNNL_SLOTS];
    size_t cap[DNNL_SLOTS];
    char err[320];
};

static int dnnl_fail(nn_dnnl_t *d, dnnl_status_t st, const char *call, const char *file, int line,
                     const char *hint) {
    snprintf(d->err, sizeof(d->err), "%s:%d: %s: %s (%s)", file, line, call, dnnl_status2str(st), hint);
    return -1;
}
enum { DNNL_BUILD_ROOM = 64 << 20 }; /* free address space a primitive build needs, with margin */

#define DNNL_TRY(d, call, hint)                                                      \
    do {                                                                             \
        dnnl_status_t st_ = (call);                                                  \
        if (st_ != dnnl_success) return dnnl_fail((d), st_, #call, __FILE__, __LINE__, (hint)); \
    } while (0)

const char *nn_dnnl_version(void) {
    static char buf[64];
    const dnnl_version_t *v = dnnl_version();
    const char *rt = v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP"
                     : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                     : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool" : "sequential";
    snprintf(buf, sizeof(buf), "oneDNN %d.%d.%d (%s)", v->major, v->minor, v->patch, rt);
    return buf;
}

const char *nn_dnnl_error(const nn_dnnl_t *d) { return d ? d->err : ""; }

static void entry_free(entry_t *e) {
    if (!e) return;
    for (int32_t i = 0; i < e->nargs; i++) {
        dnnl_memory_destroy(e->a[i].user);
        dnnl_memory_destroy(e->a[i].prim);
        dnnl_primitive_destroy(e->a[i].reorder);
    }
    dnnl_memory_destroy(e->res_user);
    dnnl_primitive_destroy(e->res_reorder);
    dnnl_memory_destroy(e->scratch);
    dnnl_primitive_destroy(e->prim);
    free(e);
}

void nn_dnnl_free(nn_dnnl_t *d) {
    if (!d) return;
    for (int32_t i = 0; i < d->n; i++) entry_free(d->e[i]);
    for (int32_t i = 0; i < DNNL_SLOTS; i++) compat_aligned_free(d->buf[i]);
    if (d->st) dnnl_stream_destroy(d->st);
    if (d->eng) dnnl_engine_destroy(d->eng);
    free(d);
}

nn_dnnl_t *nn_dnnl_new(int32_t threads, char *err, size_t errlen) {
    nn_dnnl_t *d = calloc(1, sizeof(*d));
    if (!d) {
        set_err(err, errlen, "oneDNN route: out of memory");
        return NULL;
    }
    d->threads = threads > 0 ? threads : 1;
    dnnl_status_t st = dnnl_engine_create(&d->eng, dnnl_cpu, 0);
    if (st == dnnl_success) st = dnnl_stream_create(&d->st, d->eng, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        set_err(err, errlen, "oneDNN route: no CPU engine/stream: %s (%s)", dnnl_status2str(st), nn_dnnl_version());
        nn_dnnl_free(d);
        return NULL;
    }
    return d;
}

/* ---- building an entry ------------------------------------------------------ */
static void md_act(dnnl_memory_desc_t *md, int32_t B, int32_t C, dnnl_format_tag_t tag) {
    dnnl_dims_t dims = {B, C, NN_SIDE, NN_SIDE};
    dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag);
}
static void md_wei(dnnl_memory_desc_t *md, int32_t cout, int32_t cin, int32_t k, dnnl_format_tag_t tag) {
    dnnl_dims_t dims = {cout, cin, k, k};
    dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag);
}
static void md_vec(dnnl_memory_desc_t *md, int32_t n) {
    dnnl_dims_t dims = {n};
    dnnl_memory_desc_init_by_tag(md, 1, dims, dnnl_f32, dnnl_x);
}

static int make_reorder(nn_dnnl_t *d, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                        int32_t accumulate, dnnl_primitive_t *out) {
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success && accumulate) {
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success) st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (st == dnnl_success) st = dnnl_reorder_primitive_desc_create(&pd, from, d->eng, to, d->eng, attr);
    if (st == dnnl_success) st = dnnl_primitive_create(out, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    DNNL_TRY(d, st, "reorder between the NCHW/OIHW interface and oneDNN's layout");
    return 0;
}

/* Appends argument `arg` (user layout `user_md`) to e; out: written by the primitive;
 * force: go through a buffer even when the layouts agree (accumulating outputs). */
static int add_arg(nn_dnnl_t *d, entry_t *e, const_dnnl_primitive_desc_t pd, int32_t arg,
                   const dnnl_memory_desc_t *user_md, int32_t out, int32_t force) {
    arg_t *a = &e->a[e->nargs++];
    a->arg = arg;
    a->out = out;
    const dnnl_memory_desc_t *pmd = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
    if (!pmd) return dnnl_fail(d, dnnl_invalid_arguments, "query_md", __FILE__, __LINE__, "argument missing");
    DNNL_TRY(d, dnnl_memory_create(&a->user, user_md, d->eng, DNNL_MEMORY_NONE), "user memory");
    if (dnnl_memory_desc_equal(pmd, user_md) && !force) return 0;
    DNNL_TRY(d, dnnl_memory_create(&a->prim, pmd, d->eng, DNNL_MEMORY_NONE), "layout memory");
    a->bytes = dnnl_memory_desc_get_size(pmd);
    return out ? make_reorder(d, pmd, user_md, force, &a->reorder)
               : make_reorder(d, user_md, pmd, 0, &a->reorder);
}

/* The attributes of a primitive: user scratchpad; for inference, the fused
 * residual (sum) and activation (eltwise) post-ops. */
static dnnl_status_t make_attr(const entry_t *e, dnnl_primitive_attr_t *attr) {
    dnnl_status_t st = dnnl_primitive_attr_create(attr);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (st != dnnl_success || !((e->flags & F_RES) || e->act >= 0)) return st;
    dnnl_post_ops_t po = NULL;
    st = dnnl_post_ops_create(&po);
    if (st == dnnl_success && (e->flags & F_RES)) st = dnnl_post_ops_append_sum(po, 1.0f);
    if (st == dnnl_success && e->act >= 0)
        st = dnnl_post_ops_append_eltwise(po, 1.0f, e->act == NN_ACT_SILU ? dnnl_eltwise_swish : dnnl_eltwise_relu,
                                          e->act == NN_ACT_SILU ? 1.0f : 0.0f, 0.0f);
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(*attr, po);
    if (po) dnnl_post_ops_destroy(po);
    return st;
}

/* The forward descriptor of e's shape (also the hint of the backward ones). */
static dnnl_status_t fwd_desc(const entry_t *e, dnnl_convolution_desc_t *cd) {
    dnnl_memory_desc_t src, wei, bias, dst;
    md_act(&src, e->B, e->cin, (e->flags & F_X_NHWC) && !e->relax ? dnnl_nhwc : dnnl_format_tag_any);
    md_wei(&wei, e->cout, e->cin, e->k, dnnl_format_tag_any);
    md_vec(&bias, e->cout);
    md_act(&dst, e->B, e->cout, (e->flags & F_Y_NHWC) && !e->relax ? dnnl_nhwc : dnnl_format_tag_any);
    int64_t p = e->k / 2;
    dnnl_dims_t strides = {1, 1}, pad = {p, p};
    return dnnl_convolution_forward_desc_init(cd, (e->flags & F_INFER) ? dnnl_forward_inference : dnnl_forward_training,
                                              dnnl_convolution_direct, &src, &wei,
                                              (e->flags & F_BIAS) ? &bias : NULL, &dst, strides, pad, pad);
}

static int build_args(nn_dnnl_t *d, entry_t *e, const_dnnl_primitive_desc_t pd) {
    dnnl_memory_desc_t in, out, wei, vec;
    md_act(&in, e->B, e->cin, (e->flags & F_X_NHWC) ? dnnl_nhwc : dnnl_nchw);
    md_act(&out, e->B, e->cout, (e->flags & F_Y_NHWC) ? dnnl_nhwc : dnnl_nchw);
    md_wei(&wei, e->cout, e->cin, e->k, dnnl_oihw);
    md_vec(&vec, e->cout);
    int r = 0;
    if (e->kind == K_FWD) {
        r |= add_arg(d, e, pd, DNNL_ARG_SRC, &in, 0, 0);
        r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_WEIGHTS, &wei, 0, 0);
        if (e->flags & F_BIAS) r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_BIAS, &vec, 0, 0);
        r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_DST, &out, 1, 0);
        arg_t *dst = &e->a[e->nargs - 1];
        if (!r && (e->flags & F_RES) && dst->prim) {
            const dnnl_memory_desc_t *pmd = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_DST);
            DNNL_TRY(d, dnnl_memory_create(&e->res_user, &out, d->eng, DNNL_MEMORY_NONE), "residual memory");
            r |= make_reorder(d, &out, pmd, 0, &e->res_reorder);
        }
    } else if (e->kind == K_BWD_DATA) {
        r |= add_arg(d, e, pd, DNNL_ARG_DIFF_DST, &out, 0, 0);
        r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_WEIGHTS, &wei, 0, 0);
        r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_DIFF_SRC, &in, 1, (e->flags & F_ACCUM) != 0);
    } else {
        r |= add_arg(d, e, pd, DNNL_ARG_SRC, &in, 0, 0);
        r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_DIFF_DST, &out, 0, 0);
        r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_DIFF_WEIGHTS, &wei, 1, 0);
        if (e->flags & F_BIAS) r |= r ? 0 : add_arg(d, e, pd, DNNL_ARG_DIFF_BIAS, &vec, 1, 0);
    }
    if (r) return -1;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (e->scratch_bytes)
        DNNL_TRY(d, dnnl_memory_create(&e->scratch, smd, d->eng, DNNL_MEMORY_NONE), "scratchpad memory");
    DNNL_TRY(d, dnnl_primitive_create(&e->prim, pd), "primitive creation");
    return 0;
}

/* Creates e's primitive descriptor (forward, backward data or backward weights). */
static int build_pd(nn_dnnl_t *d, entry_t *e, dnnl_primitive_desc_t *pd) {
    dnnl_convolution_desc_t fd, cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t hint = NULL;
    DNNL_TRY(d, fwd_desc(e, &fd), "forward descriptor (shape)");
    dnnl_status_t st = make_attr(e, &attr);
    if (st == dnnl_success && e->kind == K_FWD) {
        st = dnnl_primitive_desc_create(pd, &fd, attr, d->eng, NULL);
    } else if (st == dnnl_success) {
        st = dnnl_primitive_desc_create(&hint, &fd, NULL, d->eng, NULL);
        dnnl_memory_desc_t in, out, wei, vec;
        md_act(&in, e->B, e->cin, dnnl_format_tag_any);
        md_act(&out, e->B, e->cout, dnnl_format_tag_any);
        md_wei(&wei, e->cout, e->cin, e->k, dnnl_format_tag_any);
        md_vec(&vec, e->cout);
        int64_t p = e->k / 2;
        dnnl_dims_t strides = {1, 1}, pad = {p, p};
        if (st == dnnl_success && e->kind == K_BWD_DATA)
            st = dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &in, &wei, &out,
                                                          strides, pad, pad);
        else if (st == dnnl_success)
            st = dnnl_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &in, &wei,
                                                             (e->flags & F_BIAS) ? &vec : NULL, &out,
                                                             strides, pad, pad);
        if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &cd, attr, d->eng, hint);
    }
    if (hint) dnnl_primitive_desc_destroy(hint);
    if (attr) dnnl_primitive_attr_destroy(attr);
    DNNL_TRY(d, st, "convolution primitive descriptor (unsupported shape or post-op?)");
    const char *impl = NULL;
    if ((e->flags & (F_X_NHWC | F_Y_NHWC)) && !e->relax &&
        dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strncmp(impl, "ref", 3) == 0) { /* once more, oneDNN choosing the layouts */
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        e->relax = 1;
        return build_pd(d, e, pd);
    }
    return 0;
}

/* Also sets the calling thread's OpenMP team size: oneDNN sizes a primitive's
 * work split when it is created and uses the team at execution. */
static entry_t *lookup(nn_dnnl_t *d, int32_t kind, int32_t B, int32_t cin, int32_t cout, int32_t k,
                       int32_t flags, int32_t act) {
    omp_set_num_threads(d->threads);
    d->clock++;
    for (int32_t i = 0; i < d->n; i++) {
        entry_t *e = d->e[i];
        if (e->kind == kind && e->B == B && e->cin == cin && e->cout == cout && e->k == k &&
            e->flags == flags && e->act == act) {
            e->used = d->clock;
            return e;
        }
    }
    entry_t *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(d->err, sizeof(d->err), "oneDNN route: out of memory");
        return NULL;
    }
    *e = (entry_t){.kind = kind, .B = B, .cin = cin, .cout = cout, .k = k, .flags = flags, .act = act,
                   .used = d->clock};
    /* oneDNN's JIT does not survive running out of memory while it builds a
     * primitive (a segfault inside dnnl_primitive_create under ulimit -v):
     * refuse with a message while the room cannot be had. */
    void *room = malloc(DNNL_BUILD_ROOM);
    if (!room) {
        char l[96];
        snprintf(d->err, sizeof(d->err), "oneDNN route: out of memory%s: no %d MiB of room to build a "
                 "convolution primitive", compat_address_space_note(l, sizeof l), DNNL_BUILD_ROOM >> 20);
        free(e);
        return NULL;
    }
    free(room);
    dnnl_primitive_desc_t pd = NULL;
    int r = build_pd(d, e, &pd);
    if (r == 0) r = build_args(d, e, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (r != 0) {
        entry_free(e);
        return NULL;
    }
    if (d->n == DNNL_CACHE_MAX) { /* evict the least recently used */
        int32_t v = 0;
        for (int32_t i = 1; i < d->n; i++)
            if (d->e[i]->used < d->e[v]->used) v = i;
        entry_free(d->e[v]);
        d->e[v] = d->e[--d->n];
    }
    d->e[d->n++] = e;
    return e;
}

/* ---- running an entry ---------------------------------------------------------- */
static void *slot(nn_dnnl_t *d, int32_t s, size_t bytes) {
    if (d->cap[s] < bytes) {
        compat_aligned_free(d->buf[s]);
        d->buf[s] = compat_aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        d->cap[s] = d->buf[s] ? bytes : 0;
    }
    return d->buf[s];
}

static int exec(nn_dnnl_t *d, dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args) {
    DNNL_TRY(d, dnnl_primitive_execute(p, d->st, n, args), "execute");
    return 0;
}

/* ptr[i]: the caller's pointer of argument i; res: residual for F_RES. */
static int run(nn_dnnl_t *d, entry_t *e, void *const *ptr, const float *res) {
    dnnl_exec_arg_t args[DNNL_MAX_ARGS + 1];
    for (int32_t i = 0; i < e->nargs; i++) {
        arg_t *a = &e->a[i];
        DNNL_TRY(d, dnnl_memory_set_data_handle(a->user, ptr[i]), "user pointer");
        args[i] = (dnnl_exec_arg_t){a->arg, a->user};
        if (!a->prim) continue;
        void *b = slot(d, i, a->bytes);
        if (!b) return dnnl_fail(d, dnnl_out_of_memory, "slot", __FILE__, __LINE__, "layout buffer");
        DNNL_TRY(d, dnnl_memory_set_data_handle(a->prim, b), "layout pointer");
        args[i].memory = a->prim;
        if (a->out) continue; /* outputs go back after the primitive (adding when F_ACCUM) */
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, a->user}, {DNNL_ARG_TO, a->prim}};
        if (exec(d, a->reorder, 2, ra)) return -1;
    }
    int n = e->nargs;
    if (e->scratch) {
        void *b = slot(d, DNNL_SLOT_SCRATCH, e->scratch_bytes);
        if (!b) return dnnl_fail(d, dnnl_out_of_memory, "slot", __FILE__, __LINE__, "scratchpad");
        DNNL_TRY(d, dnnl_memory_set_data_handle(e->scratch, b), "scratchpad pointer");
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    }
    if (e->flags & F_RES) { /* the sum post-op adds what dst holds: the residual */
        arg_t *dst = &e->a[e->nargs - 1];
        if (dst->prim) {
            DNNL_TRY(d, dnnl_memory_set_data_handle(e->res_user, (void *)res), "residual pointer");
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, e->res_user}, {DNNL_ARG_TO, dst->prim}};
            if (exec(d, e->res_reorder, 2, ra)) return -1;
        } else if (ptr[e->nargs - 1] != res) {
            memcpy(ptr[e->nargs - 1], res, sizeof(float) * (size_t)e->B * e->cout * NN_HW);
        }
    }
    if (exec(d, e->prim, n, args)) return -1;
    for (int32_t i = 0; i < e->nargs; i++) {
        arg_t *a = &e->a[i];
        if (!a->out || !a->prim) continue;
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, a->prim}, {DNNL_ARG_TO, a->user}};
        if (exec(d, a->reorder, 2, ra)) return -1;
    }
    DNNL_TRY(d, dnnl_stream_wait(d->st), "stream wait");
    return 0;
}

/* ---- the three ops ---------------------------------------------------------------- */
int nn_dnnl_conv_fwd(nn_dnnl_t *d, const float *x, const float *w, const float *bias,
                     const float *res, int32_t act, int32_t B, int32_t cin, int32_t cout,
                     int32_t k, float *y, int32_t layout) {
    int32_t flags = (bias ? F_BIAS : 0) | (res ? F_RES : 0) | (act >= 0 || res || layout ? F_INFER : 0) |
                    ((layout & NN_CONV_X_NATIVE) ? F_X_NHWC : 0) | ((layout & NN_CONV_Y_NATIVE) ? F_Y_NHWC : 0);
    entry_t *e = lookup(d, K_FWD, B, cin, cout, k, flags, act);
    if (!e) return -1;
    void *ptr[DNNL_MAX_ARGS];
    int32_t n = 0;
    ptr[n++] = (void *)x;
    ptr[n++] = (void *)w;
    if (bias) ptr[n++] = (void *)bias;
    ptr[n++] = y;
    return run(d, e, ptr, res);
}

int nn_dnnl_conv_bwd_data(nn_dnnl_t *d, const float *dy, const float *w, int32_t B, int32_t cin,
                          int32_t cout, int32_t k, float *dx, int32_t accumulate) {
    entry_t *e = lookup(d, K_BWD_DATA, B, cin, cout, k, accumulate ? F_ACCUM : 0, -1);
    if (!e) return -1;
    void *ptr[DNNL_MAX_ARGS] = {(void *)dy, (void *)w, dx};
    return run(d, e, ptr, NULL);
}

int nn_dnnl_conv_bwd_filter(nn_dnnl_t *d, const float *x, const float *dy, int32_t B, int32_t cin,
                            int32_t cout, int32_t k, float *dw, float *dbias) {
    entry_t *e = lookup(d, K_BWD_W, B, cin, cout, k, dbias ? F_BIAS : 0, -1);
    if (!e) return -1;
    void *ptr[DNNL_MAX_ARGS] = {(void *)x, (void *)dy, dw, dbias};
    return run(d, e, ptr, NULL);
}

#endif /* KOMA_HAVE_DNNL */
