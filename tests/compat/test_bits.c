/* test_bits.c - compat/bits.h: bit scans, population counts and byte swaps
 * against bit-by-bit reference loops, on edge values and random words.
 * Built twice: as the compiler gets it (test_bits) and with the plain-C
 * helpers forced (test_bits_portable, -DKOMA_PORTABLE_BITS). */
#include "compat/bits.h"

#include <inttypes.h>
#include <stdio.h>

static int failures;
#define CHECK_EQ(got, want, x)                                                                          \
    do {                                                                                                \
        if ((uint64_t)(got) != (uint64_t)(want)) {                                                      \
            if (failures++ < 20)                                                                        \
                fprintf(stderr, "%s:%d: %s of 0x%016" PRIx64 ": got %" PRIu64 ", want %" PRIu64 "\n", __FILE__, \
                        __LINE__, #got, (uint64_t)(x), (uint64_t)(got), (uint64_t)(want));              \
        }                                                                                               \
    } while (0)

static int ref_popcount(uint64_t x) {
    int n = 0;
    for (int i = 0; i < 64; i++) n += (int)((x >> i) & 1);
    return n;
}
static int ref_ctz(uint64_t x) {
    int n = 0;
    while (!((x >> n) & 1)) n++;
    return n;
}
static int ref_clz(uint64_t x) {
    int n = 0;
    while (!((x >> (63 - n)) & 1)) n++;
    return n;
}
static uint64_t ref_bswap(uint64_t x) {
    uint64_t r = 0;
    for (int i = 0; i < 8; i++) r |= ((x >> (8 * i)) & 0xFF) << (8 * (7 - i));
    return r;
}

static void check(uint64_t x) {
    CHECK_EQ(compat_popcount64(x), ref_popcount(x), x);
    CHECK_EQ(compat_popcount32((uint32_t)x), ref_popcount((uint32_t)x), x);
    CHECK_EQ(compat_bswap64(x), ref_bswap(x), x);
    if (x) {
        CHECK_EQ(compat_ctz64(x), ref_ctz(x), x);
        CHECK_EQ(compat_clz64(x), ref_clz(x), x);
    }
}

/* The macros compile and do what they say. */
static KOMA_FORCE_INLINE int twice(int v) { return 2 * v; }
static KOMA_THREAD_LOCAL int tls_counter;

int main(void) {
    int checks = 0;
    check(0);
    check(~0ull);
    checks += 2;
    for (int i = 0; i < 64; i++) {
        uint64_t b = 1ull << i;
        check(b);
        check(~b);
        check(b - 1);
        check(~(b - 1));
        check(b | 1);
        check(b | (1ull << 63));
        checks += 6;
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint64_t sparse = s & (s >> 11) & (s >> 23); /* few bits set */
        check(s);
        check(sparse);
        check(s >> (i & 63));
        checks += 3;
    }
    tls_counter = twice(21);
    CHECK_EQ(tls_counter, 42, 0);
    /* Answers 0 or 1 on every machine; where there is no x86, 0. */
    int avx2 = compat_cpu_has_avx2_fma(), avx512 = compat_cpu_has_avx512_skx();
    CHECK_EQ(avx2 == 0 || avx2 == 1, 1, 0);
    CHECK_EQ(avx512 == 0 || avx512 == 1, 1, 0);
    if (failures) {
        fprintf(stderr, "test_bits: %d failures\n", failures);
        return 1;
    }
#if defined(KOMA_BITS_C)
    const char *impl = "plain C";
#elif defined(KOMA_BITS_MSVC)
    const char *impl = "MSVC intrinsics";
#else
    const char *impl = "GCC/Clang builtins";
#endif
    printf("test_bits: ok (%s, %d words; avx2+fma %d, avx512 %d)\n", impl, checks, avx2, avx512);
    return 0;
}
