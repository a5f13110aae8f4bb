/* safetensors.c - the safetensors file format: writer, bounded reader, XXH3
 * checksums. See safetensors.h for the contract.
 *
 * Owns: bytes on disk <-> named tensors. Does not own: what the tensors mean.
 *
 * Reader rules (the same ones as the reference implementation, plus ours):
 *   - 8-byte LE header length N, 2 <= N <= ST_MAX_HEADER and 8 + N <= file size;
 *   - the header is one JSON object, followed only by (space) padding;
 *   - every tensor has a known dtype, 0..ST_MAX_DIMS dims in [0, 2^53], a
 *     shape product that does not overflow, data_offsets [begin, end] with
 *     begin <= end <= data size and end - begin = prod(shape) * dtype size;
 *   - sorted by offset the tensors tile the data section exactly: no overlap,
 *     no gap, nothing after the last tensor;
 *   - names are unique, 1..ST_MAX_NAME-1 bytes; __metadata__ maps strings to
 *     strings.
 * A tensor whose bytes are not aligned to its dtype size in the mapping (a
 * file from another writer, or a Koma file with odd-sized U8 tensors before
 * wider ones) is served from an aligned copy, so st_tensor_t.data can always
 * be read as the dtype's C type.
 */
#include "nn/safetensors.h"
#include "compat/err.h"

#include "compat/compat.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define ST_MAX_HEADER (100u * 1024u * 1024u) /* bytes of JSON we agree to parse */
#define ST_MAX_DIM ((int64_t)1 << 53)         /* integers a JSON double holds exactly */
#define ST_XXH3_PREFIX "koma.xxh3."

static const struct {
    const char *name;
    size_t size;
} dtype_info[ST_DTYPE_NB] = {
    [ST_DTYPE_F32] = {"F32", 4}, [ST_DTYPE_F16] = {"F16", 2}, [ST_DTYPE_BF16] = {"BF16", 2},
    [ST_DTYPE_F64] = {"F64", 8}, [ST_DTYPE_U8] = {"U8", 1},   [ST_DTYPE_I8] = {"I8", 1},
    [ST_DTYPE_U16] = {"U16", 2}, [ST_DTYPE_I16] = {"I16", 2}, [ST_DTYPE_U32] = {"U32", 4},
    [ST_DTYPE_I32] = {"I32", 4}, [ST_DTYPE_U64] = {"U64", 8}, [ST_DTYPE_I64] = {"I64", 8},
    [ST_DTYPE_BOOL] = {"BOOL", 1},
};

size_t st_dtype_size(st_dtype_t dt) { return (unsigned)dt < ST_DTYPE_NB ? dtype_info[dt].size : 0; }
const char *st_dtype_name(st_dtype_t dt) { return (unsigned)dt < ST_DTYPE_NB ? dtype_info[dt].name : "?"; }

static int dtype_parse(const char *s, st_dtype_t *out) {
    for (int i = 0; i < ST_DTYPE_NB; i++) {
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (st_dtype_t)i;
            return 0;
        }
    }
    return -1;
}

/* prod(shape) * dtype size into *nbytes; -1 on overflow. */
static int shape_nbytes(st_dtype_t dt, int32_t ndim, const int64_t *shape, uint64_t *nbytes) {
    uint64_t n = st_dtype_size(dt);
    for (int32_t i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > UINT64_MAX / d) return -1;
        n *= d;
    }
    if (n > SIZE_MAX) return -1;
    *nbytes = n;
    return 0;
}

static void hex64(uint64_t h, char out[17]) { snprintf(out, 17, "%016llx", (unsigned long long)h); }

/* ======================================================================== */
/* writer                                                                   */
/* ======================================================================== */
typedef struct {
    char name[ST_MAX_NAME];
    st_dtype_t dtype;
    int32_t ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;
    const void *data;
} st_wtensor_t;

typedef struct {
    char *key;
    char *value;
} st_kv_t;

struct st_writer {
    st_wtensor_t *t;
    int32_t nt, capt;
    st_kv_t *kv;
    int32_t nkv, capkv;
};

st_writer_t *st_writer_new(void) { return calloc(1, sizeof(st_writer_t)); }

