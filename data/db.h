/* db.h - the run database koma.db (SQLite): schema, versioning, typed access.
 *
 * Owns: the schema and its version (PRAGMA user_version, application_id
 * 'KOMA'), every SQL statement Koma runs, the crash-safe protocol that puts a
 * shard file and its games on record together, and the start-up check of
 * shard files against the database. Does not own: what is inside a shard
 * (data/shard.c), the writer thread (data/writer.c), the run directory layout
 * beyond "paths in the db are relative to the run directory".
 *
 * Durability: WAL journal, synchronous=FULL. In WAL mode synchronous=NORMAL
 * already survives kill -9 (a commit is in the OS page cache before
 * sqlite3_step returns), but it may lose the last commits on power loss or an
 * OS crash. FULL fsyncs the WAL at every commit, so a committed game is on
 * the disk; commits here are per shard or per batch of metrics, a few per
 * second at most, so the fsync costs nothing that matters.
 *
 * Threads: a db_t is one SQLite connection; use it from one thread at a time
 * (the writer thread owns the read-write one). Other threads (trainer,
 * inspect) open their own, usually with DB_OPEN_READONLY; WAL lets them read
 * while the writer writes.
 *
 * Errors: every function returns a db_status_t; on failure db_errmsg() says
 * "<db path>: <step>: <what>" (db_open writes the same into err). Nothing
 * aborts. A full disk is DB_FULL with a message that says so.
 *
 * Results are seen from Black (sente, who moves first): DB_RESULT_BLACK_WIN
 * = +1, DB_RESULT_WHITE_WIN = -1, DB_RESULT_DRAW = 0. Floating-point figures
 * that were not measured are NAN in C and NULL in SQL.
 *
 * Games are of two kinds, told apart by games.shard_id / games.match_id
 * (exactly one is set, a CHECK in the schema):
 *  - self-play and imported games live in a shard (their positions are the
 *    shard's rows [first_row, first_row + row_count)); ids 1, 2, 3, ... in
 *    the order registered, the ids the shard files' game_id column holds
 *    (data/shard.h: shard_next_game_id);
 *  - match games (tools/usi-match, the in-loop evaluation) belong to a
 *    matches row and have no rows; their ids are -1, -2, -3, ... in the order
 *    stored, so that a match game written by another connection never takes
 *    an id a shard being registered has already put in its file. Counts and
 *    statistics of "games" (db_count, db_summary's games/results/reasons) are
 *    self-play games only; match games are counted apart.
 *
 * Schema history (PRAGMA user_version; db_open migrates older files):
 *  1  the first schema: every game in a shard; matches.model_a NOT NULL.
 *  2  match games in games (shard_id NULL-able, match_id, black, white,
 *     detail); matches.model_a and cycle NULL-able (an outside engine),
 *     engine_a / engine_b; a view match_games of the match games with the
 *     columns of the table the referee kept before v2 (for readers of it).
 *     v1 files are rebuilt in one transaction keeping every row, including
 *     those of that interim match_games table (see db_schema.c, migrate_v1_v2).
 *  3  cycle_metrics.no_resign_games, would_resign, false_resign,
 *     resign_threshold: self-play's resignation check by cycle (NULL in rows
 *     written before v3: not recorded). Columns added, nothing rebuilt; a v1
 *     file goes through v2 first.
 *  4  cycle_metrics.resign_threshold is a win probability in [0, 1] (0: off),
 *     the unit of the USI engine's ResignThreshold; v3 rows held W-L in
 *     [-2, 1] (<= -1: off) and are converted: (1 + t) / 2, off -> 0.
 *  5  games.rank, games.host: the MPI rank and host that played a self-play
 *     game (`mpirun -np N selfplay`; rank 0 on one process); NULL where not
 *     recorded (older games, imports, match games). Columns added.
 *  6  runs.cpu_seconds: the process CPU seconds of that invocation, as of its
 *     last published net (0 until it publishes one); models.cpu_seconds: the
 *     run's CPU seconds when the net was published, summed over every
 *     invocation (db_run_cpu_update). NULL where not recorded (rows of older
 *     versions; a model published after such a run row). Columns added.
 */
