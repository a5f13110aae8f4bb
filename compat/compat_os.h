/* compat_os.h - what the platform file (compat_posix.c or compat_win32.c)
 * gives compat.c's shared code, beyond compat.h and exe.h. Internal to compat/.
 *
 * Owns: the few OS steps inside functions whose logic is the same everywhere
 * (durable writes, mkdir -p, removing a tree, sorted listings, the temporary
 * directory, reading a child's lines), and the line buffer every platform's
 * struct compat_proc starts with.
 * Does not own: the functions of compat.h themselves. Includes no OS header.
 */
#ifndef KOMA_COMPAT_OS_H
#define KOMA_COMPAT_OS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "compat/compat.h"

/* ---- durable writes ---------------------------------------------------- */
/* Flushes f and forces its bytes to the disk: 0, or -1 with errno. */
int compat_os_sync_file(FILE *f);
/* Forces the directory entry of path (a rename into it) to the disk, where
 * the OS can (POSIX); nothing on Windows. */
void compat_os_sync_parent_dir(const char *path);

/* ---- directories and files --------------------------------------------- */
/* Creates one directory: 0, or -1 with errno. */
int compat_os_mkdir(const char *p);
/* A directory that is no link (lstat; Windows: no reparse point). */
int compat_os_is_real_dir(const char *p);
/* Anything at p, a dangling link included. */
int compat_os_exists_nofollow(const char *p);
/* Removes p, which is not a real directory (a file, a link, a junction):
 * 0, or -1 with err. */
int compat_os_remove_nondir(const char *path, char *err, size_t errlen);

/* A directory listing (compat_list_dir): its entries, unsorted. */
typedef struct {
    char *name;
    int is_dir;
} compat_os_dirent_t;
typedef struct {
    compat_os_dirent_t *v;
    size_t n, cap;
    int oom; /* memory ran out while listing */
} compat_os_listing_t;
/* compat.c: appends a copy of name; -1 when out of memory. */
int compat_os_listing_push(compat_os_listing_t *l, const char *name, int is_dir);
/* The entries of dir but "." and ".." into l, in the OS's order (l->oom set
 * when memory ran out): 0, or -1 with err when dir cannot be listed (then l
 * is empty). */
int compat_os_list_dir(const char *dir, compat_os_listing_t *l, char *err, size_t errlen);

/* compat_load_average without KOMA_TEST_LOADAVG: getloadavg's last minute;
 * Windows: -1 (it does not tell). */
double compat_os_load_average(void);

/* compat_temp_dir where TMPDIR, TEMP and TMP are unset: "/tmp"; Windows:
 * GetTempPath, else ".". */
const char *compat_os_temp_fallback(void);

/* ---- child processes on pipes ------------------------------------------ */
enum { PROC_RBUF = 1 << 16 };

/* The first member of every platform's struct compat_proc: what
 * compat_proc_read_line (compat.c) reads lines from. */
typedef struct {
    char rbuf[PROC_RBUF]; /* bytes read from the child, not yet returned as lines */
    size_t rlen;
    int eof;        /* the child's stdout is closed */
    int skip_to_nl; /* the rest of an over-long line is being dropped */
} compat_os_lines_t;

/* Reads what is available (waiting at most timeout_ms, < 0 forever) into
 * p's lines. Returns 1 when bytes came or EOF was seen, 0 on timeout. */
int compat_os_proc_fill(compat_proc_t *p, int64_t timeout_ms);

#endif
