/* compat.h - the only place that knows which operating system it runs on.
 *
 * Owns: threads, mutexes, condition variables, a monotonic clock, the CPU
 * count, aligned memory, read-only file mapping, durable writes (temporary
 * name, fsync, rename), directories (creation, listing), the temporary
 * directory and process-level signals. Everything else in Koma calls these
 * and never includes an OS header or tests _WIN32.
 * Does not own: atomics (C11 <stdatomic.h> is used directly), file formats.
 *
 * Paths: '/' works as a separator everywhere (Windows accepts it); names are
 * passed to the C library / the ANSI Windows API as they are (no UTF-16).
 * Windows differences callers should know: a file that is open or mapped
 * cannot be removed or renamed over (compat_durable_commit then fails with a
 * message instead of replacing it); directories are not fsync'ed.
 */
#ifndef KOMA_COMPAT_H
#define KOMA_COMPAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- threads ------------------------------------------------------------ */
/* POSIX: pthreads. Windows (MinGW-w64, MSVC, clang-cl): the native API -
 * _beginthreadex, SRWLOCK, CONDITION_VARIABLE - so no pthreads library is
 * needed. The Windows objects are kept here as opaque pointer-sized words
 * (that is what SRWLOCK and CONDITION_VARIABLE are; compat_win32.c checks it), so
 * this header does not pull <windows.h> into every file. Mutexes are not
 * recursive on either side. */
#ifdef _WIN32
typedef void *compat_thread_t; /* the thread's HANDLE */
typedef struct {
    void *opaque_; /* SRWLOCK */
} compat_mutex_t;
typedef struct {
    void *opaque_; /* CONDITION_VARIABLE */
} compat_cond_t;
#else
#include <pthread.h>

typedef pthread_t compat_thread_t;
typedef pthread_mutex_t compat_mutex_t;
typedef pthread_cond_t compat_cond_t;
#endif

typedef void *(*compat_thread_fn)(void *arg);

/* Returns 0 on success. */
int compat_thread_create(compat_thread_t *t, compat_thread_fn fn, void *arg);
int compat_thread_join(compat_thread_t t);

void compat_mutex_init(compat_mutex_t *m);
void compat_mutex_destroy(compat_mutex_t *m);
void compat_mutex_lock(compat_mutex_t *m);
void compat_mutex_unlock(compat_mutex_t *m);

void compat_cond_init(compat_cond_t *c);
void compat_cond_destroy(compat_cond_t *c);
void compat_cond_wait(compat_cond_t *c, compat_mutex_t *m);
/* Waits at most timeout_ms; returns 0 when signalled, 1 on timeout. */
int compat_cond_timedwait(compat_cond_t *c, compat_mutex_t *m, int64_t timeout_ms);
void compat_cond_signal(compat_cond_t *c);
void compat_cond_broadcast(compat_cond_t *c);

/* ---- time, CPUs ---------------------------------------------------------- */
/* Monotonic clock in nanoseconds since an arbitrary origin. */
int64_t compat_now_ns(void);
static inline int64_t compat_now_ms(void) { return compat_now_ns() / 1000000; }
void compat_sleep_ms(int64_t ms);
/* CPU time (user + system) this process has used so far, all its threads, in
 * nanoseconds; child processes are not counted. */
int64_t compat_cpu_time_ns(void);
/* CPU time (user + system) the calling thread has used so far, in
 * nanoseconds; 0 where the system cannot tell. */
int64_t compat_thread_cpu_time_ns(void);
/* Number of online logical CPUs, at least 1. */
int compat_cpu_count(void);
/* Bytes of physical memory of the machine (sysconf's _SC_PHYS_PAGES x
 * _SC_PAGESIZE, /proc/meminfo's MemTotal where sysconf cannot tell;
 * Windows: GlobalMemoryStatusEx), or 0 when unknown. Not a container's or
 * a ulimit's limit: see compat_address_space_limit. */
int64_t compat_memory_total(void);
/* The system's load average over the last minute (runnable processes, as
 * `uptime` shows), or -1 where the OS does not tell (Windows).
 * KOMA_TEST_LOADAVG, when set, stands in for it (the tests of what a busy
 * machine changes). */