#ifndef KOMA_DB_H
#define KOMA_DB_H

#include <stddef.h>
#include <stdint.h>

#define DB_SCHEMA_VERSION 7
#define DB_APPLICATION_ID 0x4B4F4D41 /* 'KOMA' in PRAGMA application_id */
#define DB_PATH_MAX 256              /* run-relative paths of shards and models */
#define DB_NAME_MAX 256              /* player names of matches (engine_a, engine_b) */
#define DB_ERR_MAX 768

typedef enum {
    DB_OK = 0,
    DB_ERROR = -1,      /* any other SQLite or I/O failure */
    DB_FULL = -2,       /* disk or database full (SQLITE_FULL, or no space for a file) */
    DB_BUSY = -3,       /* locked by another connection past the busy timeout */
    DB_CORRUPT = -4,    /* not a database, or a corrupt one */
    DB_SCHEMA = -5,     /* not a Koma database, or a schema version this build cannot use */
    DB_CONSTRAINT = -6, /* a row broke a constraint (duplicate path or cycle, bad value) */
    DB_NOTFOUND = -7,   /* the query found no row */
    DB_INVALID = -8,    /* a bad argument (checked before touching the database) */
    DB_CANCELLED = -9,  /* writer: stopping; the item was not written */
    DB_TIMEOUT = -10,   /* writer: the queue stayed full / a flush did not finish in time */
} db_status_t;

const char *db_status_name(db_status_t s); /* "DB_FULL", ... */

typedef enum {
    DB_RESULT_WHITE_WIN = -1,
    DB_RESULT_DRAW = 0,
    DB_RESULT_BLACK_WIN = 1,
} db_result_t;

/* Why a game ended; stored as its name ("checkmate", ...) in games.reason. */
typedef enum {
    DB_REASON_CHECKMATE,       /* the side to move is mated */
    DB_REASON_RESIGN,          /* resigned (value below the resign threshold) */
    DB_REASON_SENNICHITE,      /* fourfold repetition: draw */
    DB_REASON_PERPETUAL_CHECK, /* fourfold repetition by continuous checks: the checker loses */
    DB_REASON_DECLARATION,     /* entering-king declaration (nyugyoku) */
    DB_REASON_MAX_PLY,         /* ply limit reached: draw */
    DB_REASON_ILLEGAL_MOVE,    /* an illegal move (imported records, USI matches) */
    DB_REASON_TIME,            /* lost on time (USI matches) */
    DB_REASON_ABORT,           /* stopped without a result (counted as a draw) */
    DB_REASON_NB
} db_reason_t;

const char *db_reason_name(db_reason_t r); /* "checkmate", ...; "?" when out of range */
/* Returns 0 and sets *r, or -1 for an unknown name. */
int db_reason_parse(const char *name, db_reason_t *r);

typedef struct db db_t;

/* ---- open, close, transactions ------------------------------------------ */
enum {
    DB_OPEN_READONLY = 1,
    /* With DB_OPEN_READONLY: a file with an older schema is migrated first
     * (a short read-write open that never creates a file or a schema), then
     * opened read-only. For the readers a user points at an old run
     * (inspect, report); db_migrated_from tells them it happened. */
    DB_OPEN_MIGRATE = 2,
    DB_OPEN_NOCREATE_ = 4 /* internal: read-write, but never create */
};

/* Opens (read-write: creates) the database at path and checks its schema
 * version: a new file gets the current schema; an older known version is
 * migrated; a newer or unknown one, or a file that is not a Koma database, is
 * refused with err = "<path>: ...". */
db_status_t db_open(const char *path, uint32_t flags, db_t **out, char *err, size_t errlen);
void db_close(db_t *db); /* NULL ok */

/* What is at path, found without creating or changing anything (the run
 * module asks before it takes a run), except that a hot rollback journal
 * left by a killed writer is rolled back to the last commit first, as any
 * SQLite connection with write access does before it reads: */
