/* run.h - a run directory: its layout, its one writer, its start-up checks.
 *
 * Owns: the names of everything in a run directory (koma.db, log,
 * koma.lock, models/, shards/, train/, orphans/), making a new run, the
 * exclusive writer lock, and the checks a writer makes before it touches a
 * run: that koma.db is a Koma database (refused untouched otherwise), that a
 * lost database does not become a new run over old nets and shards, that
 * models/ and shards/ are writable, that every registered shard and model
 * file is there (and, newest model always, every file with RUN_VERIFY, that
 * its XXH3 matches koma.db), and the resolution of files a killed write left
 * (db_check_shards).
 * Does not own: what is in koma.db (data/db.c), shard and weights files, the
 * programs' own logs (they open run_path(dir, RUN_LOG) themselves).
 *
 * One writer per run: selfplay, train and import open a run with RUN_WRITE
 * and hold koma.lock until run_close (or until the process dies: the OS
 * drops the lock, so kill -9 never leaves a run locked). A second writer is
 * refused at once with the holder's pid, command and start time. Readers
 * (inspect, report, koma, usi-match recording a match) never take the lock:
 * SQLite's WAL lets them read (and usi-match append its match rows) while
 * the writer writes.
 *
 * Threads: a run_t is used by the thread that opened it; run_db's
 * connection may be handed to the writer thread (data/writer.h) until
 * run_close.
 * Errors: run_open returns NULL and a message that names the directory or
 * the file and says what to do; nothing in the directory is written before
 * the database has been found to be Koma's (or absent).
 */
#ifndef KOMA_DATA_RUN_H
#define KOMA_DATA_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/db.h"

/* What a run directory holds, relative to it. */
#define RUN_DB "koma.db"
#define RUN_LOG "log"
#define RUN_REPORT "report.html" /* written by `report RUN_DIR` alone */
#define RUN_LOCK "koma.lock"
#define RUN_MODELS "models"
#define RUN_SHARDS "shards"
#define RUN_TRAIN "train"
#define RUN_PATH_MAX 1400

/* dir + "/" + rel into out (rel NULL or "": dir). Returns 0, or -1 when out
 * is too small (out is then ""). */
int run_path(const char *dir, const char *rel, char *out, size_t len);

enum {
    RUN_WRITE = 1,  /* take the writer lock and open koma.db read-write */
    RUN_CREATE = 2, /* with RUN_WRITE: a missing directory or database starts a new run */
    RUN_VERIFY = 4, /* hash every shard and model file, not only the newest model */
};

typedef struct run run_t;

/* Opens the run in dir for flags; command ("selfplay", "train", "import")
 * goes into the lock file and the refusal a second writer gets. */
run_t *run_open(const char *dir, uint32_t flags, const char *command, char *err, size_t errlen);
/* Closes the database and releases the lock (NULL ok). Stop the writer
 * thread that uses run_db first. */
void run_close(run_t *r);

const char *run_dir(const run_t *r); /* as given, without trailing slashes */
db_t *run_db(run_t *r);              /* the read-write connection (RUN_WRITE), else NULL */
bool run_is_new(const run_t *r);     /* run_open created the database */
/* What the start-up check found and did ("orphan moved to orphans/: ...");
 * i in [0, run_findings). For the program's log. */
int32_t run_findings(const run_t *r);
const char *run_finding(const run_t *r, int32_t i);
/* Files checked by the start-up check. */
void run_checked(const run_t *r, int64_t *shards, int64_t *models);

/* Refuses a directory a writer could not write into (missing is created):
 * 0, or -1 with err naming it. Also for an output directory outside a run
 * (train --out). */
int run_check_writable(const char *dir, char *err, size_t errlen);

/* ---- files a user names as outputs (train --out and --losses, report -o) ----
 * Every such path goes through run_output_check before any work is spent and
 * again right before the file is written; the file is then written to a
 * temporary name in the same directory, flushed, fsync'ed and renamed over
 * the target (run_output_write / run_output_open, or nn_weights_save, which
 * writes the same way). Refused, with "refusing to write WHAT to PATH: WHY
 * (choose another FLAG)":
 *  - a target that exists and is not a regular file (a directory, device,
 *    FIFO or socket, or a symbolic link to one);
 *  - a file of a run: koma.db, koma.db-wal, koma.db-shm, koma.db-journal,
 *    koma.lock, log or report.html in a directory that holds a koma.db (or
 *    is run_dir; report.html is report's own: run_output_check_own),
 *    or anything under its models/, shards/, train/ or orphans/. Paths are
 *    compared resolved (symbolic links, "." and ".." followed) and
 *    directories by identity (dev + inode: bind mounts too), so R/./koma.db
 *    or a link to it is caught; a target with more than one hard link is
 *    compared by identity with run_dir's database, lock, log, report and
 *    every file under its models/, shards/ and train/;
 *  - a target whose directory does not exist.
 * run_dir: the run the program works on, or NULL. what: "report", "the
 * final net", ...; flag: "-o", "--out", ... for the message. */
int run_output_check(const char *path, const char *run_dir, const char *what, const char *flag, char *err,
                     size_t errlen);
/* run_output_check for a program that writes one of the run's files itself
 * (`report RUN_DIR`: own = RUN_REPORT): run_dir's file named own is allowed
 * (the same name in another run is not); all else as run_output_check. */
int run_output_check_own(const char *path, const char *run_dir, const char *own, const char *what, const char *flag,
                         char *err, size_t errlen);
/* run_output_check, then a durable write of data (compat_write_file_durable). */
int run_output_write(const char *path, const char *run_dir, const char *what, const char *flag, const void *data,
                     size_t len, char *err, size_t errlen);

/* ---- where a new run may be created ----
 * A writer with RUN_CREATE makes a new run (no koma.db yet) only in a
 * directory that is missing, empty, or holds nothing but a run's own names
 * (koma.db, koma.db-wal/-shm/-journal, koma.lock, log, report.html, models/,
 * shards/, train/, orphans/, leftover .koma-write-test.* probes) and that is
 * not a system directory: "/", a top-level directory of it (/bin, /boot,
 * /dev, /etc, /home, /lib, /lib32, /lib64, /media, /mnt, /opt, /proc, /root,
 * /run, /sbin, /srv, /sys, /tmp, /usr, /var), a drive's root (C:\\) or $HOME itself (compared
 * resolved). A directory that already holds a Koma koma.db is a run and is
 * always accepted. 0, or -1 with err naming the directory and the first
 * unrelated entry. Nothing is written. */
int run_check_new_dir(const char *dir, char *err, size_t errlen);

/* 0 when the file at path has the XXH3 hex (16 digits, as koma.db stores
 * it); -1 with err naming the file and both hashes, or why it could not be
 * read. */
int run_verify_file(const char *path, const char *xxh3_hex, char *err, size_t errlen);

#endif
