/* conv_dnnl.h - oneDNN convolutions for the CPU backend (internal to nn/).
 *
 * Owns: a oneDNN engine and stream, the primitives built for each shape
 * (created once, cached, reused), the buffers that hold tensors in the
 * layouts oneDNN chooses (blocked/NHWC) and the scratchpad.
 * Does not own: the op semantics (nn/backend.h: NCHW activations, OIHW
 * weights at the interface; the layouts oneDNN prefers stay inside), the
 * reference route it is tested against (nn/backend_cpu.c).
 * Threads: one instance is used by one thread at a time (as a backend is);
 * each call sets that thread's OpenMP thread count to the instance's, so two
 * instances on two threads run side by side.
 * Errors: every call returns 0, or -1 with a message (file:line, the oneDNN
 * status and a hint) kept for nn_dnnl_error; the caller then runs the
 * reference route for that call. Nothing aborts.
 * Built only with KOMA_HAVE_DNNL; without it nn_dnnl_new returns NULL.
 */
#ifndef KOMA_NN_CONV_DNNL_H
#define KOMA_NN_CONV_DNNL_H

#include <stddef.h>
#include <stdint.h>

typedef struct nn_dnnl nn_dnnl_t;

/* threads >= 1. NULL + err when oneDNN is absent or fails to start. */
nn_dnnl_t *nn_dnnl_new(int32_t threads, char *err, size_t errlen);
void nn_dnnl_free(nn_dnnl_t *d); /* NULL ok */
const char *nn_dnnl_error(const nn_dnnl_t *d); /* last failure, "" if none */
/* "oneDNN 2.6.3 (omp)" and the like; static storage. */
const char *nn_dnnl_version(void);

/* y (B, cout, 9, 9) = act(conv(x, w) + bias + res): x (B, cin, 9, 9),
 * w (cout, cin, k, k), bias (cout) or NULL, res (B, cout, 9, 9) or NULL,
 * act = nn_act_t or -1 for none. y may equal res, not x. layout:
 * NN_CONV_X_NATIVE / NN_CONV_Y_NATIVE (nn/backend.h): x / y and res are NHWC
 * (this route's native layout, oneDNN's choice for inference) instead of NCHW. */
int nn_dnnl_conv_fwd(nn_dnnl_t *d, const float *x, const float *w, const float *bias,
                     const float *res, int32_t act, int32_t B, int32_t cin, int32_t cout,
                     int32_t k, float *y, int32_t layout);
/* dy (B, cout, 9, 9), w -> dx (B, cin, 9, 9); accumulate: dx += instead of = */
int nn_dnnl_conv_bwd_data(nn_dnnl_t *d, const float *dy, const float *w, int32_t B, int32_t cin,
                          int32_t cout, int32_t k, float *dx, int32_t accumulate);
/* x, dy -> dw (cout, cin, k, k), dbias (cout) or NULL */
int nn_dnnl_conv_bwd_filter(nn_dnnl_t *d, const float *x, const float *dy, int32_t B, int32_t cin,
                            int32_t cout, int32_t k, float *dw, float *dbias);

#endif