typedef enum {
    DB_PROBE_ABSENT, /* no file */
    DB_PROBE_BLANK,  /* an SQLite file with no schema objects and no version: a zero-length file,
                        or a new run killed between the file's creation and its schema's commit */
    DB_PROBE_KOMA,   /* a Koma database this build can open (an older schema is migrated by a writer) */
} db_probe_t;
/* DB_OK and *kind; or DB_SCHEMA (another program's database, a newer
 * schema) / DB_CORRUPT (not a database) / DB_ERROR, with err naming path. */
db_status_t db_probe(const char *path, db_probe_t *kind, char *err, size_t errlen);

const char *db_path(const db_t *db);
const char *db_errmsg(const db_t *db); /* the last failure's message, "" if none */
int32_t db_schema_version(const db_t *db);
/* The schema version a DB_OPEN_MIGRATE open migrated the file from; 0 if none. */
int32_t db_migrated_from(const db_t *db);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK. The db_* writers below join an open
 * transaction (as a savepoint) or run in their own. */
db_status_t db_begin(db_t *db);
db_status_t db_commit(db_t *db);
db_status_t db_rollback(db_t *db);
/* Runs SQL that returns no rows (tools, tests). */
db_status_t db_exec(db_t *db, const char *sql);

/* ---- runs: one row per invocation (a resumed run adds a row) ----------- */
typedef struct {
    int64_t id;
    char created[32]; /* ISO 8601 UTC, set by the database */
    char koma_version[32];
    char command[32]; /* "selfplay", "train", ... */
    char *config;     /* the effective flags (INI text or JSON); malloc'ed on reads */
} db_run_t;

db_status_t db_run_insert(db_t *db, const char *koma_version, const char *command, const char *config, int64_t *id);
db_status_t db_run_latest(db_t *db, db_run_t *out); /* free out->config with db_run_clear */
void db_run_clear(db_run_t *r);
/* Records that invocation run_id has used `seconds` of process CPU (kept as the
 * largest value written: a retry never lowers it) and sets *total to the run's
 * CPU seconds so far: the sum over every invocation up to run_id, or NAN when
 * one of them predates the record (schema < 6). The run's CPU time thus
 * survives restarts: a curve "rating at N CPU-hours" can span sessions. */
db_status_t db_run_cpu_update(db_t *db, int64_t run_id, double seconds, double *total);

/* ---- models: one published net per cycle ------------------------------- */
typedef struct {
    int64_t id;
    int64_t run_id; /* 0 = none */
    int32_t cycle;  /* 0 = the initial net; unique */
    int32_t features_version;
    char path[DB_PATH_MAX];                                 /* relative to the run directory; unique */
    char xxh3[17];                                          /* XXH3-64 of the whole file, 16 lowercase hex digits */
    char arch[64];                                          /* e.g. "resnet10x128" */
    int64_t train_steps;                                    /* optimizer steps behind this net, in total */
    int64_t train_samples;                                  /* samples behind this net, in total */
    double loss_policy, loss_value, loss_legal, loss_total; /* at publication; NAN = none */
    double cpu_seconds; /* the run's CPU seconds at publication, every invocation's (db_run_cpu_update); NAN = unknown */
    char created[32];
} db_model_t;

db_status_t db_model_insert(db_t *db, db_model_t *m);   /* sets m->id */
db_status_t db_model_latest(db_t *db, db_model_t *out); /* highest cycle; DB_NOTFOUND if none */
db_status_t db_model_get(db_t *db, int64_t id, db_model_t *out);
db_status_t db_model_by_cycle(db_t *db, int32_t cycle, db_model_t *out);

/* ---- shards and games ---------------------------------------------------- */
typedef struct {
    int64_t id;
    char path[DB_PATH_MAX]; /* relative to the run directory; unique */
    int32_t cycle;
    int32_t features_version;
    int64_t rows;      /* positions (dimension 0 of every tensor) */
    int64_t games;     /* set from the games given at insertion */
    int64_t pos_begin; /* positions in all earlier shards: rows are global [pos_begin, pos_begin+rows) */
    int64_t bytes;     /* file size */
    char xxh3[17];     /* XXH3-64 of the whole file */
    char created[32];
} db_shard_t;

