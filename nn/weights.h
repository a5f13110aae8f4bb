/* weights.h - Koma nets (and optionally their optimizer state) on disk.
 *
 * Owns: the mapping between a net's tensors and a safetensors file, and the
 * checks that a file is the net the caller expects. Does not own: the file
 * format itself (nn/safetensors.h), the architecture (nn/net.h).
 *
 * File: safetensors, every tensor F32 under its nn_tensor_info_t name
 * ("stem.conv.weight", "blocks.0.bn1.running_mean", ...; PyTorch state_dict
 * names, so a torch module with the same structure loads it directly), plus
 * __metadata__: koma.kind = "weights", koma.version = "1", koma.net = "6x64" (or "6x64g2": nn/net.h),
 * koma.activation = "relu", koma.features_version, koma.in_planes,
 * koma.in_hand (decimal strings), and koma.xxh3.<tensor> checksums (added by
 * the writer). Optimizer state lives in the SAME file when saved with a
 * trainer: one "opt.momentum.<name>" F32 tensor per trained tensor and
 * "opt.step" (I64, shape [1]); koma.optimizer = "sgd-nesterov" marks it.
 * One file keeps weights and optimizer state from ever going out of step.
 */
#ifndef KOMA_NN_WEIGHTS_H
#define KOMA_NN_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "nn/net.h"

#define NN_WEIGHTS_VERSION 1

/* Writes net (and tr's optimizer state when tr != NULL; tr must train net)
 * durably to path. Returns 0, or -1 with err naming the file. */
int nn_weights_save(nn_net_t *net, nn_optim_t *tr, const char *path, char *err, size_t errlen);
/* The same with more metadata: meta holds key, value, key, value, ..., NULL
 * (NULL: none); every key "koma.<something>" (train/lineage.h's koma.lineage*,
 * for one). A key that is not, or has no value, is refused: -1, nothing written. */
int nn_weights_save_meta(nn_net_t *net, nn_optim_t *tr, const char *const *meta, const char *path, char *err,
                         size_t errlen);

/* Opens path, verifies every checksum and the metadata, and returns a new net
 * on be. expect_features_version < 0 accepts any. NULL with err ("<path>:
 * <problem>") for a truncated, corrupt or mismatched file, and for one whose
 * checksums are right but whose values are not a net: a NaN or an infinity
 * ("<path>: tensor 'blocks.0.bn1.running_var' holds NaN at index 12: ..."),
 * or a negative batch-norm running variance. */
nn_net_t *nn_weights_load(nn_backend_t *be, const char *path, int32_t expect_features_version,
                          char *err, size_t errlen);

/* Whether path holds a usable net, without a device or a net: checksums,
 * metadata (kind, version, size, features_version as for nn_weights_load),
 * every F32 tensor finite, batch-norm running variances >= 0; not the
 * tensors' names and shapes (nn_weights_load checks those). A few ms for a
 * 10x128 net: for choosing among files (koma plays a run's newest model that
 * passes). Returns 0, or -1 with err as nn_weights_load's. */
int nn_weights_check(const char *path, int32_t expect_features_version, char *err, size_t errlen);

/* Loads path into an existing net of the same configuration (size,
 * activation, in_planes, in_hand, features_version must all match), and when
 * tr != NULL also its optimizer state, which the file must then contain.
 * Nothing is modified when it fails. Returns 0, or -1 with err. */
int nn_weights_read(nn_net_t *net, nn_optim_t *tr, const char *path, char *err, size_t errlen);

/* One metadata value of path: 0 with buf = the value, 1 when the file has no
 * such key (buf untouched), -1 with err (unreadable file, or a value of len
 * bytes or more). Checksums are not verified (nn_weights_check does that). */
int nn_weights_meta(const char *path, const char *key, char *buf, size_t len, char *err, size_t errlen);

/* 1 when files a and b hold the same tensors (names and XXH3 each, the
 * optimizer's included) whatever else their metadata says (a model file's
 * koma.lineage, a checkpoint's none), 0 when not, -1 with err when one cannot
 * be read. */
int nn_weights_same_tensors(const char *a, const char *b, char *err, size_t errlen);

/* Reads only the configuration stored in path's metadata. */
int nn_weights_peek(const char *path, nn_net_config_t *cfg, char *err, size_t errlen);

#endif
