/* test_safetensors.c - nn/safetensors.c: round trips, every rejection rule on
 * crafted files, truncation at every byte and header corruption (never a
 * crash, always a message that starts with the path). */
#include "compat/compat.h"
#include "nn/safetensors.h"
#include "tests/koma_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void tmp_path(char *out, size_t len, const char *name) {
    snprintf(out, len, "%s/%s", t_dir, name);
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    KOMA_ASSERT(f);
    KOMA_ASSERT(len == 0 || fwrite(data, 1, len, f) == len);
    KOMA_ASSERT(fclose(f) == 0);
}

#define HLEN_JSON UINT64_MAX /* craft(): header length = strlen(json) */

/* A crafted file: header length hlen, the JSON, then datalen bytes of data. */
static void craft(const char *path, const char *json, uint64_t hlen, const void *data, size_t datalen) {
    size_t jl = strlen(json);
    uint64_t n = hlen == HLEN_JSON ? (uint64_t)jl : hlen;
    uint8_t *buf = malloc(8 + jl + datalen + 1);
    KOMA_ASSERT(buf);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, json, jl);
    if (datalen) memcpy(buf + 8 + jl, data, datalen);
    write_bytes(path, buf, 8 + jl + datalen);
    free(buf);
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Opens path (flags) expecting rejection with a message that starts with the
 * path and contains want. */
static void expect_reject(const char *path, uint32_t flags, const char *want, int line) {
    char err[512] = "";
    st_file_t *f = st_open(path, flags, err, sizeof err);
    int ok = !f && starts_with(err, path) && strstr(err, want) != NULL;
    if (!t_judge(ok))
        fprintf(stderr, "%s:%d: expected rejection of %s with '%s', got %s '%s'\n", __FILE__, line, path, want,
                f ? "success" : "error", err);
    st_close(f);
}
#define EXPECT_REJECT(path, flags, want) expect_reject(path, flags, want, __LINE__)

static void reject_json(const char *json, const void *data, size_t datalen, const char *want, int line) {
    char path[600];
    tmp_path(path, sizeof path, "crafted.safetensors");
    craft(path, json, HLEN_JSON, data, datalen);
    expect_reject(path, 0, want, line);
}
#define REJECT_JSON(json, data, len, want) reject_json(json, data, len, want, __LINE__)

/* ---- round trip --------------------------------------------------------- */
/* The round trip's metadata (the last value of a key, quotes and UTF-8,
 * checksums) and st_expect's answers and messages. */
static void rt_meta_and_expect(st_file_t *f, const char *path) {
    char err[512] = "";
    CHECK(st_meta(f, "koma.kind") && strcmp(st_meta(f, "koma.kind"), "weights") == 0);
    CHECK(st_meta(f, "koma.version") && strcmp(st_meta(f, "koma.version"), "0.1.0") == 0);
    CHECK(st_meta(f, "quote\"and\\back") && strcmp(st_meta(f, "quote\"and\\back"), "uni\xc3\xa9 \n") == 0);
    CHECK(st_meta(f, "absent") == NULL);
    const char *h = st_meta(f, "koma.xxh3.f32");
    CHECK(h && strlen(h) == 16 && strspn(h, "0123456789abcdef") == 16);
    CHECK(st_meta(f, "koma.xxh3.empty") != NULL); /* zero-size tensors are checksummed too */

    /* st_expect */
    CHECK(st_expect(f, "f32", ST_DTYPE_F32, 2, (int64_t[]){2, 3}, err, sizeof err) != NULL);
    CHECK(st_expect(f, "f32", ST_DTYPE_F32, 2, (int64_t[]){-1, 3}, err, sizeof err) != NULL);
    CHECK(st_expect(f, "scalar", ST_DTYPE_I64, 0, NULL, err, sizeof err) != NULL);
    CHECK(st_expect(f, "f32", ST_DTYPE_F16, 2, (int64_t[]){2, 3}, err, sizeof err) == NULL);
    CHECK(starts_with(err, path) && strstr(err, "tensor 'f32' has dtype F32, expected F16"));
    CHECK(st_expect(f, "f32", ST_DTYPE_F32, 2, (int64_t[]){3, -1}, err, sizeof err) == NULL);
    CHECK(starts_with(err, path) && strstr(err, "has shape [2, 3], expected [3, -1]"));
    CHECK(st_expect(f, "f32", ST_DTYPE_F32, 1, (int64_t[]){6}, err, sizeof err) == NULL);
    CHECK(st_expect(f, "missing", ST_DTYPE_F32, 1, (int64_t[]){6}, err, sizeof err) == NULL);
    CHECK(starts_with(err, path) && strstr(err, "tensor 'missing' is missing"));
}