typedef struct {
    int64_t id;             /* > 0 in a shard, < 0 in a match (see the top of this file) */
    int64_t shard_id;       /* 0 for a match game */
    int64_t first_row;      /* the game's positions are rows [first_row, first_row+row_count) of the shard */
    int64_t row_count;      /* 0 (and first_row 0) for a match game */
    int64_t model_id;       /* the net that played it; 0 = none (imported record, match game) */
    const char *start_sfen; /* "startpos" or an SFEN */
    const char *moves;      /* USI moves separated by single spaces, "" for none */
    int32_t plies;
    int32_t result; /* db_result_t */
    db_reason_t reason;
    char created[32];
    /* Schema v2. The strings are read during the call that stores the game
     * (NULL = ""), malloc'ed on reads and freed by db_game_list_free. */
    int64_t match_id;  /* the match it was played in; 0 = a game in a shard */
    const char *black; /* the players' names (match games: as in matches.engine_a/b) */
    const char *white;
    const char *detail; /* how it ended, in words ("white resigned"); "" = not recorded */
    /* Schema v5: where a self-play game was played. host NULL (or "") = not
     * recorded (games before v5, imported records, match games), and rank is
     * then ignored; otherwise the MPI rank (0 for one process) and host name.
     * Reads give host "" for not recorded. */
    int32_t rank;
    const char *host;
} db_game_t;

typedef struct {
    db_game_t *games; /* strings malloc'ed, freed by db_game_list_free */
    int64_t n;
} db_game_list_t;

/* Registers a shard whose file is already durably on disk, with its games,
 * in ONE transaction: either the shard row and all its games are committed,
 * or nothing is. Games must lie inside the shard's rows. Sets shard->id,
 * shard->games, shard->pos_begin and every games[i].id / shard_id. Clears the
 * shard's intent row (db_shard_intent) in the same transaction. */
db_status_t db_shard_insert(db_t *db, db_shard_t *shard, db_game_t *games, int32_t ngames);

/* Records that the file rel_path is about to be written (committed at once),
 * so that a kill -9 between the file's rename and its registration leaves a
 * trace db_check_shards can find. */
db_status_t db_shard_intent(db_t *db, const char *rel_path);

/* The whole crash-safe protocol in one call, as the writer thread runs it:
 * db_shard_intent; write(<run_dir>/<shard->path>, arg) writes the file
 * durably (compat_durable_*) and returns 0 or a db_status_t (DB_FULL when out
 * of space) with err set; the file's size and XXH3 are measured; then
 * db_shard_insert. If the write or the registration fails, the file and the
 * intent are removed and nothing is on record. */
typedef int (*db_shard_write_fn)(const char *path, void *arg, char *err, size_t errlen);
db_status_t db_shard_commit(db_t *db, const char *run_dir, db_shard_t *shard, db_game_t *games, int32_t ngames,
                            db_shard_write_fn write, void *arg);

/* ---- position sets (schema v7; docs/DATA.md) ---------------------------------
 * An imported position file (hcpe, psv): one row per file, never one per
 * position. Its shards are registered one chunk at a time, each in the
 * transaction that advances records_done, so a killed import resumes at
 * records_done without reading the committed part again. */
typedef struct {
    int64_t id;
    char path[DB_PATH_MAX];  /* the file as given (absolute when it could be resolved) */
    char format[16];         /* "hcpe", "psv" */
    int64_t bytes;           /* the file's size when the set began */
    int64_t mtime_ns;        /* its modification time then */
    char xxh3[17];           /* XXH3-64 of its content, 16 lowercase hex digits */
    int64_t records;         /* whole records in the file */
    int64_t records_done;    /* records read and committed (stored or rejected) */
    int64_t positions;       /* rows stored in the set's shards */
    int64_t rejected;        /* records rejected so far */
    int32_t finished;        /* every record read */
    char created[32];
} db_set_t;

/* The set of a file by path, size and modification time (found 1), or by
 * content hash and size (a file moved or touched); *found 0 when none.
 * hash NULL: by path only. */
db_status_t db_set_find(db_t *db, const char *path, int64_t bytes, int64_t mtime_ns, const char *xxh3, db_set_t *out,
                        int *found);
