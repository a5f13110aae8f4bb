/* nn_late.h - a CPU backend whose downloads arrive late, for the tests of
 * the one-step-late training step (nn_train_step_launch, train/loop.c).
 *
 * The CPU backend has no fences: its records are downloaded at once, so a
 * reader that forgets to wait, or a record overwritten before it is read,
 * would go unnoticed there. This wrapper gives the CPU backend the optional
 * members CUDA has: host_alloc (malloc, counted), download_async (the bytes
 * are taken from the source NOW, which is what the stream would copy at that
 * point, while the destination is filled with NaN), fence_record /
 * fence_wait (a wait delivers the copies queued before its mark, and only
 * those) and sync (delivers all). Every other op is the CPU's.
 * Header-only; every function is static. One thread at a time. */
#ifndef KOMA_TESTS_NN_LATE_H
#define KOMA_TESTS_NN_LATE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/backend.h"
#include "tests/koma_test.h"

#define T_LATE_Q 64

typedef struct {
    nn_backend_t be; /* first: the backend the net uses (the CPU's ops and ctx) */
    nn_backend_t *cpu;
    struct {
        void *dst;
        void *bytes_now; /* the source's bytes at download_async */
        size_t n;
        int64_t seq;
    } q[T_LATE_Q];
    int32_t nq;
    int64_t seq;                /* copies queued so far */
    int64_t mark[NN_FENCE_NB];  /* fence i covers copies with seq < mark[i] */
    int64_t asyncs, waits, delivered, host_allocs, syncs;
} t_late_be_t;

static inline t_late_be_t *t_late_of(nn_backend_t *be) { return (t_late_be_t *)be; }

/* Delivers the queued copies with seq < upto, in order. */
static inline void t_late_deliver(t_late_be_t *L, int64_t upto) {
    int32_t k = 0;
    for (int32_t i = 0; i < L->nq; i++) {
        if (L->q[i].seq < upto) {
            memcpy(L->q[i].dst, L->q[i].bytes_now, L->q[i].n);
            free(L->q[i].bytes_now);
            L->delivered++;
        } else {
            L->q[k++] = L->q[i];
        }
    }
    L->nq = k;
}

static inline void t_late_download_async(nn_backend_t *be, void *dst, const void *src, size_t bytes) {
    t_late_be_t *L = t_late_of(be);
    if (nn_backend_error(be)) {
        memset(dst, 0xFF, bytes);
        return;
    }
    KOMA_ASSERT(L->nq < T_LATE_Q);
    void *now = malloc(bytes ? bytes : 1);
    KOMA_ASSERT(now);
    L->cpu->download(be, now, src, bytes); /* the CPU's download: counted by the fault switch as one */
    memset(dst, 0xFF, bytes);             /* not there yet: NaN until its fence is waited for */
    L->q[L->nq].dst = dst;
    L->q[L->nq].bytes_now = now;
    L->q[L->nq].n = bytes;
    L->q[L->nq].seq = L->seq++;
    L->nq++;
    L->asyncs++;
}

static inline void t_late_fence_record(nn_backend_t *be, int32_t i) {
    KOMA_ASSERT(i >= 0 && i < NN_FENCE_NB);
    t_late_of(be)->mark[i] = t_late_of(be)->seq;
}

static inline void t_late_fence_wait(nn_backend_t *be, int32_t i) {
    KOMA_ASSERT(i >= 0 && i < NN_FENCE_NB);
    t_late_be_t *L = t_late_of(be);
    L->waits++;
    if (!nn_backend_error(be)) t_late_deliver(L, L->mark[i]);
}

static inline void t_late_sync(nn_backend_t *be) {
    t_late_be_t *L = t_late_of(be);
    L->syncs++;
    if (!nn_backend_error(be)) t_late_deliver(L, L->seq);
}

static inline void *t_late_host_alloc(nn_backend_t *be, size_t bytes) {
    t_late_of(be)->host_allocs++;
    return malloc(bytes ? bytes : 1);
}
static inline void t_late_host_free(nn_backend_t *be, void *p) {
    (void)be;
    free(p);
}

static inline void t_late_free(nn_backend_t *be) {
    t_late_be_t *L = t_late_of(be);
    for (int32_t i = 0; i < L->nq; i++) free(L->q[i].bytes_now);
    nn_backend_free(L->cpu);
    free(L);
}

/* A CPU backend (reference convolutions: `ref` != 0, else the default route)
 * with late downloads; free with nn_backend_free. */
static inline nn_backend_t *t_late_backend_new(int32_t threads, int ref) {
    char err[256];
    nn_backend_t *cpu = nn_backend_cpu_new_conv(threads, ref ? NN_CPU_CONV_REF : NN_CPU_CONV_AUTO, err, sizeof err);
    KOMA_ASSERT(cpu);
    t_late_be_t *L = calloc(1, sizeof *L);
    KOMA_ASSERT(L);
    L->cpu = cpu;
    L->be = *cpu;
    L->be.free = t_late_free;
    L->be.download_async = t_late_download_async;
    L->be.fence_record = t_late_fence_record;
    L->be.fence_wait = t_late_fence_wait;
    L->be.sync = t_late_sync;
    L->be.host_alloc = t_late_host_alloc;
    L->be.host_free = t_late_host_free;
    return &L->be;
}

#endif
