/* model.h - model files of a run and their registration (internal to train/).
 *
 * Owns: the run-relative name of a cycle's model, the arch string stored in
 * the models table, and saving a model: the file written durably first, then
 * its row registered through the writer thread (db_model_insert on the thread
 * that owns koma.db, waited for). The trainer thread and train --from-games
 * both save through train_model_save.
 * Does not own: the weights format (nn/weights.h), SQL (data/db.c).
 */
#ifndef KOMA_TRAIN_MODEL_H
#define KOMA_TRAIN_MODEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "data/run.h"
#include "data/writer.h"
#include "nn/net.h"
#include "train/lineage.h"

#define TRAIN_MODELS_DIR RUN_MODELS /* data/run.h */

/* "models/0007.safetensors" (4+ digits). Returns buf. */
char *train_model_rel_path(char *buf, size_t len, int64_t cycle);
/* "resnet6x64-relu". Returns buf. */
char *train_model_arch(const nn_net_config_t *cfg, char *buf, size_t len);

/* Runs run(db, arg) on the writer thread and waits until it has run (or was
 * cancelled). arg (argsize bytes) is copied to the job and copied back after
 * it ran, so run may return results in it. When *stop (NULL ok) or
 * compat_stop_requested() is set, the wait gives up TRAIN_WRITER_GRACE_MS
 * later (the job may still run; nothing of the caller's is touched then).
 * Returns the job's status (0 = DB_OK) with err, or DB_TIMEOUT when given up. */
#define TRAIN_WRITER_GRACE_MS 30000
int train_writer_call(db_writer_t *w, db_job_run_fn run, void *arg, size_t argsize, const atomic_int *stop,
                      char *err, size_t errlen);

/* Registers the model file <run_dir>/<m->path>, already durably written:
 * measures its size and XXH3, inserts m through the writer and waits for the
 * commit. Returns 0 with m->id and m->xxh3 set, or -1 with err. */
int train_model_register(db_writer_t *w, const char *run_dir, db_model_t *m, const atomic_int *stop, char *err,
                         size_t errlen);

/* Saves net + optimizer state nt as the model of cycle m->cycle: fills
 * m->path (models/<cycle>.safetensors), m->arch and m->features_version from
 * the net, writes <run_dir>/<m->path> durably (nn_weights_save: temporary
 * name, fsync, rename; non-finite weights are refused), then registers it
 * (train_model_register). The caller fills the rest of m (run_id, steps,
 * samples, losses). Returns 0 with m->id and m->xxh3 set, or -1 with err
 * (a file written but not registered is overwritten by the next save). */
int train_model_save(db_writer_t *w, const char *run_dir, nn_net_t *net, nn_optim_t *nt, db_model_t *m,
                     const atomic_int *stop, char *err, size_t errlen);
/* The file's koma.lineage (train/lineage.h): train_model_save gives it the
 * run's newest model's lineage with its last entry, this run's, brought up to
 * date (cycle, steps and samples from m; the run's CPU minutes from koma.db,
 * as m->cpu_seconds will say; GPU minutes: + the trainer's wall time on a
 * CUDA device since the last save). train_model_save_from with anc != NULL
 * (a run's first net taken from another run: --init) writes anc and a new
 * entry for this run instead. */
int train_model_save_from(db_writer_t *w, const char *run_dir, nn_net_t *net, nn_optim_t *nt, db_model_t *m,
                          const train_lineage_t *anc, const atomic_int *stop, char *err, size_t errlen);

/* Sets cycle_metrics.train_s of `cycle` through the writer, keeping the rest
 * of the row (or creating it). Returns 0, or -1 with err. */
int train_cycle_train_s(db_writer_t *w, int32_t cycle, double train_s, const atomic_int *stop, char *err,
                        size_t errlen);

/* Removes "<name>.tmp.<pid>" files left in dir by a durable write that was
 * killed before its rename (compat_durable_*); calls note(user, path) for
 * each (NULL ok). Returns how many were removed. */
int train_remove_stale_tmp(const char *dir, void (*note)(void *user, const char *path), void *user);

#endif
