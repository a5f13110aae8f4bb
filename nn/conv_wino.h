/* conv_wino.h - Winograd F(3x3, 3x3) convolutions for the CPU backend
 * (internal to nn/).
 *
 * A 9x9 board is exactly 3 x 3 output tiles of 3 x 3, each computed from a
 * 5 x 5 input tile: 25 multiplications per tile and channel pair instead of
 * 81 (3.24x fewer), none wasted on padding (F(4x4, 3x3), lc0's choice on 8x8,
 * would pad 9x9 to 12x12 and lose most of its gain). The 25 products are 25
 * matrix products (tiles x cin times cin x cout) run by a register-blocked
 * kernel written with GCC vector extensions (AVX-512 where the build targets
 * it, narrower vectors otherwise), on chunks of positions small enough to stay
 * in cache, in parallel over chunks (OpenMP where built).
 * Interpolation points 0, 1, -1, 2 and infinity: integer input and output
 * transforms; float32 error measured 2e-6 relative on sums of 128 channels.
 *
 * Owns: the transforms, the kernel, per-thread scratch. Does not own: the op
 * semantics (nn/backend.h: NCHW activations, OIHW weights; NHWC where the
 * caller says NN_CONV_*_NATIVE, the same native layout as nn/conv_dnnl.c),
 * when the route is used (nn/backend_cpu.c).
 * Threads: one instance is used by one thread at a time (as a backend is); a
 * call runs on up to `threads` OpenMP threads.
 * Errors: only out of memory: -1 with a message kept for nn_wino_error; the
 * caller then runs another route for that call. Nothing aborts.
 */
#ifndef KOMA_NN_CONV_WINO_H
#define KOMA_NN_CONV_WINO_H

#include <stddef.h>
#include <stdint.h>

typedef struct nn_wino nn_wino_t;

nn_wino_t *nn_wino_new(int32_t threads); /* NULL when out of memory */
void nn_wino_free(nn_wino_t *w);         /* NULL ok */
const char *nn_wino_error(const nn_wino_t *w); /* last failure, "" if none */

/* Whether the route takes a convolution of these sizes: k == 3 and the
 * output channels a multiple of 16 (cin for bwd_data, whose output it is;
 * bwd_filter takes any cin, cout). */
int nn_wino_takes_fwd(int32_t k, int32_t cin, int32_t cout);
int nn_wino_takes_bwd_data(int32_t k, int32_t cin, int32_t cout);
int nn_wino_takes_bwd_filter(int32_t k, int32_t cin, int32_t cout);

/* The products in bf16 (inference only): with NN_WINO_BF16 in layout, the
 * transformed input and filters are rounded to bf16 and multiplied by
 * AVX512_BF16's vdpbf16ps (two channels an instruction, sums in fp32); the
 * transforms, bias, residual and activation stay fp32. Ignored where
 * nn_wino_bf16_supported() is 0 (a CPU without AVX512_BF16, a compiler that
 * cannot target it). */
#define NN_WINO_BF16 256
#if defined(__x86_64__) && defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 10)
#define NN_WINO_HAVE_BF16 1
#else
#define NN_WINO_HAVE_BF16 0
#endif
int nn_wino_bf16_supported(void);

/* y (B, cout, 9, 9) = act(conv3x3(x, w) + bias + res): as nn_dnnl_conv_fwd
 * (act = nn_act_t or -1, bias / res NULL ok, y may equal res, not x; layout
 * NN_CONV_X_NATIVE / NN_CONV_Y_NATIVE: x / y and res NHWC; NN_WINO_BF16). */
int nn_wino_conv_fwd(nn_wino_t *w, const float *x, const float *wt, const float *bias, const float *res,
                     int32_t act, int32_t B, int32_t cin, int32_t cout, float *y, int32_t layout);
/* dy (B, cout, 9, 9), w (cout, cin, 3, 3) -> dx (B, cin, 9, 9); accumulate: += */
int nn_wino_conv_bwd_data(nn_wino_t *w, const float *dy, const float *wt, int32_t B, int32_t cin,
                          int32_t cout, float *dx, int32_t accumulate);
/* x, dy -> dw (cout, cin, 3, 3), dbias (cout) or NULL */
int nn_wino_conv_bwd_filter(nn_wino_t *w, const float *x, const float *dy, int32_t B, int32_t cin,
                            int32_t cout, float *dw, float *dbias);

#endif