void st_writer_free(st_writer_t *w) {
    if (!w) return;
    for (int32_t i = 0; i < w->nkv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

int st_writer_add(st_writer_t *w, const char *name, st_dtype_t dtype, int32_t ndim,
                  const int64_t *shape, const void *data) {
    if (!w || !name) return -1;
    size_t len = strlen(name);
    if (len == 0 || len >= ST_MAX_NAME || strcmp(name, "__metadata__") == 0) return -1;
    if ((unsigned)dtype >= ST_DTYPE_NB || ndim < 0 || ndim > ST_MAX_DIMS) return -1;
    if (ndim > 0 && !shape) return -1;
    for (int32_t i = 0; i < ndim; i++)
        if (shape[i] < 0 || shape[i] > ST_MAX_DIM) return -1;
    uint64_t nbytes;
    if (shape_nbytes(dtype, ndim, shape, &nbytes) != 0) return -1;
    if (nbytes > 0 && !data) return -1;
    for (int32_t i = 0; i < w->nt; i++)
        if (strcmp(w->t[i].name, name) == 0) return -1;
    if (w->nt == w->capt) {
        int32_t cap = w->capt ? 2 * w->capt : 16;
        st_wtensor_t *nt = realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        w->t = nt;
        w->capt = cap;
    }
    st_wtensor_t *t = &w->t[w->nt++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->nbytes = nbytes;
    t->data = data;
    return 0;
}

int st_writer_meta(st_writer_t *w, const char *key, const char *value) {
    if (!w || !key || !value || !key[0]) return -1;
    /* Checksums are the writer's to add. */
    if (strncmp(key, ST_XXH3_PREFIX, strlen(ST_XXH3_PREFIX)) == 0) return -1;
    for (int32_t i = 0; i < w->nkv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) { /* last value wins */
            char *v = strdup(value);
            if (!v) return -1;
            free(w->kv[i].value);
            w->kv[i].value = v;
            return 0;
        }
    }
    if (w->nkv == w->capkv) {
        int32_t cap = w->capkv ? 2 * w->capkv : 16;
        st_kv_t *nkv = realloc(w->kv, (size_t)cap * sizeof *nkv);
        if (!nkv) return -1;
        w->kv = nkv;
        w->capkv = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    w->kv[w->nkv].key = k;
    w->kv[w->nkv].value = v;
    w->nkv++;
    return 0;
}

/* The header JSON, padded with spaces to a multiple of 8 bytes. */
static char *writer_header(const st_writer_t *w, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = 1;
    if (w->nkv > 0 || w->nt > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (int32_t i = 0; ok && i < w->nkv; i++)
            ok = cJSON_AddStringToObject(meta, w->kv[i].key, w->kv[i].value) != NULL;
        for (int32_t i = 0; ok && i < w->nt; i++) {
            char key[ST_MAX_NAME + sizeof ST_XXH3_PREFIX], hex[17];
            snprintf(key, sizeof key, ST_XXH3_PREFIX "%s", w->t[i].name);
            hex64(XXH3_64bits(w->t[i].data, (size_t)w->t[i].nbytes), hex);
            ok = cJSON_AddStringToObject(meta, key, hex) != NULL;
        }
    }
    uint64_t off = 0;
    for (int32_t i = 0; ok && i < w->nt; i++) {
        const st_wtensor_t *t = &w->t[i];
        cJSON *o = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        cJSON *offs = o ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        ok = o && shape && offs && cJSON_AddStringToObject(o, "dtype", st_dtype_name(t->dtype));
        for (int32_t d = 0; ok && d < t->ndim; d++) {
            cJSON *n = cJSON_CreateNumber((double)t->shape[d]);
            ok = n && cJSON_AddItemToArray(shape, n);
        }
        cJSON *b = ok ? cJSON_CreateNumber((double)off) : NULL;
        ok = b && cJSON_AddItemToArray(offs, b);
        off += t->nbytes;
        cJSON *e = ok ? cJSON_CreateNumber((double)off) : NULL;
        ok = e && cJSON_AddItemToArray(offs, e);
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) return NULL;
    size_t n = strlen(json), padded = (n + 7) & ~(size_t)7;
    char *out = malloc(padded);
    if (out) {
        memcpy(out, json, n);
        memset(out + n, ' ', padded - n);
        *len = padded;
    }
    cJSON_free(json);
    return out;
}

int st_writer_write(st_writer_t *w, const char *path, char *err, size_t errlen) {
    if (!w || !path) {
        set_err(err, errlen, "%s: st_writer_write: no writer", path ? path : "(null)");
        return -1;
    }
    size_t hlen = 0;
    char *header = writer_header(w, &hlen);
    if (!header) {
        set_err(err, errlen, "%s: out of memory building the header", path);
        return -1;
    }
    compat_durable_t *f = compat_durable_open(path, err, errlen);
    if (!f) {
        free(header);
        return -1;
    }
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    int rc = compat_durable_write(f, le, 8, err, errlen);
    if (rc == 0) rc = compat_durable_write(f, header, hlen, err, errlen);
    for (int32_t i = 0; rc == 0 && i < w->nt; i++)
        rc = compat_durable_write(f, w->t[i].data, (size_t)w->t[i].nbytes, err, errlen);
    free(header);
    if (rc != 0) {
        compat_durable_abort(f);
        return -1;
    }
    return compat_durable_commit(f, err, errlen);
}

/* ======================================================================== */
/* reader                                                                   */
/* ======================================================================== */
struct st_file {
    char *path;
    compat_map_t map;
    cJSON *root;          /* parsed header, owns the metadata strings */
    const cJSON *meta;    /* root's __metadata__ object, or NULL */
    st_tensor_t *t;       /* in header order */
    int32_t n;
    int32_t *by_name;     /* indices of t sorted by name, for st_find */
    uint64_t *begin;      /* data_offsets[0] of t[i] */
    void *aligned;        /* copies of misaligned tensors, or NULL */
};

const char *st_path(const st_file_t *f) { return f ? f->path : NULL; }
int32_t st_count(const st_file_t *f) { return f ? f->n : 0; }
const st_tensor_t *st_at(const st_file_t *f, int32_t i) {
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

void st_close(st_file_t *f) {
    if (!f) return;
    compat_unmap_file(&f->map);
    cJSON_Delete(f->root);
    free(f->t);
    free(f->by_name);
    free(f->begin);
    free(f->aligned);
    free(f->path);
    free(f);
}

/* A JSON number that is an exact integer in [0, 2^53]; -1 otherwise. Negative
 * values come back as -2 so the caller can say "negative". */
static int64_t json_uint(const cJSON *v) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return -1;
    if (d < 0) return -2;
    if (d > (double)ST_MAX_DIM) return -1;
    return (int64_t)d;
}

/* qsort contexts: C11 has no qsort_r, so the arrays carry what they compare. */
typedef struct {
    const char *name;
    int32_t idx;
} name_ref_t;
static int cmp_name_ref(const void *a, const void *b) {
    return strcmp(((const name_ref_t *)a)->name, ((const name_ref_t *)b)->name);
}
typedef struct {
    uint64_t begin, end;
    int32_t idx;
} range_ref_t;
static int cmp_range_ref(const void *a, const void *b) {
    const range_ref_t *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Parses one tensor entry into t; returns 0 or -1 with err set. */
static int parse_tensor(const char *path, const cJSON *e, uint64_t data_size, st_tensor_t *t,
                        uint64_t *begin_out, char *err, size_t errlen) {
    const char *name = e->string;
    size_t len = strlen(name);
    if (len == 0) {
        set_err(err, errlen, "%s: a tensor has an empty name", path);
        return -1;
    }
    if (len >= ST_MAX_NAME) {
        set_err(err, errlen, "%s: tensor name '%.40s...' is %llu bytes, longer than the limit of %d",
                path, name, (unsigned long long)len, ST_MAX_NAME - 1);
        return -1;
    }
    memcpy(t->name, name, len + 1);
    if (!cJSON_IsObject(e)) {
        set_err(err, errlen, "%s: tensor '%s': entry is not a JSON object", path, name);
        return -1;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!dt || !shape || !offs) {
        set_err(err, errlen, "%s: tensor '%s': missing %s", path, name,
                !dt ? "dtype" : !shape ? "shape" : "data_offsets");
        return -1;
    }
    if (!cJSON_IsString(dt)) {
        set_err(err, errlen, "%s: tensor '%s': dtype is not a string", path, name);
        return -1;
    }
    if (dtype_parse(dt->valuestring, &t->dtype) != 0) {
        set_err(err, errlen, "%s: tensor '%s': unknown dtype '%.32s'", path, name, dt->valuestring);
        return -1;
    }
    if (!cJSON_IsArray(shape)) {
        set_err(err, errlen, "%s: tensor '%s': shape is not an array", path, name);
        return -1;
    }
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS) {
        set_err(err, errlen, "%s: tensor '%s': %d dims, more than the limit of %d", path, name,
                ndim, ST_MAX_DIMS);
        return -1;
    }
    t->ndim = ndim;
    int d = 0;
    for (const cJSON *v = shape->child; v; v = v->next, d++) {
        int64_t x = json_uint(v);
        if (x == -2) {
            set_err(err, errlen, "%s: tensor '%s': shape[%d] is negative", path, name, d);
            return -1;
        }
        if (x < 0) {
            set_err(err, errlen, "%s: tensor '%s': shape[%d] is not an integer in [0, 2^53]", path,
                    name, d);
            return -1;
        }
        t->shape[d] = x;
    }
    uint64_t nbytes;
    if (shape_nbytes(t->dtype, t->ndim, t->shape, &nbytes) != 0) {
        set_err(err, errlen, "%s: tensor '%s': shape product overflows", path, name);
        return -1;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets is not an array of 2 integers", path,
                name);
        return -1;
    }
    int64_t b = json_uint(offs->child), en = json_uint(offs->child->next);
    if (b < 0 || en < 0) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets is not an array of 2 non-negative integers",
                path, name);
        return -1;
    }
    if (en < b) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets end %lld is before begin %lld", path,
                name, (long long)en, (long long)b);
        return -1;
    }
    if ((uint64_t)en > data_size) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets end %lld is beyond the data size %llu (truncated file?)",
                path, name, (long long)en, (unsigned long long)data_size);
        return -1;
    }
    if ((uint64_t)(en - b) != nbytes) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets span %lld bytes but shape x %s needs %llu",
                path, name, (long long)(en - b), st_dtype_name(t->dtype), (unsigned long long)nbytes);
        return -1;
    }
    t->nbytes = nbytes;
    *begin_out = (uint64_t)b;
    return 0;
}

