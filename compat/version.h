/* version.h - `--version` for every Koma program: one line, "NAME (Koma) X.Y.Z".
 * KOMA_VERSION_STRING is the CMake project's version (top-level CMakeLists.txt). */
#ifndef KOMA_COMPAT_VERSION_H
#define KOMA_COMPAT_VERSION_H

#include <stdio.h>
#include <string.h>

#ifndef KOMA_VERSION_STRING
#define KOMA_VERSION_STRING "0.0.0"
#endif

/* 1 (after printing the line) when --version is among the arguments. */
static inline int koma_version_asked(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (argv[i] && strcmp(argv[i], "--version") == 0) {
            printf("%s (Koma) %s\n", name, KOMA_VERSION_STRING);
            return 1;
        }
    return 0;
}

#endif
