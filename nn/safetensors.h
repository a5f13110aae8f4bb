/* safetensors.h - read and write safetensors files (nets and shards).
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON header
 * (padded with spaces so data starts 8-byte aligned), then raw little-endian
 * tensor bytes. The header maps tensor names to {dtype, shape, data_offsets}
 * and holds "__metadata__" (string -> string). Koma writes its facts there:
 * "koma.kind", "koma.version", ... and one "koma.xxh3.<tensor>" entry per
 * tensor (XXH3-64 of the tensor's bytes, 16 lowercase hex digits).
 *
 * Owns: the file format, bounds checks, checksums. Does not own: what the
 * tensors mean (nn/weights.c, data/shard.c).
 *
 * The reader memory-maps the file and never trusts a length it has not
 * bounded: header length vs file size, offsets vs data size, shape product x
 * dtype size vs offsets, overlapping/unsorted ranges, duplicate names, JSON
 * syntax. Every error message starts with the file's path.
 */
#ifndef KOMA_SAFETENSORS_H
#define KOMA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_DTYPE_F32,
    ST_DTYPE_F16,
    ST_DTYPE_BF16,
    ST_DTYPE_F64,
    ST_DTYPE_U8,
    ST_DTYPE_I8,
    ST_DTYPE_U16,
    ST_DTYPE_I16,
    ST_DTYPE_U32,
    ST_DTYPE_I32,
    ST_DTYPE_U64,
    ST_DTYPE_I64,
    ST_DTYPE_BOOL,
    ST_DTYPE_NB
} st_dtype_t;

#define ST_MAX_DIMS 8
#define ST_MAX_NAME 128

size_t st_dtype_size(st_dtype_t dt);
const char *st_dtype_name(st_dtype_t dt); /* "F32", "U8", ... as in the spec */

typedef struct {
    char name[ST_MAX_NAME];
    st_dtype_t dtype;
    int32_t ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;
    const void *data; /* points into the mapping (reader) */
} st_tensor_t;

/* ---- writer ------------------------------------------------------------- */
typedef struct st_writer st_writer_t;

st_writer_t *st_writer_new(void);
void st_writer_free(st_writer_t *w); /* NULL ok */
/* Adds a tensor. data is not copied: it must stay valid until st_writer_write.
 * Returns 0, or -1 for a duplicate/invalid name or shape. */
int st_writer_add(st_writer_t *w, const char *name, st_dtype_t dtype, int32_t ndim,
                  const int64_t *shape, const void *data);
/* Adds a __metadata__ entry (copied). */
int st_writer_meta(st_writer_t *w, const char *key, const char *value);
/* Writes the file durably (temporary name, fsync, rename; compat.h), adding a
 * koma.xxh3.<name> checksum per tensor. Returns 0, or -1 with err set. */
int st_writer_write(st_writer_t *w, const char *path, char *err, size_t errlen);

/* ---- reader ------------------------------------------------------------- */
typedef struct st_file st_file_t;

enum { ST_OPEN_VERIFY = 1 }; /* check every tensor's XXH3 against the metadata */

/* Maps and validates the file. Returns NULL with err set ("<path>: <what>"). */
st_file_t *st_open(const char *path, uint32_t flags, char *err, size_t errlen);
void st_close(st_file_t *f); /* NULL ok */

const char *st_path(const st_file_t *f);
int32_t st_count(const st_file_t *f);
const st_tensor_t *st_at(const st_file_t *f, int32_t i);
const st_tensor_t *st_find(const st_file_t *f, const char *name); /* NULL if absent */
const char *st_meta(const st_file_t *f, const char *key);        /* NULL if absent */
/* Verifies all checksums (if not done at open). Missing checksum = error. */
int st_verify(const st_file_t *f, char *err, size_t errlen);

/* Finds a tensor and checks its dtype and shape; a shape entry of -1 matches
 * any size. Returns NULL with err = "<path>: tensor 'x' ..." on mismatch. */
const st_tensor_t *st_expect(const st_file_t *f, const char *name, st_dtype_t dtype,
                             int32_t ndim, const int64_t *shape, char *err, size_t errlen);

#endif
