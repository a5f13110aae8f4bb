/* dist_nccl.h - sums over ranks on the GPUs: NCCL all-reduce between the CUDA
 * devices of a job's ranks (one device per rank), for data-parallel training
 * (train/dist_train.c) instead of MPI on host copies.
 *
 * Owns: the NCCL communicator (its unique id made on rank 0 and sent to the
 * others with dist_bcast), enqueued on the trainer backend's own stream.
 * Does not own: the job (dist/), the buffers (the trainer's device memory).
 * Built where CMake found NCCL beside the CUDA backend and MPI
 * (KOMA_HAVE_NCCL: a ✓ NCCL line in the configure report); NCCL itself is
 * in the CUDA module (nn/backend_cuda.h's nn_cuda_nccl_*), so a program
 * loads it only with the cuda backend; elsewhere
 * dist_nccl_new returns NULL with err saying so and the caller sums with MPI.
 * Collectives: dist_nccl_new and dist_nccl_mean are collective (every rank,
 * in the same order). NCCL refuses two ranks on one GPU: one rank per device.
 * Tested only where two or more GPUs exist (tests/train/test_train_dist.c,
 * part 4); this project's lent machines have one.
 * Errors: -1 / NULL with err naming the NCCL call and its message.
 */
#ifndef KOMA_TRAIN_DIST_NCCL_H
#define KOMA_TRAIN_DIST_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist/dist.h"
#include "nn/backend.h"

typedef struct dist_nccl dist_nccl_t;

/* True when Koma was built with NCCL. */
bool dist_nccl_built(void);
/* A communicator over every rank of d, each on the device of its CUDA
 * backend be. NULL with err (on every rank alike) when not built, when be is
 * not CUDA on some rank, or when NCCL cannot start. */
dist_nccl_t *dist_nccl_new(dist_t *d, nn_backend_t *be, char *err, size_t errlen);
void dist_nccl_free(dist_nccl_t *g); /* NULL ok */
/* dev (n floats, device memory of be) := its mean over the ranks, enqueued on
 * be's stream behind the work already there. 0, or -1 with err. */
int dist_nccl_mean(dist_nccl_t *g, float *dev, int64_t n, char *err, size_t errlen);

#endif
