/* version.h - `--version` for every Koma program. The first line is
 * "NAME (Koma) X.Y.Z" (scripts and tests read it); then the git commit and
 * the parts built in:
 *
 *   selfplay (Koma) 0.1.0
 *   commit 6d9627c+dirty
 *   CUDA: 12.4.131 (cuDNN 9.1.0); oneDNN: 3.0.0; BLAS: OpenBLAS 0.3.21
 *   MPI: Open MPI 4.1.4; NCCL: 2.21.5
 *
 * (two lines, so that each fits 80 columns; KOMA_BUILD_PARTS is the same
 * text on one line)
 * KOMA_VERSION_STRING is the CMake project's version and KOMA_BUILD_* the
 * parts found when the build was configured (top-level CMakeLists.txt: the
 * versions of the headers compiled against); KOMA_GIT_COMMIT comes from a
 * header the build regenerates when the commit changes
 * (cmake/koma_commit.cmake): git's short hash, "+dirty" when tracked files
 * had changes at build time, "unknown" outside a git checkout. Built
 * without CMake, each part reads "unknown".
 * Owns: the --version text and the name a program gives itself
 * (koma_program_name: koma-report where installed, report in the build).
 * Does not own: what the build found (CMakeLists.txt) or the commit
 * (cmake/koma_commit.cmake); each program's --help. */
#ifndef KOMA_COMPAT_VERSION_H
#define KOMA_COMPAT_VERSION_H

#include <stdio.h>
#include <string.h>

#ifdef KOMA_HAVE_COMMIT_H
#include "koma_commit.h"
#endif

#ifndef KOMA_VERSION_STRING
#define KOMA_VERSION_STRING "0.0.0"
#endif
#ifndef KOMA_GIT_COMMIT
#define KOMA_GIT_COMMIT "unknown"
#endif
#ifndef KOMA_BUILD_CUDA
#define KOMA_BUILD_CUDA "unknown"
#endif
#ifndef KOMA_BUILD_DNNL
#define KOMA_BUILD_DNNL "unknown"
#endif
#ifndef KOMA_BUILD_BLAS
#define KOMA_BUILD_BLAS "unknown"
#endif
#ifndef KOMA_BUILD_MPI
#define KOMA_BUILD_MPI "unknown"
#endif
#ifndef KOMA_BUILD_NCCL
#define KOMA_BUILD_NCCL "unknown"
#endif

/* The parts built in, one line without a newline (also written into
 * generated files: genconfig's INI header). */
#define KOMA_BUILD_PARTS                                                                                 \
    "CUDA: " KOMA_BUILD_CUDA "; oneDNN: " KOMA_BUILD_DNNL "; BLAS: " KOMA_BUILD_BLAS "; MPI: " KOMA_BUILD_MPI \
    "; NCCL: " KOMA_BUILD_NCCL

/* The name a program was run as: argv0 without its directory and a ".exe"
 * ("koma-genconfig" where installed, "genconfig" in the build), for usage,
 * --version and messages; fallback when argv0 is NULL, empty or too long.
 * The text lives in a static buffer (one per program). */
static inline const char *koma_program_name(const char *argv0, const char *fallback) {
    static char buf[64];
    if (!argv0 || !*argv0) return fallback;
    const char *b = argv0;
    for (const char *p = argv0; *p; p++)
        if (*p == '/' || *p == '\\') b = p + 1;
    size_t n = strlen(b);
    if (n > 4 && (strcmp(b + n - 4, ".exe") == 0 || strcmp(b + n - 4, ".EXE") == 0)) n -= 4;
    if (n == 0 || n >= sizeof buf) return fallback;
    memcpy(buf, b, n);
    buf[n] = 0;
    return buf;
}

/* The four lines of --version, to out: the parts on two lines of at most 80
 * columns (a GPU and an MPI line), not KOMA_BUILD_PARTS's one. */
static inline void koma_version_print(FILE *out, const char *name) {
    fprintf(out, "%s (Koma) %s\ncommit %s\nCUDA: %s; oneDNN: %s; BLAS: %s\nMPI: %s; NCCL: %s\n", name,
            KOMA_VERSION_STRING, KOMA_GIT_COMMIT, KOMA_BUILD_CUDA, KOMA_BUILD_DNNL, KOMA_BUILD_BLAS, KOMA_BUILD_MPI,
            KOMA_BUILD_NCCL);
}

/* 1 (after printing the lines to stdout) when --version is among the arguments. */
static inline int koma_version_asked(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (argv[i] && strcmp(argv[i], "--version") == 0) {
            koma_version_print(stdout, name);
            return 1;
        }
    return 0;
}

#endif
