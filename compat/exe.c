/* exe.c - the running executable's path (see exe.h). */
#include "compat/exe.h"

#include <string.h>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#include <stdint.h>
#include <stdlib.h>
#else
#include <unistd.h>
#endif

int compat_exe_path(char *out, size_t len) {
    if (!out || len < 2) return -1;
#ifdef _WIN32
    DWORD n = GetModuleFileNameA(NULL, out, (DWORD)len);
    if (n == 0 || n >= len) return -1;
    for (DWORD i = 0; i < n; i++)
        if (out[i] == '\\') out[i] = '/';
    return 0;
#elif defined(__APPLE__)
    uint32_t n = (uint32_t)len;
    if (_NSGetExecutablePath(out, &n) != 0) return -1;
    char *real = realpath(out, NULL);
    if (real) {
        size_t k = strlen(real);
        if (k < len) memcpy(out, real, k + 1);
        free(real);
    }
    return 0;
#else
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n <= 0 || (size_t)n >= len - 1) return -1;
    out[n] = 0;
    return 0;
#endif
}

int compat_exe_dir(char *out, size_t len) {
    if (compat_exe_path(out, len) != 0) return -1;
    char *slash = strrchr(out, '/');
    if (!slash) return -1;
    if (slash == out) slash[1] = 0; /* "/koma": the root */
    else *slash = 0;
    return 0;
}