double compat_load_average(void);
/* The process's address-space limit in bytes (RLIMIT_AS, `ulimit -v`), or
 * -1 when there is none (always -1 on Windows). */
int64_t compat_address_space_limit(void);
/* Bytes of address space the process maps now (/proc/self/statm), or -1
 * where that cannot be read (not Linux). */
int64_t compat_address_space_used(void);
/* " under the address-space limit of N MiB (ulimit -v K)" where a limit is
 * set, else "": for out-of-memory messages. Returns buf. */
char *compat_address_space_note(char *buf, size_t n);

/* ---- memory --------------------------------------------------------------- */
/* size bytes aligned to align (a power of two, at most 4096; size may be 0
 * and need not be a multiple of align), or NULL. Free with
 * compat_aligned_free, never free() (Windows keeps such blocks apart).
 * Replaces C11 aligned_alloc, which neither MinGW-w64 nor MSVC has. */
void *compat_aligned_alloc(size_t align, size_t size);
void compat_aligned_free(void *p); /* NULL ok */

/* ---- files --------------------------------------------------------------- */
/* A read-only mapping of a whole file. data is NULL for an empty file. */
typedef struct {
    const uint8_t *data;
    uint64_t size;
    void *handle_; /* private */
} compat_map_t;

/* Returns 0 on success; on failure -1 and a message naming the file in err. */
int compat_map_file(const char *path, compat_map_t *map, char *err, size_t errlen);
void compat_unmap_file(compat_map_t *map);

/* Durable write: data goes to "<path>.tmp.<pid>", is flushed and fsync'ed,
 * renamed over path, and the directory is fsync'ed. Either the old file or
 * the complete new one is there after a crash, never a torn one.
 * Streaming form: open, write any number of times, then commit or abort. */
