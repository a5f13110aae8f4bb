/* eval.h - what the search asks the network, and the network it asks.
 *
 * Owns: turning the Net option into a weights file (a file as it is; a run
 * directory: the latest model its koma.db names; empty: the shipped net),
 * the inference server koma plays with, the uniform stand-in (Net none), and the batch
 * buffers that carry MCTS leaves to the server and the answers back.
 * Does not own: the network (nn/), the tree (mcts/), when to search (search.c).
 *
 * The uniform evaluator gives every legal move the same logit and every
 * position W = D = L (value 0): the search then plays legal moves guided
 * only by terminal positions and mates in one.
 */
#ifndef KOMA_USI_EVAL_H
#define KOMA_USI_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcts/batch.h"
#include "mcts/mcts.h"
#include "nn/server.h"

enum { USI_PATH_MAX = 1024 };

/* Net option -> weights file. "" stays "" (no net). A directory with a
 * koma.db gives <dir>/<path of the newest model whose file is the one
 * koma.db registered (XXH3)>: a newest model that is missing or damaged is
 * passed over for the one before it, and note (may be NULL) says which and
 * why ("" when the newest was taken). A directory without koma.db gives its
 * newest (last by name) *.safetensors, looking in <dir>/models first.
 * Returns 0, or -1 with err naming the path and the problem. */
int usi_net_resolve(const char *net, char *path, size_t pathlen, char *note, size_t notelen, char *err,
                    size_t errlen);

/* Net `none` (any case): no network, the uniform evaluator, asked for. */
bool usi_net_is_none(const char *net);

#define USI_SHIPPED_NET "koma-default.safetensors"
/* The net that ships with Koma: <exe dir>/../share/koma/nets/USI_SHIPPED_NET
 * (installed), then KOMA_SOURCE_NETS_DIR/USI_SHIPPED_NET (the source tree
 * the program was built from). Returns 0 with path (may be NULL) set to the
 * first that exists, or -1 with path "". looked (may be NULL) lists the
 * places tried, "A and B". */
int usi_net_shipped(char *path, size_t pathlen, char *looked, size_t lookedlen);

typedef struct usi_eval usi_eval_t;

/* How many threads can run at once here (at most want): each started and
 * held until all are, then released and joined. A Threads value the machine
 * cannot give (a `ulimit -v` too small for that many stacks) would otherwise
 * end koma inside the OpenMP runtime ("libgomp: Thread creation failed"). */
int32_t usi_threads_startable(int32_t want);

/* An evaluator for weights_path ("" or NULL: uniform). NULL with err when the
 * file cannot be served (bad file, wrong encoding, no CUDA, ...). */
usi_eval_t *usi_eval_new(const char *weights_path, const char *backend, int32_t threads, int32_t max_batch, char *err,
                      size_t errlen);
void usi_eval_free(usi_eval_t *ev); /* NULL ok */
bool usi_eval_uniform(const usi_eval_t *ev);
/* "6x64 relu on cpu: runs/x/models/0007.safetensors" or "uniform policy, zero value (no net)". */
const char *usi_eval_describe(const usi_eval_t *ev);

/* One batch of leaves (mcts/batch.h) on its way through the server. */
typedef struct {
    mcts_batch_t *leaves;     /* collected and committed by the search */
    nn_server_ticket_t ticket;
    bool in_flight;
} usi_batch_t;

usi_batch_t *usi_batch_new(int32_t cap); /* NULL when out of memory */
void usi_batch_free(usi_batch_t *b);     /* NULL ok */

/* Starts evaluating the leaves committed to b->leaves. Returns 0, or -1 with
 * err (the batch then holds uniform answers and is not in flight). */
int usi_eval_submit(usi_eval_t *ev, usi_batch_t *b, char *err, size_t errlen);
/* Waits for a submitted batch. Returns 0, or -1 with err: the batch then
 * holds uniform answers, so the search can go on. */
int usi_eval_wait(usi_eval_t *ev, usi_batch_t *b, char *err, size_t errlen);
/* Has a submitted batch finished? 1: yes (answers in b; uniform ones and
 * -1 with err when the network failed), 0: still running. A batch not in
 * flight counts as finished. */
int usi_eval_poll(usi_eval_t *ev, usi_batch_t *b, char *err, size_t errlen);
/* Hands every answer of b to the tree (mcts_deliver_moves). */
void usi_batch_deliver(mcts_tree_t *t, usi_batch_t *b);

#endif