/* Checks names, metadata and the tiling of the data section; builds the
 * name index. */
static int check_layout(st_file_t *f, uint64_t data_size, char *err, size_t errlen) {
    const char *path = f->path;
    int32_t n = f->n;
    name_ref_t *names = malloc((size_t)(n ? n : 1) * sizeof *names);
    range_ref_t *ranges = malloc((size_t)(n ? n : 1) * sizeof *ranges);
    f->by_name = malloc((size_t)(n ? n : 1) * sizeof *f->by_name);
    int rc = -1;
    if (!names || !ranges || !f->by_name) {
        set_err(err, errlen, "%s: out of memory", path);
        goto out;
    }
    for (int32_t i = 0; i < n; i++) {
        names[i] = (name_ref_t){f->t[i].name, i};
        ranges[i] = (range_ref_t){f->begin[i], f->begin[i] + f->t[i].nbytes, i};
    }
    qsort(names, (size_t)n, sizeof *names, cmp_name_ref);
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(names[i].name, names[i - 1].name) == 0) {
            set_err(err, errlen, "%s: duplicate tensor name '%s'", path, names[i].name);
            goto out;
        }
        f->by_name[i] = names[i].idx;
    }
    qsort(ranges, (size_t)n, sizeof *ranges, cmp_range_ref);
    uint64_t covered = 0;
    for (int32_t i = 0; i < n; i++) {
        if (ranges[i].begin < covered) {
            set_err(err, errlen, "%s: tensors '%s' and '%s' overlap in the data section", path,
                    f->t[ranges[i - 1].idx].name, f->t[ranges[i].idx].name);
            goto out;
        }
        if (ranges[i].begin > covered) {
            set_err(err, errlen, "%s: data bytes [%llu, %llu) belong to no tensor (before '%s')",
                    path, (unsigned long long)covered, (unsigned long long)ranges[i].begin,
                    f->t[ranges[i].idx].name);
            goto out;
        }
        covered = ranges[i].end;
    }
    if (covered != data_size) {
        set_err(err, errlen, "%s: %llu bytes after the last tensor's data", path,
                (unsigned long long)(data_size - covered));
        goto out;
    }
    rc = 0;