typedef struct compat_durable compat_durable_t;
compat_durable_t *compat_durable_open(const char *path, char *err, size_t errlen);
int compat_durable_write(compat_durable_t *f, const void *data, size_t len, char *err, size_t errlen);
int compat_durable_commit(compat_durable_t *f, char *err, size_t errlen); /* frees f */
void compat_durable_abort(compat_durable_t *f);                           /* frees f, NULL ok */
int compat_write_file_durable(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* Removes what killed durable writes of path left: every "<path>.tmp.<pid>"
 * whose pid is not this process's and runs no more (compat_pid_alive), so a
 * write under way in another process keeps its file. Returns how many were
 * removed; with note, the first one's name goes there. Call it before writing
 * path again (a process that was killed cannot remove its own). The pid test
 * is of this machine: for a file on a disk shared with other machines that
 * may write the same path at the same time, do not call it. */
int compat_durable_remove_stale(const char *path, char *note, size_t notelen);

/* mkdir -p. Returns 0 when the directory exists afterwards. */
int compat_mkdir_p(const char *path, char *err, size_t errlen);
int compat_file_exists(const char *path);
/* Size of a file in bytes, or -1. */
int64_t compat_file_size(const char *path);
/* Modification time of a file in nanoseconds since 1970 (Windows: its 100 ns
 * resolution), or -1. */
int64_t compat_file_mtime_ns(const char *path);
int compat_remove_file(const char *path);
/* Removes an empty directory. Returns 0 on success. */
int compat_remove_dir(const char *path);
/* rm -rf: removes path, a file or a directory with everything under it.
 * Symbolic links (junctions on Windows) are removed, never followed. A path
 * that does not exist is success. Returns 0, or -1 with err naming the first
 * entry that could not be removed (the walk goes on past it). Replaces
 * system("rm -rf ..."). */
int compat_remove_tree(const char *path, char *err, size_t errlen);
/* Read a whole file into a malloc'ed, NUL-terminated buffer. */
char *compat_read_file(const char *path, size_t *len, char *err, size_t errlen);
/* rename(2) that replaces an existing target on every OS (Windows' rename()
 * refuses to). Returns 0, or -1 with err naming both paths. */
int compat_rename(const char *from, const char *to, char *err, size_t errlen);
/* 1 when path is an existing directory. */
int compat_is_dir(const char *path);
/* For every path a user names as a file to read (weights, shards, records,
 * config files, databases), before opening it: a FIFO would block the open
 * or the read for ever, a device may never end, a directory cannot be read.
 * Returns 0 for a regular file, or for a path that does not exist or cannot
 * be examined (the open that follows names that error); else -1 with err
 * "PATH: is a directory" or "PATH: is not a regular file (a FIFO, device or
 * socket)". compat_read_file and compat_map_file check it themselves. */
int compat_check_regular_file(const char *path, char *err, size_t errlen);

/* The identity of a file: two paths with equal dev and ino name one file,
 * whatever the spelling ("R/./koma.db"), hard links, symbolic links or bind
 * mounts. nlink: its number of hard links. */
typedef struct {
    uint64_t dev, ino;
    int64_t nlink;
} compat_file_id_t;
/* Of the file path names, links followed (stat; Windows: volume serial and
 * file index of GetFileInformationByHandle). 0, or -1 when it does not
 * exist or cannot be examined. */
int compat_file_id(const char *path, compat_file_id_t *id);
static inline int compat_file_id_equal(const compat_file_id_t *a, const compat_file_id_t *b) {
    return a->dev == b->dev && a->ino == b->ino;
}
/* The absolute path of an existing file or directory, every symbolic link,
 * "." and ".." resolved (realpath; Windows: GetFullPathName, which resolves
 * "." and ".." only). 0, or -1 when it does not exist or out is too small. */
int compat_real_path(const char *path, char *out, size_t len);
/* 1 when path itself is a symbolic link (a reparse point on Windows). */
int compat_is_link(const char *path);
/* 1 when the file system that holds path is mounted read-only (statvfs's
 * ST_RDONLY; Windows: FILE_READ_ONLY_VOLUME), 0 when it is not or this
 * cannot be told. */
int compat_fs_readonly(const char *path);
/* 1 when this process may write path (a file: change it; a directory:
 * create files in it): access(W_OK) (root passes unless the file system is
 * read-only); Windows: no read-only attribute. 0 otherwise or missing. */
int compat_can_write(const char *path);

/* Lists the entries of dir (not "." and "..") in strcmp order: calls
 * fn(name, is_dir, user) once per entry, name without the directory. The
 * listing is read completely before the first call, so fn may remove or
 * rename entries of dir. A nonzero return from fn stops the walk and is
 * returned; otherwise returns 0, or -1 with err naming dir when it cannot be
 * read (missing, not a directory, out of memory). */
typedef int (*compat_dir_fn)(const char *name, int is_dir, void *user);
int compat_list_dir(const char *dir, compat_dir_fn fn, void *user, char *err, size_t errlen);

/* A directory for scratch files: $TMPDIR, else $TEMP, else $TMP, else the
 * OS default ("/tmp"; GetTempPath on Windows), without a trailing separator.
 * The string lives until the process ends. */
const char *compat_temp_dir(void);

/* ---- file locks ----------------------------------------------------------- */
/* An exclusive, advisory lock held on a lock file for as long as the process
 * keeps it: flock(2) on POSIX, LockFileEx on Windows. The OS drops it when
 * the process ends in any way (kill -9 included), so a stale lock file never
 * blocks anyone. The holder writes `owner` (one line, e.g. "pid 123 selfplay")
 * into the file so that a refused process can name it. Two locks on one file
 * conflict even inside one process. The descriptor is not inherited by
 * children. */
typedef struct compat_lock compat_lock_t;
/* Returns 0 and *out when the lock is taken; 1 when another holder has it
 * (holder gets the file's text, "" if it has none yet); -1 on an error
 * (err names path). Never waits. */
int compat_lock_try(const char *path, const char *owner, compat_lock_t **out, char *holder, size_t holder_len,
                    char *err, size_t errlen);
void compat_lock_release(compat_lock_t *l); /* NULL ok; the file stays */
/* Makes a directory read-only (1) or writable again (0) for its owner: mode
 * 0555 / 0755 on POSIX (root still writes: tests check the effect). Returns
 * 0, or -1 where this cannot be done (Windows: directory attributes do not
 * stop new files). For tests of read-only runs. */
int compat_set_readonly_dir(const char *path, int readonly);

/* ---- terminals ------------------------------------------------------------ */
/* 1 when f is a terminal (a console on Windows), else 0. */
int compat_isatty(FILE *f);
/* Columns of the terminal f writes to; 0 when f is not a terminal or it does not say. */
int compat_term_width(FILE *f);
/* Runs argv like compat_run_io, its stdout and stderr on a new pseudo-terminal
 * of cols columns (stdin: nothing), and copies everything it writes there to
 * out_path. Returns 0 when it ran (*status as compat_run), or -1 with err; -1
 * "no pseudo-terminals" where the OS has none to give (Windows). For tests of
 * what a person sees in a terminal. */
int compat_run_pty(const char *const *argv, int cols, const char *out_path, int *status, char *err, size_t errlen);

/* ---- process ------------------------------------------------------------- */
/* Installs SIGINT/SIGTERM (Ctrl-C / Ctrl-Break on Windows) handlers that set
 * a flag; compat_stop_requested() reads it. Safe to call more than once. */
void compat_install_stop_handler(void);
int compat_stop_requested(void);
void compat_request_stop(void);
int compat_getpid(void);
/* This machine's name (gethostname / GetComputerName), "localhost" when it
 * has none; always terminated. */
void compat_hostname(char *buf, size_t n);
/* Starts the running program again in place (same pid, argv and open files)
 * with the environment variable name=value added. Does nothing and returns -1
 * when name is already set (so it cannot loop) or where the platform has no
 * way to do it (Windows, or no /proc/self/exe); on success it does not return. */
int compat_reexec_with_env(const char *name, const char *value, char **argv);
/* The same from an explicit environment envp (a .preinit_array function's
 * third argument, where environ is not set yet): execve with envp plus
 * name=value; -1 when name is in envp or the exec failed. */
int compat_reexec_envp(char **argv, char **envp, const char *name, const char *value);
/* The same with several "NAME=VALUE" strings (NULL-terminated): those whose
 * NAME is not in envp are added in one execve; -1 when none is to be added
 * or the exec failed. */
int compat_reexec_envp_vars(char **argv, char **envp, const char *const *vars);
/* The value of name in the environment array envp, or NULL. */
const char *compat_envp_get(char **envp, const char *name);
/* Runs the program argv[0] with the arguments argv[1..] (argv ends with
 * NULL; no shell: each argument reaches the program verbatim, spaces and
 * quotes included), waits for it, and stores its exit status in *status:
 * the code it returned, or a nonzero code when it crashed or was killed
 * (128 + signal on POSIX, the exception code on Windows). A program name
 * without a directory part is searched in PATH. Returns 0 when the program
 * ran, -1 with err naming it when it could not be started (missing, not
 * executable, not a program this OS can run - e.g. a Linux binary under
 * wine). Replaces system()/popen() + shell quoting. stdin/stdout/stderr are
 * inherited. */
int compat_run(const char *const *argv, int *status, char *err, size_t errlen);
/* compat_run with the child's stdout / stderr sent to files: a NULL path
 * inherits ours, "" discards the output, any other path is created or
 * truncated (the same path for both: one file, like "> f 2>&1"). A file that
 * cannot be created is an error naming it. Replaces system("p > o 2> e"). */
int compat_run_io(const char *const *argv, const char *out_path, const char *err_path, int *status, char *err,
                  size_t errlen);
/* Sets (value != NULL) or removes (value == NULL) an environment variable of
 * this process. Returns 0 on success. Replaces setenv/unsetenv. */
int compat_setenv(const char *name, const char *value);

/* ---- child processes on pipes (USI engines) ------------------------------ */
/* A program running with its stdin and stdout connected to this process by
 * pipes, for line protocols such as USI. Lines end in "\n"; a "\r" before it
 * is dropped on reading. The child runs in its own process group (POSIX), so
 * a Ctrl-C at the terminal reaches this process only, which then decides
 * what to do with its children. Writing to a child that has gone fails with
 * -1 instead of killing this process (SIGPIPE is ignored from the first
 * compat_proc_spawn on, POSIX). Pipe ends are never inherited by other
 * children (spawns from several threads are safe). */
typedef struct compat_proc compat_proc_t;

enum { COMPAT_PROC_EOF = -1, COMPAT_PROC_TIMEOUT = -2 };

/* Starts argv (as compat_run: argv[0] searched in PATH, no shell). stderr of
 * the child: stderr_path NULL inherits ours, "" discards it, else the file is
 * appended to. NULL with err naming the program when it cannot be started. */
compat_proc_t *compat_proc_spawn(const char *const *argv, const char *stderr_path, char *err, size_t errlen);
/* The next line from the child's stdout into buf (NUL-terminated, without the
 * line end; a longer line is cut to buflen - 1 bytes and its rest skipped).
 * Waits at most timeout_ms (< 0: no limit). Returns the line's length, or
 * COMPAT_PROC_TIMEOUT (a partial line stays buffered for the next call), or
 * COMPAT_PROC_EOF when the child closed its stdout (exited, crashed) and
 * every line before has been read (a last line without "\n" comes first). */
int32_t compat_proc_read_line(compat_proc_t *p, char *buf, size_t buflen, int64_t timeout_ms);
/* Writes line + "\n" to the child's stdin. 0, or -1 when the child no longer
 * reads (exited). */
int compat_proc_write_line(compat_proc_t *p, const char *line);
/* Closes the child's stdin: it reads end of input (as from a GUI that went
 * away). compat_proc_write_line fails from then on. Idempotent. */
void compat_proc_close_input(compat_proc_t *p); /* NULL ok */
/* Kills the child at once (SIGKILL / TerminateProcess); no-op after exit. */
void compat_proc_kill(compat_proc_t *p);
/* Asks the child to stop as Ctrl-C does: SIGINT on POSIX; on Windows
 * Ctrl-Break to its process group (the child's C runtime raises SIGBREAK,
 * which compat_install_stop_handler catches). 0 when sent, -1 when it could
 * not be (exited; no console shared with the child on Windows). */
int compat_proc_interrupt(compat_proc_t *p);
/* Waits at most timeout_ms (< 0: no limit) for the child to exit. Returns 0
 * with *status (may be NULL) as compat_run reports it, or 1 when it still
 * runs. */
int compat_proc_wait(compat_proc_t *p, int64_t timeout_ms, int *status);
/* Closes both pipes, kills the child if it still runs, reaps it, frees p.
 * NULL ok. */
void compat_proc_free(compat_proc_t *p);
/* Process id of the child. */
int compat_proc_pid(const compat_proc_t *p);
/* Kills process pid at once (SIGKILL / TerminateProcess), a process this
 * program did not start itself (a grandchild, e.g. one rank under mpirun).
 * 0 when sent, -1 when there is no such process or it may not be killed. */
int compat_kill_pid(int pid);
/* 1 when a process pid runs on this machine (one of another user's too), 0
 * when none does (pid <= 0 included). */
int compat_pid_alive(int pid);

/* ---- shared libraries loaded at run time --------------------------------- */
/* A shared library opened by path (dlopen with RTLD_NOW | RTLD_LOCAL;
 * LoadLibrary on Windows): the parts of Koma that pull in large libraries
 * (the CUDA backend: cuDNN, cuBLAS) are loaded only when they are chosen.
 * NULL with err naming the path and the loader's reason (a library it needs
 * that is missing, a wrong architecture, ...). */
typedef struct compat_dl compat_dl_t;
compat_dl_t *compat_dl_open(const char *path, char *err, size_t errlen);
/* The address of symbol name in h, or NULL. */
void *compat_dl_sym(compat_dl_t *h, const char *name);
/* The file name of a shared library called name on this OS: "lib<name>.so",
 * "lib<name>.dylib" or "<name>.dll". */
const char *compat_dl_file_name(const char *name, char *out, size_t len);

/* ---- invariants -------------------------------------------------------- */
/* Always on, prints file:line and the expression, then aborts. For bugs only;
 * failures from the outside world return a status instead. */
#define KOMA_ASSERT(cond)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) compat_assert_fail(#cond, __FILE__, __LINE__);                                                    \
    } while (0)
void compat_assert_fail(const char *expr, const char *file, int line);

#endif
