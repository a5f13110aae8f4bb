/* bits.h - what the C compilers spell differently: bit scans, population
 * counts, byte swaps, forced inlining, thread-local storage and the x86 CPU
 * feature tests. Header only.
 *
 * Owns: compat_ctz64, compat_clz64, compat_popcount64, compat_popcount32,
 * compat_bswap64, KOMA_FORCE_INLINE, KOMA_THREAD_LOCAL, compat_cpu_has_*.
 * Does not own: anything that depends on the operating system (compat.h).
 *
 * Three implementations, chosen at compile time:
 *  - GCC and Clang (clang-cl too): the __builtin_* functions, exactly what
 *    the code called before this header existed;
 *  - MSVC (cl.exe, nvcc's host compiler on Windows): its intrinsics
 *    (_BitScanForward64, __popcnt64, _byteswap_uint64, __cpuid);
 *  - plain C, for any other compiler, or everywhere with -DKOMA_PORTABLE_BITS
 *    (ctest builds the engine that way, so the plain-C code is tested on
 *    Linux; see tests/engine/CMakeLists.txt).
 * compat_ctz64 and compat_clz64 want a nonzero argument, like the builtins.
 */
#ifndef KOMA_COMPAT_BITS_H
#define KOMA_COMPAT_BITS_H

#include <stdint.h>

#if defined(KOMA_PORTABLE_BITS)
#define KOMA_BITS_C 1
#elif defined(__GNUC__) || defined(__clang__)
#define KOMA_BITS_GNU 1
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_ARM64))
#define KOMA_BITS_MSVC 1
#include <intrin.h>
#include <stdlib.h> /* _byteswap_uint64 */
#else
#define KOMA_BITS_C 1
#endif

/* ---- forced inlining, thread-local storage ----------------------------- */
#if defined(__GNUC__) || defined(__clang__)
#define KOMA_FORCE_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define KOMA_FORCE_INLINE __forceinline
#else
#define KOMA_FORCE_INLINE inline
#endif

/* MSVC's C compiler takes __declspec(thread), not C11 _Thread_local. */
#if defined(_MSC_VER) && !defined(__clang__)
#define KOMA_THREAD_LOCAL __declspec(thread)
#else
#define KOMA_THREAD_LOCAL _Thread_local
#endif

/* ---- population count ---------------------------------------------------- */
static inline int compat_popcount64(uint64_t x) {
#if defined(KOMA_BITS_GNU)
    return __builtin_popcountll(x);
#elif defined(KOMA_BITS_MSVC) && defined(_M_X64) && defined(__AVX__)
    /* POPCNT is not in the x86-64 baseline: only where /arch:AVX (or
     * higher) already requires a CPU that has it. */
    return (int)__popcnt64(x);
#else
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (int)((x * 0x0101010101010101ull) >> 56);
#endif
}
static inline int compat_popcount32(uint32_t x) {
#if defined(KOMA_BITS_GNU)
    return __builtin_popcount(x);
#else
    return compat_popcount64(x);
#endif
}

/* ---- bit scans (x != 0) -------------------------------------------------- */
/* Index of the lowest set bit. */
static inline int compat_ctz64(uint64_t x) {
#if defined(KOMA_BITS_GNU)
    return __builtin_ctzll(x);
#elif defined(KOMA_BITS_MSVC)
    unsigned long i;
    _BitScanForward64(&i, x);
    return (int)i;
#else
    return compat_popcount64((x & (0 - x)) - 1); /* the bits below the lowest one */
#endif
}
/* Number of zero bits above the highest set bit. */
static inline int compat_clz64(uint64_t x) {
#if defined(KOMA_BITS_GNU)
    return __builtin_clzll(x);
#elif defined(KOMA_BITS_MSVC)
    unsigned long i;
    _BitScanReverse64(&i, x);
    return 63 - (int)i;
#else
    x |= x >> 1; /* every bit from the highest one down */
    x |= x >> 2;
    x |= x >> 4;
    x |= x >> 8;
    x |= x >> 16;
    x |= x >> 32;
    return 64 - compat_popcount64(x);
#endif
}

/* ---- byte order -------------------------------------------------------------- */
static inline uint64_t compat_bswap64(uint64_t x) {
#if defined(KOMA_BITS_GNU)
    return __builtin_bswap64(x);
#elif defined(KOMA_BITS_MSVC)
    return _byteswap_uint64(x);
#else
    x = ((x & 0x00FF00FF00FF00FFull) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFull);
    x = ((x & 0x0000FFFF0000FFFFull) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFull);
    return (x << 32) | (x >> 32);
#endif
}

/* ---- x86 CPU features ---------------------------------------------------- */
/* KOMA_CPU_X86 is defined where compat_cpu_has_* can answer; elsewhere they
 * return 0. Both also check that the OS saves the wide registers. */
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#define KOMA_CPU_X86 1
#endif

#if defined(KOMA_CPU_X86) && defined(_MSC_VER)
#include <intrin.h>
#if defined(__clang__)
__attribute__((target("xsave")))
#endif
static inline uint64_t compat_xgetbv0_(void) {
    return (uint64_t)_xgetbv(0);
}
/* cpuid leaves 1 and 7: r[0..3] = eax, ebx, ecx, edx; xcr0 the OS-enabled state. */
static inline void compat_cpuid_(int r1[4], int r7[4], uint64_t *xcr0) {
    int r0[4];
    __cpuid(r0, 0);
    __cpuid(r1, 1);
    r7[0] = r7[1] = r7[2] = r7[3] = 0;
    if (r0[0] >= 7) __cpuidex(r7, 7, 0);
    *xcr0 = (r1[2] & (1 << 27)) ? compat_xgetbv0_() : 0; /* OSXSAVE */
}
#endif

/* AVX2 and FMA, usable (OS saves the YMM registers). */
static inline int compat_cpu_has_avx2_fma(void) {
#if defined(KOMA_CPU_X86) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#elif defined(KOMA_CPU_X86) && defined(_MSC_VER)
    int r1[4], r7[4];
    uint64_t xcr0;
    compat_cpuid_(r1, r7, &xcr0);
    return (xcr0 & 0x6) == 0x6 && (r1[2] & (1 << 12)) && (r7[1] & (1 << 5));
#else
    return 0;
#endif
}
/* AVX-512 F, BW, DQ and VL (the Skylake-X set), usable. */
static inline int compat_cpu_has_avx512_skx(void) {
#if defined(KOMA_CPU_X86) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#elif defined(KOMA_CPU_X86) && defined(_MSC_VER)
    int r1[4], r7[4];
    uint64_t xcr0;
    compat_cpuid_(r1, r7, &xcr0);
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31); /* F, DQ, BW, VL */
    return (xcr0 & 0xE6) == 0xE6 && ((unsigned)r7[1] & need) == need;
#else
    return 0;
#endif
}

/* ---- 64-bit mixing (SplitMix64, Steele/Lea/Flood 2014) ----------------------
 * compat_mix64_fin: its output function (a bijection of 64-bit words);
 * compat_mix64(z): the SplitMix64 output of state z (fin(z + golden));
 * compat_splitmix64(&s): the next output of generator state s. One copy of
 * each, for seeds, hashes and Zobrist keys (their values are fixed: the
 * bench signature and the keys depend on them). */
static inline uint64_t compat_mix64_fin(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t compat_mix64(uint64_t z) { return compat_mix64_fin(z + 0x9E3779B97F4A7C15ull); }
static inline uint64_t compat_splitmix64(uint64_t *s) { return compat_mix64_fin(*s += 0x9E3779B97F4A7C15ull); }

#endif