out:
    free(names);
    free(ranges);
    return rc;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_metadata(st_file_t *f, char *err, size_t errlen) {
    if (!f->meta) return 0;
    if (!cJSON_IsObject(f->meta)) {
        set_err(err, errlen, "%s: __metadata__ is not a JSON object", f->path);
        return -1;
    }
    int n = 0;
    for (const cJSON *v = f->meta->child; v; v = v->next, n++) {
        if (!cJSON_IsString(v)) {
            set_err(err, errlen, "%s: __metadata__ value for key '%.64s' is not a string", f->path,
                    v->string);
            return -1;
        }
    }
    const char **keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!keys) {
        set_err(err, errlen, "%s: out of memory", f->path);
        return -1;
    }
    int i = 0;
    for (const cJSON *v = f->meta->child; v; v = v->next) keys[i++] = v->string;
    qsort(keys, (size_t)n, sizeof *keys, cmp_str_ptr);
    for (i = 1; i < n; i++) {
        if (strcmp(keys[i], keys[i - 1]) == 0) {
            set_err(err, errlen, "%s: duplicate __metadata__ key '%.64s'", f->path, keys[i]);
            free(keys);
            return -1;
        }
    }
    free(keys);
    return 0;
}

/* Points every tensor into the mapping, copying misaligned ones. */
static int place_tensors(st_file_t *f, const uint8_t *data, char *err, size_t errlen) {
    size_t copy = 0;
    for (int32_t i = 0; i < f->n; i++) {
        size_t a = st_dtype_size(f->t[i].dtype);
        if (((uintptr_t)(data + f->begin[i])) % a != 0) copy += ((size_t)f->t[i].nbytes + 7) & ~(size_t)7;
    }
    if (copy) {
        f->aligned = malloc(copy);
        if (!f->aligned) {
            set_err(err, errlen, "%s: out of memory copying misaligned tensors", f->path);
            return -1;
        }
    }
    size_t at = 0;
    for (int32_t i = 0; i < f->n; i++) {
        const uint8_t *p = data + f->begin[i];
        if (f->t[i].nbytes == 0) {
            f->t[i].data = p; /* never read; may equal the end of the mapping */
        } else if ((uintptr_t)p % st_dtype_size(f->t[i].dtype) != 0) {
            uint8_t *dst = (uint8_t *)f->aligned + at;
            memcpy(dst, p, (size_t)f->t[i].nbytes);
            f->t[i].data = dst;
            at += ((size_t)f->t[i].nbytes + 7) & ~(size_t)7;
        } else {
            f->t[i].data = p;
        }
    }
    return 0;
}