/* An empty writer, an unwritable path, dtype names and sizes. */
static void rt_writer_edges(const char *path) {
    char err[512] = "";
    st_writer_t *w;
    st_file_t *f;
    /* An empty writer gives a valid, empty file. */
    w = st_writer_new();
    CHECK(st_writer_write(w, path, err, sizeof err) == 0);
    st_writer_free(w);
    f = st_open(path, ST_OPEN_VERIFY, err, sizeof err);
    CHECK(f && st_count(f) == 0 && st_find(f, "x") == NULL && st_meta(f, "x") == NULL);
    st_close(f);

    /* The writer reports an unwritable path, naming it. */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.safetensors", t_dir);
    w = st_writer_new();
    CHECK(st_writer_write(w, bad, err, sizeof err) == -1);
    CHECK(strstr(err, "no/such/dir/x.safetensors") != NULL);
    st_writer_free(w);

    CHECK(st_dtype_size(ST_DTYPE_BF16) == 2 && st_dtype_size(ST_DTYPE_BOOL) == 1 && st_dtype_size(ST_DTYPE_NB) == 0);
    CHECK(strcmp(st_dtype_name(ST_DTYPE_BF16), "BF16") == 0 && strcmp(st_dtype_name(ST_DTYPE_NB), "?") == 0);
}