/* Inserts set (records_done, positions, rejected, finished as given: 0 for
 * a new file); sets set->id. */
db_status_t db_set_insert(db_t *db, db_set_t *set);
/* Advances set->id to set's records_done, positions, rejected and finished,
 * without a shard (a chunk whose every record was rejected, or the end). */
db_status_t db_set_progress(db_t *db, const db_set_t *set);
/* Every set, by id; *out malloc'ed (free()). */
db_status_t db_sets_list(db_t *db, db_set_t **out, int32_t *n);
/* db_shard_commit for a shard of a set: the shard row (set_id = set->id, no
 * games) and the set's progress (db_set_progress) in ONE transaction. */
db_status_t db_shard_commit_set(db_t *db, const char *run_dir, db_shard_t *shard, const db_set_t *set,
                                db_shard_write_fn write, void *arg);

db_status_t db_shard_get(db_t *db, int64_t id, db_shard_t *out);
/* The most recent shards holding at least min_rows positions together (all of
 * them when min_rows <= 0, or when there are fewer), oldest first, for the
 * trainer's window. *out is malloc'ed (free()); *n may be 0. */
db_status_t db_shards_recent(db_t *db, int64_t min_rows, db_shard_t **out, int32_t *n);
db_status_t db_games_of_shard(db_t *db, int64_t shard_id, db_game_list_t *out);
void db_game_list_free(db_game_list_t *l); /* NULL ok */

/* Games and positions in shards of one cycle, or of all when cycle < 0
 * (match games are in no shard and not counted). */
db_status_t db_count(db_t *db, int32_t cycle, int64_t *games, int64_t *positions);
/* How the self-play games of one cycle (their shards' cycle) ended, counted
 * from the games table itself (cycle_metrics may lag it after a kill):
 * results from Black's side and the mean length (NAN when no games). */
db_status_t db_cycle_results(db_t *db, int32_t cycle, int64_t *black_wins, int64_t *white_wins, int64_t *draws,
                             double *avg_plies);
/* Self-play games by the rank and host that played them (schema v5; games
 * with no host recorded are left out), ordered by rank then host. */
typedef struct {
    int32_t rank;
    char host[128];
    int64_t games, positions;
    char first[32], last[32]; /* created of its first and last game */
    double seconds;           /* from its first game to its last */
} db_rank_games_t;
/* *out malloc'ed (free it), *n rows; DB_OK with *n 0 when none. */
db_status_t db_games_by_rank(db_t *db, db_rank_games_t **out, int32_t *n);

/* ---- metrics --------------------------------------------------------------- */
typedef struct {
    int64_t step; /* global optimizer step; a step written again (after a resume) replaces the row */
    int32_t cycle;
    double time; /* unix seconds; 0 = now */
    double lr;
    int64_t samples;                                        /* samples seen so far */
    double loss_policy, loss_value, loss_legal, loss_total; /* NAN = not measured */
    double acc_policy, acc_value, acc_legal;
    double grad_norm;
} db_train_step_t;

/* Inserts n rows in one transaction. */
db_status_t db_train_steps_insert(db_t *db, const db_train_step_t *rows, int32_t n);
/* Rows with step in [from, to), ascending, at most max of them; *n = rows read. */
db_status_t db_train_steps_get(db_t *db, int64_t from, int64_t to, db_train_step_t *rows, int32_t max, int32_t *n);

typedef struct {
    int32_t cycle;
    int64_t model_id;         /* net that played the cycle's games; 0 = none */
    double started, finished; /* unix seconds */
    int64_t games, positions;
    double selfplay_s, train_s; /* wall time of each phase */
    double positions_per_s, evals_per_s;
    double avg_batch; /* leaves per inference batch */
    double busy_pct;  /* inference device busy, 0..100 */
    double avg_plies;
    int64_t black_wins, white_wins, draws;
    double elo, elo_lo, elo_hi; /* rating after evaluation and its 95% interval; NAN until then */
    /* Schema v3: the resignation check, over the cycle's games counted in
     * black_wins + white_wins + draws. A count < 0 is not recorded (NULL:
     * rows from before v3, rows written without self-play figures). */
    int64_t no_resign_games; /* games that were not allowed to resign (--no-resign-fraction) */
    int64_t would_resign;    /* ... in which a side's value fell below the threshold: it would have resigned */
    int64_t false_resign;    /* ... and that side then did not lose: a false resignation */
    double resign_threshold; /* the --resign-threshold in use: a win probability, 0 = resignation off; NAN = not
                                recorded */
} db_cycle_metrics_t;