st_file_t *st_open(const char *path, uint32_t flags, char *err, size_t errlen) {
    if (!path) {
        set_err(err, errlen, "(null): no path");
        return NULL;
    }
    st_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        set_err(err, errlen, "%s: out of memory", path);
        free(f);
        return NULL;
    }
    char *json = NULL;
    if (compat_map_file(path, &f->map, err, errlen) != 0) goto fail;
    uint64_t size = f->map.size;
    if (size < 8) {
        set_err(err, errlen, "%s: file is %llu bytes, shorter than the 8-byte header length",
                path, (unsigned long long)size);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->map.data[i] << (8 * i);
    if (hlen > ST_MAX_HEADER) {
        set_err(err, errlen, "%s: header length %llu is absurd (limit %u bytes); not a safetensors file?",
                path, (unsigned long long)hlen, ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > size - 8) {
        set_err(err, errlen, "%s: header length %llu exceeds the %llu bytes after the length field (truncated file?)",
                path, (unsigned long long)hlen, (unsigned long long)(size - 8));
        goto fail;
    }
    /* cJSON wants a NUL-terminated string; the mapping has none. */
    json = malloc((size_t)hlen + 1);
    if (!json) {
        set_err(err, errlen, "%s: out of memory for a %llu-byte header", path,
                (unsigned long long)hlen);
        goto fail;
    }
    memcpy(json, f->map.data + 8, (size_t)hlen);
    json[hlen] = 0;
    const char *end = NULL;
    f->root = cJSON_ParseWithOpts(json, &end, 0);
    if (!f->root) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at && at >= json && at <= json + hlen ? (long)(at - json) : -1;
        set_err(err, errlen, "%s: header is not valid JSON (error near byte %ld)", path, pos);
        goto fail;
    }
    for (const char *p = end; p < json + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            set_err(err, errlen, "%s: header has bytes other than whitespace padding after the JSON (at byte %ld)",
                    path, (long)(p - json));
            goto fail;
        }
    }
    free(json);
    json = NULL;
    if (!cJSON_IsObject(f->root)) {
        set_err(err, errlen, "%s: header is JSON but not an object", path);
        goto fail;
    }
    uint64_t data_size = size - 8 - hlen;
    int32_t n = 0;
    for (const cJSON *e = f->root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (f->meta) {
                set_err(err, errlen, "%s: duplicate __metadata__", path);
                goto fail;
            }
            f->meta = e;
        } else {
            n++;
        }
    }
    f->t = calloc((size_t)(n ? n : 1), sizeof *f->t);
    f->begin = calloc((size_t)(n ? n : 1), sizeof *f->begin);
    if (!f->t || !f->begin) {
        set_err(err, errlen, "%s: out of memory for %d tensors", path, n);
        goto fail;
    }
    for (const cJSON *e = f->root->child; e; e = e->next) {
        if (e == f->meta) continue;
        if (parse_tensor(path, e, data_size, &f->t[f->n], &f->begin[f->n], err, errlen) != 0)
            goto fail;
        f->n++;
    }
    if (check_metadata(f, err, errlen) != 0) goto fail;
    if (check_layout(f, data_size, err, errlen) != 0) goto fail;
    if (place_tensors(f, f->map.data + 8 + hlen, err, errlen) != 0) goto fail;
    if ((flags & ST_OPEN_VERIFY) && st_verify(f, err, errlen) != 0) goto fail;
    return f;