static void test_round_trip(void) {
    char path[600], err[512] = "";
    tmp_path(path, sizeof path, "round.safetensors");

    float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
    uint16_t f16[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
    uint16_t bf16[4] = {0x3f80, 0xbf80, 0x4000, 0x0000};
    double f64[3] = {3.141592653589793, -1e300, 0.5};
    uint8_t u8[5] = {0, 1, 127, 128, 255}; /* odd size: misaligns what follows */
    int8_t i8[1] = {-128};
    uint16_t u16[3] = {0, 65535, 1234};
    int16_t i16[2] = {-32768, 32767};
    uint32_t u32[1] = {4000000000u};
    int32_t i32_empty[1] = {0};
    uint64_t u64[2] = {UINT64_MAX, 42};
    int64_t i64_scalar = -9000000000000000000ll;
    uint8_t bools[3] = {1, 0, 1};

    int64_t s_f32[2] = {2, 3}, s_4[1] = {4}, s_22[2] = {2, 2}, s_3[1] = {3}, s_5[1] = {5},
            s_1[1] = {1}, s_2[1] = {2}, s_111[3] = {1, 1, 1}, s_04[2] = {0, 4};

    st_writer_t *w = st_writer_new();
    CHECK(w);
    CHECK(st_writer_add(w, "f32", ST_DTYPE_F32, 2, s_f32, f32) == 0);
    CHECK(st_writer_add(w, "f16", ST_DTYPE_F16, 1, s_4, f16) == 0);
    CHECK(st_writer_add(w, "bf16", ST_DTYPE_BF16, 2, s_22, bf16) == 0);
    CHECK(st_writer_add(w, "u8", ST_DTYPE_U8, 1, s_5, u8) == 0);
    CHECK(st_writer_add(w, "f64", ST_DTYPE_F64, 1, s_3, f64) == 0); /* at an odd offset */
    CHECK(st_writer_add(w, "i8", ST_DTYPE_I8, 1, s_1, i8) == 0);
    CHECK(st_writer_add(w, "u16", ST_DTYPE_U16, 1, s_3, u16) == 0);
    CHECK(st_writer_add(w, "i16", ST_DTYPE_I16, 1, s_2, i16) == 0);
    CHECK(st_writer_add(w, "u32", ST_DTYPE_U32, 3, s_111, u32) == 0);
    CHECK(st_writer_add(w, "empty", ST_DTYPE_I32, 2, s_04, i32_empty) == 0);
    CHECK(st_writer_add(w, "empty_null", ST_DTYPE_F32, 1, (int64_t[]){0}, NULL) == 0);
    CHECK(st_writer_add(w, "u64", ST_DTYPE_U64, 1, s_2, u64) == 0);
    CHECK(st_writer_add(w, "scalar", ST_DTYPE_I64, 0, NULL, &i64_scalar) == 0);
    CHECK(st_writer_add(w, "bool", ST_DTYPE_BOOL, 1, s_3, bools) == 0);
    CHECK(st_writer_meta(w, "koma.kind", "weights") == 0);
    CHECK(st_writer_meta(w, "koma.version", "old") == 0);
    CHECK(st_writer_meta(w, "koma.version", "0.1.0") == 0); /* last value wins */
    CHECK(st_writer_meta(w, "quote\"and\\back", "uni\xc3\xa9 \n") == 0);

    /* Writer rejections. */
    CHECK(st_writer_add(w, "f32", ST_DTYPE_F32, 2, s_f32, f32) == -1);          /* duplicate */
    CHECK(st_writer_add(w, "", ST_DTYPE_F32, 2, s_f32, f32) == -1);             /* empty */
    CHECK(st_writer_add(w, "__metadata__", ST_DTYPE_F32, 2, s_f32, f32) == -1); /* reserved */
    char longname[ST_MAX_NAME + 1];
    memset(longname, 'x', ST_MAX_NAME);
    longname[ST_MAX_NAME] = 0;
    CHECK(st_writer_add(w, longname, ST_DTYPE_F32, 2, s_f32, f32) == -1);
    longname[ST_MAX_NAME - 1] = 0; /* 127 bytes: the longest allowed */
    CHECK(st_writer_add(w, longname, ST_DTYPE_U8, 1, s_1, u8) == 0);
    CHECK(st_writer_add(w, "neg", ST_DTYPE_F32, 1, (int64_t[]){-1}, f32) == -1);
    CHECK(st_writer_add(w, "ndim", ST_DTYPE_F32, ST_MAX_DIMS + 1, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}, f32) == -1);
    CHECK(st_writer_add(w, "nodata", ST_DTYPE_F32, 1, s_2, NULL) == -1);
    CHECK(st_writer_add(w, "baddtype", ST_DTYPE_NB, 1, s_2, f32) == -1);
    CHECK(st_writer_meta(w, "koma.xxh3.f32", "0000000000000000") == -1);

    CHECK(st_writer_write(w, path, err, sizeof err) == 0);
    st_writer_free(w);
    st_writer_free(NULL);

    /* Raw layout: 8-byte aligned header, contiguous data, nothing after. */
    size_t rawlen = 0;
    uint8_t *raw = (uint8_t *)compat_read_file(path, &rawlen, err, sizeof err);
    CHECK(raw && rawlen >= 8);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    size_t want_data = sizeof f32 + sizeof f16 + sizeof bf16 + sizeof u8 + sizeof f64 + sizeof i8 +
                       sizeof u16 + sizeof i16 + sizeof u32 + sizeof u64 + sizeof i64_scalar +
                       sizeof bools + 1;
    CHECK(hlen % 8 == 0);
    CHECK(rawlen == 8 + hlen + want_data);
    CHECK(raw[8] == '{');
    /* f32 comes first in the data: insertion order. */
    CHECK(memcmp(raw + 8 + hlen, f32, sizeof f32) == 0);
    free(raw);

    st_file_t *f = st_open(path, ST_OPEN_VERIFY, err, sizeof err);
    CHECK(f);
    if (!f) {
        fprintf(stderr, "open failed: %s\n", err);
        return;
    }
    CHECK(strcmp(st_path(f), path) == 0);
    CHECK(st_count(f) == 15);
    CHECK(strcmp(st_at(f, 0)->name, "f32") == 0);
    CHECK(strcmp(st_at(f, 14)->name, longname) == 0);
    CHECK(st_at(f, 15) == NULL && st_at(f, -1) == NULL);
    CHECK(st_verify(f, err, sizeof err) == 0);

    const st_tensor_t *t = st_find(f, "f32");
    CHECK(t && t->dtype == ST_DTYPE_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 &&
          t->nbytes == sizeof f32 && memcmp(t->data, f32, sizeof f32) == 0);
    t = st_find(f, "f16");
    CHECK(t && t->dtype == ST_DTYPE_F16 && t->ndim == 1 && memcmp(t->data, f16, sizeof f16) == 0);
    t = st_find(f, "bf16");
    CHECK(t && t->dtype == ST_DTYPE_BF16 && t->shape[1] == 2 && memcmp(t->data, bf16, sizeof bf16) == 0);
    t = st_find(f, "u8");
    CHECK(t && t->dtype == ST_DTYPE_U8 && t->nbytes == 5 && memcmp(t->data, u8, 5) == 0);
    t = st_find(f, "f64");
    CHECK(t && t->dtype == ST_DTYPE_F64 && memcmp(t->data, f64, sizeof f64) == 0);
    /* Served aligned even though it sits at an odd offset in the file. */
    CHECK(t && (uintptr_t)t->data % 8 == 0 && ((const double *)t->data)[0] == f64[0]);
    t = st_find(f, "i8");
    CHECK(t && t->dtype == ST_DTYPE_I8 && ((const int8_t *)t->data)[0] == -128);
    t = st_find(f, "u16");
    CHECK(t && t->dtype == ST_DTYPE_U16 && (uintptr_t)t->data % 2 == 0 && memcmp(t->data, u16, sizeof u16) == 0);
    t = st_find(f, "i16");
    CHECK(t && t->dtype == ST_DTYPE_I16 && memcmp(t->data, i16, sizeof i16) == 0);
    t = st_find(f, "u32");
    CHECK(t && t->dtype == ST_DTYPE_U32 && t->ndim == 3 && ((const uint32_t *)t->data)[0] == u32[0]);
    t = st_find(f, "empty");
    CHECK(t && t->dtype == ST_DTYPE_I32 && t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 4 && t->nbytes == 0);
    t = st_find(f, "empty_null");
    CHECK(t && t->nbytes == 0 && t->ndim == 1);
    t = st_find(f, "u64");
    CHECK(t && t->dtype == ST_DTYPE_U64 && ((const uint64_t *)t->data)[0] == UINT64_MAX);
    t = st_find(f, "scalar");
    CHECK(t && t->dtype == ST_DTYPE_I64 && t->ndim == 0 && t->nbytes == 8 &&
          ((const int64_t *)t->data)[0] == i64_scalar);
    t = st_find(f, "bool");
    CHECK(t && t->dtype == ST_DTYPE_BOOL && memcmp(t->data, bools, 3) == 0);
    CHECK(st_find(f, "nope") == NULL);
    CHECK(st_find(f, longname) != NULL);

    rt_meta_and_expect(f, path);
    st_close(f);
    st_close(NULL);

    rt_writer_edges(path);
}

