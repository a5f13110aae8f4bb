/* exe.h - where the running program's executable lies, so that a program can
 * find the files installed beside it (share/koma/... next to bin/).
 *
 * Owns: asking the OS for the executable's path (Linux: /proc/self/exe;
 * macOS: _NSGetExecutablePath; Windows: GetModuleFileName).
 * Does not own: what is looked up from there (the callers). */
#ifndef KOMA_COMPAT_EXE_H
#define KOMA_COMPAT_EXE_H

#include <stddef.h>

/* The absolute path of the running executable, links resolved where the OS
 * says so. 0, or -1 when the OS does not tell or out is too small. */
int compat_exe_path(char *out, size_t len);
/* The directory of the running executable (compat_exe_path without its last
 * component). 0, or -1 as for compat_exe_path. */
int compat_exe_dir(char *out, size_t len);

#endif