fail:
    free(json);
    st_close(f);
    return NULL;
}

const st_tensor_t *st_find(const st_file_t *f, const char *name) {
    if (!f || !name) return NULL;
    int32_t lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const st_tensor_t *t = &f->t[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *st_meta(const st_file_t *f, const char *key) {
    if (!f || !f->meta || !key) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->meta, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int parse_hex64(const char *s, uint64_t *out) {
    uint64_t h = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return -1; /* also catches a string shorter than 16 */
        h = h << 4 | (uint64_t)v;
    }
    if (s[16] != 0) return -1;
    *out = h;
    return 0;
}

int st_verify(const st_file_t *f, char *err, size_t errlen) {
    if (!f) {
        set_err(err, errlen, "(null): no file");
        return -1;
    }
    for (int32_t i = 0; i < f->n; i++) {
        const st_tensor_t *t = &f->t[i];
        char key[ST_MAX_NAME + sizeof ST_XXH3_PREFIX], hex[17];
        snprintf(key, sizeof key, ST_XXH3_PREFIX "%s", t->name);
        const char *want = st_meta(f, key);
        uint64_t h;
        if (!want) {
            set_err(err, errlen, "%s: tensor '%s' has no checksum (%s missing from __metadata__)",
                    f->path, t->name, key);
            return -1;
        }
        if (parse_hex64(want, &h) != 0) {
            set_err(err, errlen, "%s: tensor '%s': checksum '%.40s' is not 16 lowercase hex digits",
                    f->path, t->name, want);
            return -1;
        }
        uint64_t got = XXH3_64bits(t->data, (size_t)t->nbytes);
        if (got != h) {
            hex64(got, hex);
            set_err(err, errlen, "%s: tensor '%s': checksum mismatch (header %s, data %s): file corrupted",
                    f->path, t->name, want, hex);
            return -1;
        }
    }
    return 0;
}

static void shape_str(char *buf, size_t len, int32_t ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int32_t i = 0; i < ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

const st_tensor_t *st_expect(const st_file_t *f, const char *name, st_dtype_t dtype,
                             int32_t ndim, const int64_t *shape, char *err, size_t errlen) {
    const st_tensor_t *t = st_find(f, name);
    if (!t) {
        set_err(err, errlen, "%s: tensor '%s' is missing", f ? f->path : "(null)", name ? name : "");
        return NULL;
    }
    if (t->dtype != dtype) {
        set_err(err, errlen, "%s: tensor '%s' has dtype %s, expected %s", f->path, name,
                st_dtype_name(t->dtype), st_dtype_name(dtype));
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (int32_t i = 0; ok && i < ndim; i++) ok = shape[i] == -1 || shape[i] == t->shape[i];
    if (!ok) {
        char have[160], want[160];
        shape_str(have, sizeof have, t->ndim, t->shape);
        shape_str(want, sizeof want, ndim, shape);
        set_err(err, errlen, "%s: tensor '%s' has shape %s, expected %s", f->path, name, have, want);
        return NULL;
    }
    return t;
}