/* ---- crafted rejections -------------------------------------------------- */
static void test_rejections(void) {
    char path[600];
    tmp_path(path, sizeof path, "crafted.safetensors");
    uint8_t zeros[64] = {0};

    /* Framing. */
    write_bytes(path, zeros, 0);
    EXPECT_REJECT(path, 0, "file is 0 bytes, shorter than the 8-byte header length");
    write_bytes(path, "\x02\0\0\0\0", 5);
    EXPECT_REJECT(path, 0, "file is 5 bytes, shorter than the 8-byte header length");
    craft(path, "{}", 1000, NULL, 0);
    EXPECT_REJECT(path, 0, "header length 1000 exceeds");
    craft(path, "{}", 1ll << 40, NULL, 0);
    EXPECT_REJECT(path, 0, "is absurd");
    craft(path, "{}", UINT64_MAX - 1, NULL, 0);
    EXPECT_REJECT(path, 0, "is absurd");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/does-not-exist.safetensors", t_dir);
    EXPECT_REJECT(missing, 0, "cannot open");

    /* JSON. */
    REJECT_JSON("{not json", NULL, 0, "header is not valid JSON");
    REJECT_JSON("", NULL, 0, "header is not valid JSON");
    REJECT_JSON("[1, 2]", NULL, 0, "header is JSON but not an object");
    REJECT_JSON("\"str\"", NULL, 0, "not an object");
    REJECT_JSON("{} x", NULL, 0, "other than whitespace padding");
    write_bytes(path, "\x06\0\0\0\0\0\0\0{}\0   ", 14); /* a NUL inside the header */
    EXPECT_REJECT(path, 0, "other than whitespace padding");

    /* Tensor entries. */
    REJECT_JSON("{\"a\":5}", NULL, 0, "tensor 'a': entry is not a JSON object");
    REJECT_JSON("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4, "tensor 'a': missing dtype");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", zeros, 4, "tensor 'a': missing shape");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", zeros, 4, "tensor 'a': missing data_offsets");
    REJECT_JSON("{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4, "dtype is not a string");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", zeros, 4, "shape is not an array");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", zeros, 4, "shape[0] is not an integer");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", zeros, 4, "shape[0] is not an integer");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{}}}", zeros, 4, "data_offsets is not an array of 2");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", zeros, 4, "data_offsets is not an array of 2");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", zeros, 4, "data_offsets is not an array of 2");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", zeros, 4, "non-negative integers");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", zeros, 4, "non-negative integers");
    REJECT_JSON("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", zeros, 1, "tensor 'a': unknown dtype 'F8_E4M3'");
    REJECT_JSON("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4, "unknown dtype 'f32'");

    /* Shapes. */
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", zeros, 4, "tensor 'a': shape[1] is negative");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e20],\"data_offsets\":[0,4]}}", zeros, 4, "shape[0] is not an integer in [0, 2^53]");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e999],\"data_offsets\":[0,4]}}", zeros, 4, "shape[0] is not an integer");
    REJECT_JSON("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", zeros, 1, "9 dims, more than the limit of 8");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", zeros, 4, "shape product overflows");
    REJECT_JSON("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,536870912],\"data_offsets\":[0,4]}}", zeros, 4, "shape product overflows");

    /* Offsets. */
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", zeros, 8, "end 4 is before begin 8");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[100],\"data_offsets\":[0,400]}}", zeros, 4, "end 400 is beyond the data size 4");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", zeros, 4, "span 4 bytes but shape x F32 needs 8");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}}", zeros, 0, "span 0 bytes but shape x F32 needs 4");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                zeros, 12, "tensors 'a' and 'b' overlap");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                zeros, 8, "overlap");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
                zeros, 16, "overlap");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                zeros, 12, "data bytes [4, 8) belong to no tensor");
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 8, "4 bytes after the last tensor");
    REJECT_JSON("{}", zeros, 3, "3 bytes after the last tensor");

    /* Names. */
    REJECT_JSON("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                zeros, 8, "duplicate tensor name 'a'");
    REJECT_JSON("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4, "empty name");
    {
        char json[1024], name[300];
        memset(name, 'n', 200);
        name[200] = 0;
        snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
        REJECT_JSON(json, zeros, 4, "is 200 bytes, longer than the limit of 127");
    }

    /* Metadata. */
    REJECT_JSON("{\"__metadata__\":{\"k\":1}}", NULL, 0, "__metadata__ value for key 'k' is not a string");
    REJECT_JSON("{\"__metadata__\":{\"k\":\"v\",\"j\":null}}", NULL, 0, "key 'j' is not a string");
    REJECT_JSON("{\"__metadata__\":[\"k\"]}", NULL, 0, "__metadata__ is not a JSON object");
    REJECT_JSON("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", NULL, 0, "duplicate __metadata__ key 'k'");
    REJECT_JSON("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0, "duplicate __metadata__");

    /* A valid crafted file with foreign alignment and no metadata opens. */
    {
        char err[512];
        uint8_t data[13] = {9, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}; /* U8 then F32[3] at offset 1 */
        craft(path,
              "{\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[1,13]},"
              "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}  ",
              HLEN_JSON, data, sizeof data);
        st_file_t *f = st_open(path, 0, err, sizeof err);
        CHECK(f && st_count(f) == 2);
        const st_tensor_t *b = f ? st_find(f, "b") : NULL;
        CHECK(b && (uintptr_t)b->data % 4 == 0 && ((const float *)b->data)[0] == 1.0f &&
              ((const float *)b->data)[1] == 2.0f && ((const float *)b->data)[2] == 3.0f);
        /* No checksums: st_verify and ST_OPEN_VERIFY both refuse. */
        CHECK(f && st_verify(f, err, sizeof err) == -1);
        CHECK(starts_with(err, path) && strstr(err, "tensor 'b' has no checksum (koma.xxh3.b missing"));
        st_close(f);
        EXPECT_REJECT(path, ST_OPEN_VERIFY, "has no checksum");

        craft(path,
              "{\"__metadata__\":{\"koma.xxh3.a\":\"XYZ\"},"
              "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
              HLEN_JSON, data, 1);
        EXPECT_REJECT(path, ST_OPEN_VERIFY, "tensor 'a': checksum 'XYZ' is not 16 lowercase hex digits");
    }
}

/* A valid file with a few tensors, for corruption tests. Returns its bytes. */
static uint8_t *make_valid(const char *path, size_t *len) {
    char err[512];
    static float a[12];
    static int32_t b[5] = {1, -2, 3, -4, 5};
    static uint8_t c[7] = {1, 2, 3, 4, 5, 6, 7};
    static int64_t s = 77;
    for (int i = 0; i < 12; i++) a[i] = (float)i * 0.5f;
    st_writer_t *w = st_writer_new();
    KOMA_ASSERT(st_writer_add(w, "a", ST_DTYPE_F32, 2, (int64_t[]){3, 4}, a) == 0);
    KOMA_ASSERT(st_writer_add(w, "b", ST_DTYPE_I32, 1, (int64_t[]){5}, b) == 0);
    KOMA_ASSERT(st_writer_add(w, "c", ST_DTYPE_U8, 1, (int64_t[]){7}, c) == 0);
    KOMA_ASSERT(st_writer_add(w, "s", ST_DTYPE_I64, 0, NULL, &s) == 0);
    KOMA_ASSERT(st_writer_add(w, "z", ST_DTYPE_F32, 2, (int64_t[]){0, 3}, NULL) == 0);
    KOMA_ASSERT(st_writer_meta(w, "koma.kind", "shard") == 0);
    KOMA_ASSERT(st_writer_write(w, path, err, sizeof err) == 0);
    st_writer_free(w);
    uint8_t *raw = (uint8_t *)compat_read_file(path, len, err, sizeof err);
    KOMA_ASSERT(raw);
    return raw;
}

static void test_checksum_mismatch(void) {
    char path[600], err[512];
    tmp_path(path, sizeof path, "flip.safetensors");
    size_t len;
    uint8_t *raw = make_valid(path, &len);
    raw[len - 20] ^= 0x40; /* inside the data section */
    write_bytes(path, raw, len);
    st_file_t *f = st_open(path, 0, err, sizeof err); /* structure is intact */
    CHECK(f != NULL);
    CHECK(f && st_verify(f, err, sizeof err) == -1);
    CHECK(starts_with(err, path) && strstr(err, "checksum mismatch") && strstr(err, "corrupted"));
    st_close(f);
    EXPECT_REJECT(path, ST_OPEN_VERIFY, "checksum mismatch");
    free(raw);
}

static void test_truncation(void) {
    char path[600], cut[600], err[512];
    tmp_path(path, sizeof path, "valid.safetensors");
    tmp_path(cut, sizeof cut, "cut.safetensors");
    size_t len;
    uint8_t *raw = make_valid(path, &len);
    st_file_t *f = st_open(path, ST_OPEN_VERIFY, err, sizeof err);
    CHECK(f && st_count(f) == 5);
    st_close(f);
    int rejected = 0;
    for (size_t n = 0; n < len; n++) {
        write_bytes(cut, raw, n);
        err[0] = 0;
        f = st_open(cut, 0, err, sizeof err);
        if (!f && starts_with(err, cut)) rejected++;
        else fprintf(stderr, "truncation at %zu of %zu: %s '%s'\n", n, len, f ? "accepted" : "bad message", err);
        st_close(f);
    }
    CHECK(rejected == (int)len);
    /* A byte appended is rejected too. */
    uint8_t *more = malloc(len + 1);
    memcpy(more, raw, len);
    more[len] = 0;
    write_bytes(cut, more, len + 1);
    EXPECT_REJECT(cut, 0, "1 bytes after the last tensor");
    free(more);
    free(raw);
}

/* Overwrites every header byte with a few values: must never crash; whatever
 * opens must still verify or fail with a message naming the file. */
static void test_header_corruption(void) {
    char path[600], bad[600], err[512];
    tmp_path(path, sizeof path, "valid.safetensors");
    tmp_path(bad, sizeof bad, "bad.safetensors");
    size_t len;
    uint8_t *raw = make_valid(path, &len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    const uint8_t vals[] = {'0', '9', '-', '}', '"', ',', ' ', 0x00, 0xff, 'e', '['};
    int opened = 0, rejected = 0, badmsg = 0;
    for (size_t pos = 0; pos < 8 + hlen; pos++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            if (raw[pos] == vals[v]) continue;
            uint8_t keep = raw[pos];
            raw[pos] = vals[v];
            write_bytes(bad, raw, len);
            raw[pos] = keep;
            err[0] = 0;
            st_file_t *f = st_open(bad, 0, err, sizeof err);
            if (f) {
                opened++;
                /* Touch every byte the reader hands out. */
                uint64_t sum = 0;
                for (int32_t i = 0; i < st_count(f); i++) {
                    const st_tensor_t *t = st_at(f, i);
                    for (uint64_t k = 0; k < t->nbytes; k++) sum += ((const uint8_t *)t->data)[k];
                }
                (void)sum;
                if (st_verify(f, err, sizeof err) != 0 && !starts_with(err, bad)) badmsg++;
                st_close(f);
            } else {
                rejected++;
                if (!starts_with(err, bad)) {
                    badmsg++;
                    fprintf(stderr, "corruption at %zu: message '%s'\n", pos, err);
                }
            }
        }
    }
    CHECK(badmsg == 0);
    CHECK(rejected > 0);
    printf("header corruption: %d opened (harmless edits), %d rejected\n", opened, rejected);
    free(raw);
}

int main(void) {
    t_scratch("safetensors");
    test_round_trip();
    test_rejections();
    test_checksum_mismatch();
    test_truncation();
    test_header_corruption();

    t_rm_rf(t_dir);
    return t_done("test_safetensors");
}
