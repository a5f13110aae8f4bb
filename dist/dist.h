/* dist.h - processes working on one job: rank, size and the few collective
 * operations data-parallel training needs, over MPI.
 *
 * Owns: MPI's life in the process (MPI_Init_thread when the process was
 * started by a launcher such as mpirun or srun, MPI_Finalize), the world
 * communicator (MPI_ERRORS_RETURN: every call's status is checked, an MPI
 * failure is a status and a message naming file:line, never an abort here)
 * and the groups split from it, sums over ranks, an agreement (did every rank succeed?) and the check that
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
 * same order (dist_sum_*, dist_bcast, dist_agree, dist_same_u64); a rank
 * that fails must still call them (dist_agree with ok = 0) so that no other
 * rank waits for it forever. They run on the job (every rank) or on a group
 * of its ranks (dist_split: a communicator of its own, e.g. the ranks that
 * train together inside `selfplay` while the others play), with the group's
 * ranks and size.
 *
 * Messages (the mailbox, for `selfplay` ranks): point-to-point byte messages
 * with a tag, sent and received by ONE communication thread per rank that
 * the mailbox owns (every MPI call of the process goes through it while it
 * runs: MPI_THREAD_SERIALIZED is asked for and checked, never
 * MPI_THREAD_MULTIPLE). Sends are MPI_Isend, at most max_in_flight at a time
 * (a sender waits, bounded, for a slot); receives are MPI_Improbe +
 * MPI_Mrecv into an inbox of at most max_inbox messages (a full inbox leaves
 * the rest with MPI: back-pressure instead of unbounded memory). What the
 * bytes mean is the caller's (selfplay/wire.h); the mailbox only moves them.
 *
 * Collectives while a mailbox runs: the mailbox's thread makes them (the
 * caller hands the collective over and waits on the mailbox's condition
 * variable; the thread posts MPI_Iallreduce / MPI_Ibcast on the job's or the
 * group's communicator and tests it in its poll loop, between sends and
 * receives, which go on meanwhile), so MPI_THREAD_SERIALIZED still holds
 * and a rank can train with its group while its mailbox carries games and
 * nets. Without a mailbox they are blocking calls on the caller's thread.
 * One collective at a time per process (a second caller waits its turn).
 *
 * Threads: dist_init, dist_free, dist_split and dist_abort: the thread that
 * called dist_init; dist_split before any mailbox starts. The collectives:
 * one thread at a time, any thread while a mailbox runs, else the thread of
 * dist_init; start the mailbox before the threads that make collectives and
 * stop it after they end (dist_mail_stop waits for a collective in flight).
 * The dist_mail_* calls: any thread.
 * Errors: -1 with err ("MPI_Allreduce failed at dist/dist_mpi.c:88: ...");
 * an MPI failure in the communication thread is sticky (dist_mail_error),
 * and a collective that fails there fails the mailbox too.
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
/* MPI_Finalize where dist_init initialised MPI (NULL ok); for a group, its
 * communicator only (free the groups before the job). */
void dist_free(dist_t *d);
/* Groups: collective over every rank of the job d (MPI_Comm_split), before
 * any mailbox starts. The ranks that pass the same color >= 0 form one
 * group, ranked by key (ties by their rank in d): *group := this rank's,
 * with its own rank and size and the same collectives; color -1: *group :=
 * NULL (this rank is in none). A group's collectives go through d's
 * mailbox while one runs; it has no mailbox of its own; dist_abort of a
 * group ends the whole job. 0, or -1 with err (MPI, out of memory). */
int dist_split(dist_t *d, int32_t color, int32_t key, dist_t **group, char *err, size_t errlen);

int32_t dist_rank(const dist_t *d); /* 0..size-1 */
int32_t dist_size(const dist_t *d); /* 1 without a launcher */
/* This rank's index among the ranks on its own node (MPI_COMM_TYPE_SHARED),
 * 0 without a launcher: what picks a rank's GPU. */
int32_t dist_local_rank(const dist_t *d);
/* Ends every rank of the job now (MPI_Abort with code; mpirun then exits
 * non-zero). For a rank that cannot end the job cleanly within a bounded
 * time. Without MPI, or a job of one, it returns and does nothing. */
