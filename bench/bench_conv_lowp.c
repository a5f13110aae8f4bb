/* bench_conv_lowp.c - one 3x3 convolution (C -> C channels, 9x9, fused
 * bias + residual + ReLU, inference) on every CPU route, side by side in one
 * run, one thread, process CPU time: the Winograd route in fp32 and with its
 * products in bf16 (NN_WINO_BF16, where the CPU has AVX512_BF16), and
 * oneDNN's direct convolution in f32, bf16 (blocked and NHWC) and int8
 * (u8 x s8 -> u8, NHWC, where VNNI); the primitive alone, no conversions:
 * oneDNN's best case. 5 interleaved rounds of 0.2 s per route and batch.
 *
 * Usage: bench_conv_lowp [C]   (default 32: the shipped net's channels)
 * Built with oneDNN only (KOMA_HAVE_DNNL); the issue-47 figures in
 * docs/BENCHMARKS.md.
 */
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nn/conv_wino.h"
#define CK(x)                                                                                                          \
    do {                                                                                                               \
        dnnl_status_t s_ = (x);                                                                                        \
        if (s_) {                                                                                                      \
            printf("fail %s: %d\n", #x, s_);                                                                           \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
static double cpu(void) { return (double)clock() / CLOCKS_PER_SEC; }
typedef struct {
    dnnl_primitive_t p;
    dnnl_memory_t src, wei, bias, dst, scr;
    const char *impl;
} dn_t;
static dnnl_engine_t eng;
static dnnl_stream_t st;
static void mk(dn_t *d, int B, int ci, int co, dnnl_data_type_t dt, dnnl_format_tag_t atag) {
    dnnl_data_type_t wdt = dt == dnnl_u8 ? dnnl_s8 : dt;
    dnnl_memory_desc_t s, w, b, o;
    dnnl_dims_t sd = {B, ci, 9, 9}, wd = {co, ci, 3, 3}, bd = {co}, od = {B, co, 9, 9};
    dnnl_memory_desc_init_by_tag(&s, 4, sd, dt, atag);
    dnnl_memory_desc_init_by_tag(&w, 4, wd, wdt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x);
    dnnl_memory_desc_init_by_tag(&o, 4, od, dt, atag);
    dnnl_convolution_desc_t cd;
    dnnl_dims_t str = {1, 1}, pad = {1, 1};
    CK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &s, &w, &b, &o, str,
                                          pad, pad));
    dnnl_primitive_attr_t at;
    CK(dnnl_primitive_attr_create(&at));
    dnnl_post_ops_t po;
    CK(dnnl_post_ops_create(&po));
    CK(dnnl_post_ops_append_sum(po, 1.f));
    CK(dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0, 0));
    CK(dnnl_primitive_attr_set_post_ops(at, po));
    if (dt == dnnl_u8) {
        float sc = 0.01f;
        CK(dnnl_primitive_attr_set_output_scales(at, 1, 0, &sc));
    }
    dnnl_primitive_desc_t pd;
    CK(dnnl_primitive_desc_create(&pd, &cd, at, eng, NULL));
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &d->impl);
    d->impl = strdup(d->impl);
    CK(dnnl_memory_create(&d->src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&d->wei, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng,
                          DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&d->bias, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), eng,
                          DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_create(&d->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), eng, DNNL_MEMORY_ALLOCATE));
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    d->scr = NULL;
    if (sm && dnnl_memory_desc_get_size(sm)) CK(dnnl_memory_create(&d->scr, sm, eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_primitive_create(&d->p, pd));
}
static void run(dn_t *d) {
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, d->src},
                            {DNNL_ARG_WEIGHTS, d->wei},
                            {DNNL_ARG_BIAS, d->bias},
                            {DNNL_ARG_DST, d->dst},
                            {DNNL_ARG_SCRATCHPAD, d->scr}};
    CK(dnnl_primitive_execute(d->p, st, d->scr ? 5 : 4, a));
    dnnl_stream_wait(st);
}
int main(int argc, char **argv) {
    int C = argc > 1 ? atoi(argv[1]) : 32;
    omp_set_num_threads(1);
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    int Bs[] = {16, 32, 64, 256};
    for (int bi = 0; bi < 4; bi++) {
        int B = Bs[bi];
        dn_t f, h, fn, hn;
        mk(&f, B, C, C, dnnl_f32, dnnl_format_tag_any);
        mk(&h, B, C, C, dnnl_bf16, dnnl_format_tag_any);
        mk(&fn, B, C, C, dnnl_f32, dnnl_nhwc);
        mk(&hn, B, C, C, dnnl_bf16, dnnl_nhwc);
        nn_wino_t *w = nn_wino_new(1);
        size_t n = (size_t)B * C * 81;
        float *x = calloc(n, 4), *y = calloc(n, 4), *wt = calloc((size_t)C * C * 9, 4), *bias = calloc(C, 4);
        for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) * 0.1f;
        for (int i = 0; i < C * C * 9; i++) wt[i] = (float)(i % 5) * 0.01f;
        dn_t q;
        mk(&q, B, C, C, dnnl_u8, dnnl_nhwc);
        double tt[7] = {0};
        long it[7] = {0};
        for (int round = 0; round < 5; round++) {
            for (int k = 0; k < 7; k++) {
                double t0 = cpu();
                long m = 0;
                do {
                    if (k == 0 || k == 6)
                        nn_wino_conv_fwd(w, x, wt, bias, y, 0, B, C, C, y, 3 | (k == 6 ? NN_WINO_BF16 : 0));
                    else run(k == 1 ? &f : k == 2 ? &h : k == 3 ? &fn : k == 4 ? &hn : &q);
                    m++;
                } while (cpu() - t0 < 0.2);
                tt[k] += cpu() - t0;
                it[k] += m;
            }
        }
        double us[7];
        for (int k = 0; k < 7; k++) us[k] = 1e6 * tt[k] / it[k];
        printf("C=%d B=%4d us/conv: wino fp32 %7.1f, wino bf16 %7.1f%s | oneDNN f32 %7.1f (%s), bf16 %7.1f (%s), "
               "NHWC f32 %7.1f bf16 %7.1f, int8 %7.1f (%s) | wino fp32 / wino bf16 %.2f, / oneDNN bf16 %.2f, / int8 "
               "%.2f\n",
               C, B, us[0], us[6], nn_wino_bf16_supported() ? "" : " (fp32: no AVX512_BF16)", us[1], f.impl, us[2],
               h.impl, us[3], us[4], us[5], q.impl, us[0] / us[6], us[0] / us[2], us[0] / us[5]);
        fflush(stdout);
    }
    return 0;
}
