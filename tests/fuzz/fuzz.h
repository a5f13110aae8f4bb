/* fuzz.h - what the fuzz targets share: the libFuzzer entry point, a check
 * that aborts with file:line (a finding, for libFuzzer and for the replay),
 * and a scratch file for readers that take a path.
 *
 * Each fuzz_<name>.c defines LLVMFuzzerTestOneInput. It is linked either
 * with libFuzzer (KOMA_FUZZ=ON, clang) or with replay_main.c, which runs every
 * file of a corpus directory through it (ctest: fuzz_<name>_replay).
 */
#ifndef KOMA_FUZZ_H
#define KOMA_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                     \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            fflush(stderr);                                                       \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* Writes data to this process's scratch file (in /dev/shm when there is one,
 * else compat_temp_dir()) and returns its path; the file is removed at exit.
 * tag names the target. Aborts when the file cannot be written. */
const char *fuzz_scratch_file(const char *tag, const uint8_t *data, size_t size);

#endif