void dist_abort(dist_t *d, int code);

/* buf[0..n) := the sum over ranks of buf[0..n), in place, the same bits on
 * every rank. */
int dist_sum_f32(dist_t *d, float *buf, int64_t n, char *err, size_t errlen);
int dist_sum_f64(dist_t *d, double *buf, int64_t n, char *err, size_t errlen);
/* buf[0..bytes) := root's bytes on every rank (MPI_Bcast). */
int dist_bcast(dist_t *d, void *buf, int64_t bytes, int32_t root, char *err, size_t errlen);
/* *all_ok := every rank passed ok != 0. Returns -1 only for an MPI failure. */
int dist_agree(dist_t *d, int ok, int *all_ok, char *err, size_t errlen);
/* *same := v equals rank 0's v on every rank; *first_bad := the lowest rank
 * whose v differs (-1 when none). */
int dist_same_u64(dist_t *d, uint64_t v, int *same, int32_t *first_bad, char *err, size_t errlen);
/* Seconds spent inside dist_sum_* and bytes summed since dist_init (this
 * rank), for the timing line. */
double dist_sum_seconds(const dist_t *d, int64_t *bytes);

/* ---- messages ------------------------------------------------------------ */

typedef struct dist_mail dist_mail_t;

/* A received message: from rank src, with tag, len bytes at data (the
 * caller frees it with dist_msg_free). */
typedef struct {
    int32_t src, tag;
    int64_t len;
    uint8_t *data;
} dist_msg_t;
void dist_msg_free(dist_msg_t *m); /* NULL ok */

enum { DIST_ALL_OTHERS = -1 };             /* dist_mail_send to every other rank */
enum { DIST_OK = 0, DIST_TIMEOUT = 1 };    /* dist_mail_* results; -1 = error */
#define DIST_MSG_MAX ((int64_t)1 << 30)    /* the largest message (bytes) */

/* Starts the communication thread of the job d (not of a group); from then
 * on it also makes the collectives of d and of its groups (above).
 * max_in_flight: sends posted and not yet
 * complete (>= 1); max_inbox: received and not yet taken (>= 1). NULL with
 * err when MPI cannot give MPI_THREAD_SERIALIZED, or out of memory. In a
 * job of one it works too (there is nobody to send to). */
dist_mail_t *dist_mail_start(dist_t *d, int32_t max_in_flight, int32_t max_inbox, char *err, size_t errlen);
/* Queues len bytes (copied) for rank dest (or DIST_ALL_OTHERS: one copy
 * shared by every send), waiting up to timeout_ms for room: DIST_OK,
 * DIST_TIMEOUT, or -1 with err (a bad rank or length, the thread's sticky
 * MPI error, the mailbox stopped). */
int dist_mail_send(dist_mail_t *m, int32_t dest, int32_t tag, const void *buf, int64_t len, int64_t timeout_ms,
                   char *err, size_t errlen);
/* The oldest received message into *out, waiting up to timeout_ms:
 * DIST_OK, DIST_TIMEOUT (*out NULL), or -1 with err (the sticky error). */
int dist_mail_recv(dist_mail_t *m, dist_msg_t **out, int64_t timeout_ms, char *err, size_t errlen);
/* Waits up to timeout_ms until every queued send is complete: DIST_OK,
 * DIST_TIMEOUT, or -1 with err. */
int dist_mail_flush(dist_mail_t *m, int64_t timeout_ms, char *err, size_t errlen);
/* 1 with the thread's MPI failure, else 0. */
int dist_mail_error(dist_mail_t *m, char *err, size_t errlen);
typedef struct {
    int64_t sent, sent_bytes, received, received_bytes;
    int32_t in_flight, inbox;
} dist_mail_stats_t;
void dist_mail_stats(dist_mail_t *m, dist_mail_stats_t *st);
/* Stops and joins the thread (after the collective in flight, if any),
 * frees the inbox; collectives are direct calls again. Sends still in flight
 * (dist_mail_flush timed out) are left to MPI: the caller then ends the job
 * with dist_abort rather than dist_free. Returns the number of such sends.
 * NULL ok. */
int32_t dist_mail_stop(dist_mail_t *m);

#endif
