/* lineage.h - where a net came from: every run that trained it, and the
 * compute each spent, carried in the net's file (internal to train/).
 *
 * Owns: the koma.lineage metadata of a model file, its reading, checking and
 * writing, and where a run started with `selfplay --init FROM` takes its net
 * from (train_lineage_from: FROM's newest net, its counters and ancestors).
 * Does not own: saving the file (train/model.c calls train_lineage_meta),
 * the run's CPU seconds (data/db.h: db_run_cpu_update), the weights format
 * (nn/weights.h: nn_weights_save_meta, nn_weights_meta).
 *
 * Metadata (strings, as every safetensors metadata value):
 *   koma.lineage              JSON array, oldest run first, one object a run:
 *       {"run": "<its directory as given>", "commit": "<the Koma commit that saved it last>",
 *        "cycle": C, "steps": S, "samples": N, "cpu_minutes": X, "gpu_minutes": Y}
 *     C, S, N: the run's cycle, optimizer steps and samples (in all, the
 *     ancestors' included: counters carry on) of its newest net in the
 *     lineage; X, Y: that run's own compute, summed over its invocations (a
 *     run's CPU minutes as koma.db's models.cpu_seconds counts them; GPU
 *     minutes: the wall minutes its trainer ran on a CUDA device), null where
 *     unknown (a net of an older Koma). The LAST entry is the run that wrote
 *     the file.
 *   koma.lineage.cpu_minutes  the sum of X over the entries (unknowns as 0)
 *   koma.lineage.gpu_minutes  the sum of Y
 * So a net says how much compute made it in all, whatever machines its runs
 * went through.
 * Errors: -1 with a message naming the file or directory; nothing aborts.
 */
#ifndef KOMA_TRAIN_LINEAGE_H
#define KOMA_TRAIN_LINEAGE_H

#include <stddef.h>
#include <stdint.h>

enum { TRAIN_LINEAGE_RUNS = 64, TRAIN_LINEAGE_TEXT = 64 * 1024 };

typedef struct {
    char run[512];
    char commit[64];
    int64_t cycle, steps, samples;
    double cpu_minutes, gpu_minutes; /* NAN: unknown */
} train_lineage_run_t;

typedef struct {
    int32_t n; /* 0: none (a net of an older Koma, or a random net not saved yet) */
    train_lineage_run_t r[TRAIN_LINEAGE_RUNS];
} train_lineage_t;

/* The lineage of model file path: 0 with *l (n = 0 when the file has none),
 * or -1 with err naming the file (unreadable, or a koma.lineage that is not
 * an array of such objects, or more than TRAIN_LINEAGE_RUNS runs). */
int train_lineage_read(const char *path, train_lineage_t *l, char *err, size_t errlen);

/* The totals over l's runs (unknown figures count 0). */
double train_lineage_cpu_minutes(const train_lineage_t *l);
double train_lineage_gpu_minutes(const train_lineage_t *l);

/* koma.lineage and its two totals as key/value pairs for nn_weights_save_meta:
 * kv[0..5] and kv[6] = NULL, pointing into text (TRAIN_LINEAGE_TEXT bytes)
 * and num (64 bytes). 0, or -1 with err when the text does not fit. */
int train_lineage_meta(const train_lineage_t *l, char *text, char *num, const char *kv[7], char *err, size_t errlen);

/* Where `--init FROM` starts a run: FROM is a run directory (its newest
 * registered model, checked against koma.db's XXH3; its steps, samples and
 * CPU seconds from its models row) or a net file (checked; its counters from
 * its lineage, else its optimizer step and 0 samples). Sets model (the file to
 * load), *steps, *samples and *anc: FROM's lineage, whose last entry is
 * FROM's run as of that net (one made up from what FROM says of itself when
 * the file has no lineage: the directory, or the file and its
 * koma.shipped.* metadata). 0, or -1 with err naming FROM. */
int train_lineage_from(const char *from, char *model, size_t model_len, int64_t *steps, int64_t *samples,
                       train_lineage_t *anc, char *err, size_t errlen);

/* Wall nanoseconds since the process began using its trainer (the first call
 * of this function, which train_trainer_new makes). */
int64_t train_lineage_clock_ns(void);

#endif