/* A row of cycle `cycle` with nothing recorded: figures NAN, counts 0,
 * resignation counts -1 (NULL), model_id 0. */
void db_cycle_metrics_init(db_cycle_metrics_t *m, int32_t cycle);
/* Inserts or replaces the row of m->cycle. DB_INVALID when the resignation
 * figures do not nest (false_resign <= would_resign <= no_resign_games, a
 * recorded count needing the one it is part of recorded too). */
db_status_t db_cycle_metrics_put(db_t *db, const db_cycle_metrics_t *m);
db_status_t db_cycle_metrics_get(db_t *db, int32_t cycle, db_cycle_metrics_t *out);
/* db_cycle_metrics_get, or (DB_OK) db_cycle_metrics_init's row when cycle has
 * none yet: for writers that set a few fields and keep the rest. */
db_status_t db_cycle_metrics_get_or_init(db_t *db, int32_t cycle, db_cycle_metrics_t *out);

/* A match between two players, A and B, from A's side. A player is a net of
 * this run (model_a / model_b) or anything else (an outside USI engine, a
 * net file that is not registered), named in engine_a / engine_b. */
typedef struct {
    int64_t id;
    int32_t cycle;               /* cycle of model_a; -1 when A is not a model of this run */
    int64_t model_a;             /* 0 = not a model of this run: engine_a names it */
    int64_t model_b;             /* 0 = not a model of this run: opponent (and engine_b) names it */
    char opponent[64];           /* B's name for tables, when B is not a model */
    int32_t wins, draws, losses; /* of A */
    double elo, elo_lo, elo_hi;  /* a minus b, with its 95% interval; NAN = not rated (yet) */
    char settings[128];          /* e.g. "nodes=800" or "byoyomi=1000" */
    char created[32];
    /* schema v2 */
    char engine_a[DB_NAME_MAX]; /* the players' names as in games.black / games.white of the */
    char engine_b[DB_NAME_MAX]; /*   match's games; "" = not recorded (rows from schema v1) */
    int64_t games;              /* games rows of the match (set on reads) */
} db_match_t;

/* Inserts a finished match's row, totals included (sets m->id). Needs
 * model_a, or engine_a naming A. cycle < 0 or model_a = 0 store no cycle. */
db_status_t db_match_insert(db_t *db, db_match_t *m);

/* A match recorded as it is played, so that a killed match keeps the games it
 * finished:
 *   db_match_begin(db, &m);                  row with W/D/L 0 and no Elo, sets m.id
 *   db_match_game_insert(db, m.id, &g);      each game as it ends
 *   db_match_finish(db, &m);                 W/D/L and Elo at the end
 * db_match_begin zeroes m's totals and Elo before inserting. Until
 * db_match_finish the row has no Elo (NULL): a row with games and no Elo is
 * a match that did not finish (killed, or stopped before its end); its
 * games are all there and its W/D/L agree with them (see below). Readers
 * (the ladder, report, inspect) leave it unrated. */
db_status_t db_match_begin(db_t *db, db_match_t *m);
/* Stores one finished game of match match_id in one transaction (sets g->id,
 * g->match_id; g's shard_id, rows and model_id are ignored). When the match
 * names its players (engine_a and engine_b set and different) and engine_a
 * is g->black or g->white, the game is also added to the row's W/D/L from A's
 * side and the row's Elo is cleared until db_match_finish: the row always
 * agrees with its games. DB_NOTFOUND if there is no such match. */
db_status_t db_match_game_insert(db_t *db, int64_t match_id, db_game_t *g);
/* Sets the W/D/L and Elo (elo, elo_lo, elo_hi) of row m->id; may be called
 * again. DB_NOTFOUND if there is no such match. */
