/* dist.h - processes working on one job: rank, size and the few collective
 * operations data-parallel training needs, over MPI.
 *
 * Owns: MPI's life in the process (MPI_Init_thread when the process was
 * started by a launcher such as mpirun or srun, MPI_Finalize), the world
 * communicator (MPI_ERRORS_RETURN: every call's status is checked, an MPI
 * failure is a status and a message naming file:line, never an abort here),
 * sums over ranks, an agreement (did every rank succeed?) and the check that
 * a value, e.g. the hash of the weights, is the same on every rank.
 * Does not own: what is summed (train/dist_train.c: gradients, metrics, BN
 * statistics), devices (buffers are host memory), files, the run.
 *
 * Without MPI (not found at configure time, or -DKOMA_MPI=OFF) dist_stub.c
 * gives the same API for one process: rank 0 of 1, sums are copies. A
 * process started without a launcher is also rank 0 of 1 and never calls
 * MPI, so the single-process path is the same with and without MPI built.
 *
 * Collectives: every rank must call the same collective operations in the
 * same order (dist_sum_*, dist_agree, dist_same_u64); a rank that fails must
 * still call them (dist_agree with ok = 0) so that no other rank waits for
 * it forever.
 * Threads: the thread that called dist_init, only.
 * Errors: -1 with err ("MPI_Allreduce failed at dist/dist_mpi.c:88: ...").
 */
#ifndef KOMA_DIST_DIST_H
#define KOMA_DIST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dist dist_t;

/* True when Koma was built with MPI. */
bool dist_built(void);
/* Joins the job: with MPI built and a launcher's environment present
 * (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, ...), MPI_Init; otherwise a
 * job of one. NULL with err when MPI cannot start. Call once per process. */
dist_t *dist_init(int *argc, char ***argv, char *err, size_t errlen);
/* MPI_Finalize where dist_init initialised MPI (NULL ok). */
void dist_free(dist_t *d);

int32_t dist_rank(const dist_t *d); /* 0..size-1 */
int32_t dist_size(const dist_t *d); /* 1 without a launcher */

/* buf[0..n) := the sum over ranks of buf[0..n), in place, the same bits on
 * every rank. */
int dist_sum_f32(dist_t *d, float *buf, int64_t n, char *err, size_t errlen);
int dist_sum_f64(dist_t *d, double *buf, int64_t n, char *err, size_t errlen);
/* *all_ok := every rank passed ok != 0. Returns -1 only for an MPI failure. */
int dist_agree(dist_t *d, int ok, int *all_ok, char *err, size_t errlen);
/* *same := v equals rank 0's v on every rank; *first_bad := the lowest rank
 * whose v differs (-1 when none). */
int dist_same_u64(dist_t *d, uint64_t v, int *same, int32_t *first_bad, char *err, size_t errlen);
/* Seconds spent inside dist_sum_* and bytes summed since dist_init (this
 * rank), for the timing line. */
double dist_sum_seconds(const dist_t *d, int64_t *bytes);

#endif
