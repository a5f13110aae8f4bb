/* dist_train.h - data-parallel training steps over the ranks of a job
 * (dist/dist.h): one net, N processes, one identical SGD step on every rank.
 *
 * Owns: the split of a global batch of B rows into S = N ranks x M
 * micro-batches slices of b = B/S rows (rank r computes slices r*M ..
 * r*M+M-1, one after the other, of the batch every rank samples with the
 * same key, so N ranks at B see exactly the rows one process at B sees),
 * the sums of gradients, metrics and BN running statistics over slices and
 * ranks, host staging for them, and the check that the weights are the same
 * bits on every rank (XXH3 of params and stats).
 * Where the trainers are CUDA instances with one slice each and NCCL is
 * built, gradients and statistics are averaged on the GPUs (ncclAllReduce on
 * the trainer's stream) instead of through host copies and MPI.
 * Does not own: the job (dist/), sampling (train/window.c), the step itself
 * (nn_train_step_grads / nn_train_step_apply), files, the run (rank 0 owns
 * the run: train/main.c).
 *
 * BN: each slice is normalised with its own batch statistics (no
 * synchronised BN), so N ranks at B differ from one process at B by that;
 * the running statistics of the slices are averaged after every step, which
 * keeps them identical on every rank. One process with M = N micro-batches
 * (train --micro-batches N) computes what N ranks compute, the same sums in
 * the same order for N = 2 (bit for bit; for N > 2 MPI's order of the sums
 * over ranks may differ in the last bits).
 *
 * Collectives: train_dist_step and train_dist_check are collective: every
 * rank calls them at the same steps. A rank that failed before the step
 * passes batch NULL; every rank then returns -1.
 * Threads: one thread at a time: the thread of dist_init, or any thread
 * while the job's mailbox runs (its thread then makes the collectives:
 * dist/dist.h), as rank 0's trainer thread in a `selfplay` training group.
 * Errors: -1 with err; a failure on another rank is reported as such.
 */
#ifndef KOMA_TRAIN_DIST_TRAIN_H
#define KOMA_TRAIN_DIST_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dist/dist.h"
#include "nn/net.h"

typedef struct train_dist train_dist_t;

/* For the trainer nt (created with max batch global_batch / (dist_size(d) *
 * micro)). NULL with err when global_batch is not a multiple of ranks x
 * micro, or out of memory. */
train_dist_t *train_dist_new(dist_t *d, nn_optim_t *nt, int32_t global_batch, int32_t micro, char *err,
                             size_t errlen);
void train_dist_free(train_dist_t *td); /* NULL ok */
/* How the sums over ranks go: "NCCL between the GPUs" (CUDA trainers, one
 * slice per rank, built with NCCL: train/dist_nccl.h) or "MPI on host
 * copies" (with the reason NCCL is not used, where it was tried). */
const char *train_dist_route(const train_dist_t *td);
/* Rows of one slice: global_batch / slices. */
int32_t train_dist_local_batch(int32_t global_batch, int32_t slices);

/* One step on the global batch full (B rows, the same on every rank; NULL:
 * this rank failed before the step, err already says why). stop: this rank
 * was asked to stop; *stop_all := some rank was, and then no step is taken.
 * m := the step's metrics, means over the global batch (legal_f1 from the
 * summed counts). 0, or -1 with err on every rank when any rank failed. */
int train_dist_step(train_dist_t *td, const nn_batch_t *full, int stop, nn_metrics_t *m, int *stop_all, char *err,
                    size_t errlen);
/* 0 when params and stats hash the same on every rank; -1 with err naming
 * the first rank that differs from rank 0 (or an MPI failure). */
int train_dist_check(train_dist_t *td, char *err, size_t errlen);
/* The XXH3 of the net's params and stats (host copies), as compared. */
uint64_t train_dist_weights_hash(train_dist_t *td);

#endif