db_status_t db_match_finish(db_t *db, const db_match_t *m);
/* Moves every game of match from_id to match into_id and deletes row
 * from_id, in one transaction (two records of one match joined; into_id's
 * totals are left as they are). */
db_status_t db_match_move_games(db_t *db, int64_t from_id, int64_t into_id);

db_status_t db_match_get(db_t *db, int64_t id, db_match_t *out); /* DB_NOTFOUND if none */
/* Matches of one cycle (all when cycle < 0), by id; *out malloc'ed (free()). */
db_status_t db_matches_list(db_t *db, int32_t cycle, db_match_t **out, int32_t *n);
/* The games of one match in the order they were stored (free with db_game_list_free). */
db_status_t db_match_games_list(db_t *db, int64_t match_id, db_game_list_t *out);

/* ---- inspection ------------------------------------------------------------ */
typedef struct {
    int32_t schema_version;
    int64_t runs, models, shards, games, positions, shard_bytes, train_steps, matches;
    int64_t pending;         /* shard intents not yet resolved (see db_check_shards) */
    int32_t latest_cycle;    /* of the latest model; -1 when none */
    int64_t latest_model_id; /* 0 when none */
    int64_t last_step;       /* highest train step; -1 when none */
    double last_loss_total;  /* at last_step; NAN when none */
    /* games, black_wins .. reasons: self-play and imported games (in shards) only */
    int64_t black_wins, white_wins, draws;
    double avg_plies; /* NAN when no games */
    int64_t reasons[DB_REASON_NB];
    /* match games (schema v2): how many, and how they ended */
    int64_t match_games;
    int64_t match_reasons[DB_REASON_NB];
    char first_run[32], last_run[32]; /* created of the first and last runs rows, "" if none */
} db_summary_t;

db_status_t db_summary(db_t *db, db_summary_t *out);

/* ---- start-up check of files against rows --------------------------------- */
typedef enum {
    DB_CHECK_MISSING,        /* a shards/models row whose file is absent (never expected) */
    DB_CHECK_MISMATCH,       /* a shard file whose size or XXH3 differs from its row */
    DB_CHECK_ORPHAN_MOVED,   /* written but never registered: moved to <run_dir>/orphans/ */
    DB_CHECK_ORPHAN_DELETED, /* the same, deleted (DB_CHECK_DELETE_ORPHANS) */
    DB_CHECK_TMP_REMOVED,    /* a half-written "<path>.tmp.<pid>" removed */
} db_check_kind_t;

typedef struct {
    db_check_kind_t kind;
    char path[DB_PATH_MAX + 32]; /* relative to the run directory */
    char what[160];
} db_check_item_t;

typedef struct {
    int64_t shards_checked, models_checked;
    db_check_item_t *items; /* malloc'ed */
    int32_t n;
} db_check_report_t;

enum {
    DB_CHECK_VERIFY = 1,         /* hash every shard file (reads them all) instead of comparing sizes only */
    DB_CHECK_DELETE_ORPHANS = 2, /* delete orphans instead of moving them aside */
};

/* Run at start-up, before the writer thread: reports rows whose file is
 * missing or differs, and resolves every pending intent: a file that was
 * written but never registered is moved aside (or deleted), a half-written
 * temporary is removed. Rows are never deleted. DB_OK means the check ran;
 * look at report->n for what it found. Orphans are found through their
 * intent rows, not by listing shards/ (compat/ has no directory listing):
 * a file put there by hand, or written without db_shard_intent, is not seen. */
db_status_t db_check_shards(db_t *db, const char *run_dir, uint32_t flags, db_check_report_t *report);
void db_check_report_free(db_check_report_t *r); /* NULL ok */

/* SQLite's own check of the file: PRAGMA quick_check (full = 0: every page
 * and row, no index contents) or integrity_check (full = 1). DB_OK, or
 * DB_CORRUPT with db_errmsg naming the file and the first problem. */
db_status_t db_check_integrity(db_t *db, int full);

/* XXH3-64 and size of a whole file, streaming. Returns 0, or -1 with err set. */
int db_file_xxh3(const char *path, uint64_t *hash, int64_t *bytes, char *err, size_t errlen);

#endif
