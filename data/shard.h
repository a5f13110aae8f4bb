/* shard.h - shard files: the training positions of a batch of games, as one
 * safetensors table, and their registration in koma.db.
 *
 * Owns: the column layout below, the builder that accumulates rows game by
 * game, the durable write + registration (direct, or as a writer-thread job),
 * the validating reader and the gather of rows into training batches.
 * Does not own: the file format (nn/safetensors.c), the database and its
 * crash-safe protocol (data/db.c), what the feature bits mean (engine/encode.h:
 * the widths and features_version are parameters here, so this module never
 * includes engine/).
 *
 * Two versions (docs/DATA.md). Version 2, written by this build: what defines
 * a row and nothing derivable from it (the input planes and legal-move mask
 * are made from `position` when a batch is built: train/window.c). Version 1
 * (older runs): the same plus the derived planes, hand and legal columns and a
 * 96-byte position; read, trained on and resumed as before, and still
 * written by shard_builder_new for tests that make old runs.
 *
 * ---- Version 2 columns -----------------------------------------------------------
 *   position        U8     (R, 32)             the exact position as dlshogi's
 *                                              HuffmanCodedPos (data/fmt_pack.h "hcp":
 *                                              board, hands, side to move)
 *   move, result, root_q, ply                  as in version 1 below (ply: for a
 *                                              position set the record's game ply - 1
 *                                              where the source has one, else 0)
 *   game_id         I64    (G)                 the shard's games' ids (games.id),
 *                                              increasing; G = koma.games
 *   game_rows       U32    (G)                 each game's rows, in row order (the
 *                                              game's rows are contiguous; sum: R)
 *   policy_offsets, policy_label
 *                                              as in version 1; the game and policy
 *                                              columns are all absent in a position
 *                                              set (koma.set "1": imported positions,
 *                                              no games; every row stands alone and its
 *                                              policy target is a one-hot on its move)
 *   policy_q16      U16    (nnz)               the target probabilities as 16-bit
 *                                              counts: the visits they were made from
 *                                              (count / sum is each float exactly), or
 *                                              else shares of the row's largest (65535;
 *                                              an entry > 0 is at least 1); read back
 *                                              as count / row sum (shard_row_probs);
 *                                              absent in a set
 *   surprise, moves_left                       optional, as in version 1
 *   reason          U8     (R)                 a position set's rows: how the record's
 *                                              game ended (db_reason_t: hcpe's sennichite,
 *                                              declaration and move-limit flags survive)
 * __metadata__: koma.kind "shard", koma.version "2", koma.rows, koma.games
 * (0 for a set), koma.nnz (0 for a set), koma.position "hcp", koma.set "0"|"1";
 * no features_version or widths: a version-2 shard suits any feature set and
 * is registered with features_version SHARD_FEATURES_ANY.
 *
 * ---- Version 1 columns (every tensor has the row count R as dimension 0) ---------
 *   name            dtype  shape               meaning
 *   planes          U8     (R, planes_bytes)   packed input feature bits
 *   hand            F32    (R, hand_n)         hand values
 *   legal           U8     (R, legal_bytes)    legal-move mask bits (bit = label)
 *   policy_offsets  U32    (R)                 start of the row's policy entries;
 *                                              its end is the next row's start, or
 *                                              nnz for the last row. [0] = 0, never
 *                                              decreasing; a row with no policy
 *                                              target (fast search) has none.
 *   policy_label    U16    (nnz)               move labels < SHARD_LABEL_NB
 *   policy_prob     F32    (nnz)               target probabilities (finite, >= 0)
 *   result          I8     (R)                 game result from the side to move at
 *                                              the row: +1 won, 0 draw, -1 lost
 *   root_q          F32    (R)                 search value from the side to move,
 *                                              in [-1, 1]
 *   ply             U16    (R)                 moves played in this game before the
 *                                              row's position (0 = the game's start
 *                                              position; the row's move is word
 *                                              `ply` of games.moves)
 *   game_id         I64    (R)                 games.id in koma.db; rows of one game
 *                                              are contiguous, ids never decrease
 *   move            U16    (R)                 the move played (engine Move, types.h)
 *   position        U8     (R, 96)             the exact position, SHARD_POS_* below
 * Optional columns (a shard without one reads as every row unknown):
 *   surprise        F32    (R)                 policy surprise: KL(policy target ||
 *                                              the net's prior at the root) of a row
 *                                              searched with a policy target (>= 0),
 *                                              SHARD_SURPRISE_UNKNOWN (-1) otherwise;
 *                                              written when a row has one
 *   moves_left      I16    (R)                 plies from the row's position to the
 *                                              game's end (>= 0; the moves-left head's
 *                                              target), -1 unknown (imported positions:
 *                                              shard_builder_length_unknown); written
 *                                              when a row has one
 * Some older shards also hold a "move_label" column (U16, the played move's
 * label): it is derivable from move and position, so it is no longer written
 * and readers ignore it (train/window.c derives the labels).
 * Rows: R <= SHARD_MAX_ROWS; nnz < 2^32; at most SHARD_LABEL_NB entries a row.
 * Tensors are written widest dtype first, so every column is aligned in the
 * mapping. Readers ignore columns they do not know (future additions).
 *
 * ---- position: 96 bytes a row --------------------------------------------------
 *   [0, 81)   engine Piece code of each square (engine/types.h numbering:
 *             sq = (file-1)*9 + rank-1; piece = type + 16*colour; 0 = empty)
 *   [81]      side to move: 0 Black, 1 White
 *   [82, 84)  game ply, u16 little-endian (1 = a game's first move; SFEN's last field)
 *   [84, 88)  Black's hand, u32 LE (engine Hand encoding, types.h)
 *   [88, 92)  White's hand, u32 LE
 *   [92, 96)  zero
 * That is everything an SFEN holds, so a shard can be re-encoded when the
 * features change.
 *
 * ---- __metadata__ ------------------------------------------------------------------
 *   koma.kind "shard", koma.version "1", koma.rows, koma.games, koma.nnz,
 *   koma.features_version, koma.planes_bytes, koma.hand_n, koma.legal_bytes
 *   (decimal integers as strings), plus koma.xxh3.<column> (the writer's).
 *
 * ---- Files in a run ------------------------------------------------------------------
 * <run_dir>/shards/c<cycle, 4+ digits>_<seq, 6+ digits>.safetensors (shard_path_format),
 * seq counting shards across the run (the caller picks it: e.g. the number of
 * shards registered at start-up + 1, then counting up; a path already taken is
 * refused with DB_CONSTRAINT, never overwritten). shard_commit / shard_submit follow
 * db_shard_commit: an intent row is committed, the file is written to
 * "<path>.tmp.<pid>", fsync'ed and renamed, then the shard and its games are
 * inserted in ONE transaction. A kill -9 after the rename leaves a file with
 * an intent and no shard row: db_check_shards moves it aside at start-up.
 *
 * ---- Errors and threads ------------------------------------------------------------------
 * Every failure returns a status with a message: the reader's start with the
 * shard's path, registration's with the database's path or the shard's
 * run-relative path. A bad shard never aborts the process. A shard_t is read-only after
 * shard_open: any number of threads may gather from it at once. A builder is
 * one thread's.
 */
#ifndef KOMA_SHARD_H
#define KOMA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "data/writer.h"
#include "nn/net.h"

#define SHARD_KIND "shard"
#define SHARD_VERSION 2            /* the version this build writes (shard_builder_new_compact) */
#define SHARD_VERSION_V1 1         /* the older layout (shard_builder_new), still read */
#define SHARD_HCP_BYTES 32         /* a version-2 row's position (FMT_PACK_BYTES) */
#define SHARD_FEATURES_ANY 0       /* shards.features_version of a version-2 shard: planes derived at load */
#define SHARD_LABEL_NB 2187        /* move labels (engine ENC_LABEL_NB, nn NN_POLICY_NB) */
#define SHARD_POSITION_BYTES 96
#define SHARD_MAX_ROWS INT32_MAX          /* rows a shard holds at most */
#define SHARD_MAX_WIDTH (1 << 20)         /* bytes or floats per row of planes/hand/legal */
#define SHARD_SURPRISE_UNKNOWN (-1.0f)    /* the surprise column's "no value" */
#define SHARD_MOVES_LEFT_UNKNOWN (-1)     /* the moves_left column's "no value" */
#define SHARD_LABEL_UNKNOWN 0xFFFF        /* a move label array's "no value" (shard_row_reply) */

/* Offsets into a row of the position column. */
#define SHARD_POS_BOARD 0
#define SHARD_POS_SIDE 81
#define SHARD_POS_PLY 82
#define SHARD_POS_HAND_BLACK 84
#define SHARD_POS_HAND_WHITE 88

/* Row widths and the feature-set version: stored in every shard, and what a
 * reader expects. */
typedef struct {
    int32_t features_version;
    int32_t planes_bytes; /* bytes of packed feature bits a row (>= 1) */
    int32_t hand_n;       /* hand floats a row (>= 0) */
    int32_t legal_bytes;  /* bytes of legal-mask bits a row (>= 0) */
} shard_format_t;

/* The position column's content, unpacked. */
typedef struct {
    uint8_t board[81]; /* Piece codes, as Position.board */
    uint8_t side;      /* 0 Black, 1 White */
    uint16_t ply;      /* game ply */
    uint32_t hand[2];  /* Black's, White's (engine Hand) */
} shard_position_t;

void shard_position_pack(const shard_position_t *p, uint8_t out[SHARD_POSITION_BYTES]);
void shard_position_unpack(const uint8_t in[SHARD_POSITION_BYTES], shard_position_t *p);
/* NULL if the bytes are a well-formed position column entry (piece codes,
 * side, zero tail); otherwise what is wrong. Does not check shogi rules. */
const char *shard_position_check(const uint8_t in[SHARD_POSITION_BYTES]);

/* "shards/c0003_000042.safetensors" for cycle 3, seq 42. Returns buf. */
char *shard_path_format(char *buf, size_t len, int32_t cycle, int64_t seq);

/* ---- builder -------------------------------------------------------------------- */
/* One position, as self-play hands it over. Arrays are copied. */
typedef struct {
    const uint8_t *planes;        /* (planes_bytes) */
    const float *hand;            /* (hand_n); NULL ok when hand_n == 0 */
    const uint8_t *legal;         /* (legal_bytes); NULL ok when legal_bytes == 0 */
    const uint16_t *policy_label; /* (policy_n) labels < SHARD_LABEL_NB */
    const float *policy_prob;     /* (policy_n) finite, >= 0 */
    int32_t policy_n;             /* 0: no policy target at this row */
    float root_q;                 /* side to move's view, [-1, 1] */
    uint16_t ply;                 /* moves of this game before the position */
    uint16_t move;                /* engine Move played */
    const uint8_t *position;      /* (SHARD_POSITION_BYTES), shard_position_pack */
    const float *surprise;        /* (1) the row's policy surprise, finite, >= 0; NULL: unknown */
    const uint8_t *hcp;           /* (SHARD_HCP_BYTES) version-2 builders: the position as hcp
                                     (planes, hand, legal and position are then not read) */
} shard_row_t;

typedef struct shard_builder shard_builder_t;

/* A version-1 builder (the older layout with derived columns: tests that
 * make old runs). NULL with err for a format out of range or out of memory. */
shard_builder_t *shard_builder_new(const shard_format_t *fmt, char *err, size_t errlen);
/* A version-2 builder: rows carry only row->hcp of the position columns.
 * set 0: games, as self-play and record imports make them (add_row,
 * end_game); set 1: a position set (shard_builder_add_set_row only; no
 * games, no game_id or policy columns). NULL with err when out of memory. */
shard_builder_t *shard_builder_new_compact(int set, char *err, size_t errlen);
/* A position set's row: hcp (checked to decode), the move, the result from
 * the side to move (-1, 0, 1), root_q in [-1, 1], ply as in the header,
 * reason: how the record's game ended (db_reason_t; hcpe's result flags).
 * 0, or -1 with err (nothing appended). */
int shard_builder_add_set_row(shard_builder_t *b, const uint8_t hcp[SHARD_HCP_BYTES], uint16_t move, int8_t result,
                              float root_q, uint16_t ply, uint8_t reason, char *err, size_t errlen);
int shard_builder_version(const shard_builder_t *b); /* SHARD_VERSION or SHARD_VERSION_V1 */
void shard_builder_free(shard_builder_t *b); /* NULL ok */
/* Drops every row and game, keeps the memory. */
void shard_builder_reset(shard_builder_t *b);
int64_t shard_builder_rows(const shard_builder_t *b);  /* rows of finished games */
int32_t shard_builder_games(const shard_builder_t *b); /* finished games */
int64_t shard_builder_nnz(const shard_builder_t *b);
/* The finished games as db rows (first_row, row_count filled in; strings owned
 * by the builder; id = what the game_id column will hold, see below). */
const db_game_t *shard_builder_game(const shard_builder_t *b, int32_t i);

/* Appends a row to the game being built (one is opened by the first row).
 * Returns 0, or -1 with err for a bad row (nothing appended) or out of memory. */
int shard_builder_add_row(shard_builder_t *b, const shard_row_t *row, char *err, size_t errlen);
/* Closes the open game (it may have no rows). game gives model_id,
 * start_sfen, moves, plies, result (from Black: db_result_t) and reason;
 * strings are copied; first_row, row_count, ids are ignored. Sets each row's
 * result from its side to move. Returns 0, or -1 with err (bad result or
 * reason, out of memory: the game stays open). Sets each row's moves_left to
 * game->plies - its ply (the plies left until the game's end; capped at
 * INT16_MAX), or unknown (shard_builder_length_unknown). */
int shard_builder_end_game(shard_builder_t *b, const db_game_t *game, char *err, size_t errlen);
/* The open game's length is not its real one (a position imported as a game
 * of one move: hcpe, psv): shard_builder_end_game gives its rows moves_left
 * SHARD_MOVES_LEFT_UNKNOWN instead of plies - ply. */
void shard_builder_length_unknown(shard_builder_t *b);
/* Drops the open game's rows (an aborted game that is not to be kept). */
void shard_builder_abort_game(shard_builder_t *b);
/* The game_id column holds first_id + i for finished game i (default 0:
 * plain indices). shard_commit sets it to the ids koma.db will assign. */
void shard_builder_set_first_game_id(shard_builder_t *b, int64_t first_id);

/* Writes the finished games durably (temporary name, fsync, rename) to path.
 * Fails if a game is open. Returns 0, or -1 with err = "<path>: ...". */
int shard_write(const shard_builder_t *b, const char *path, char *err, size_t errlen);

/* ---- registration --------------------------------------------------------------- */
/* The id koma.db will give the next game inserted: games are only ever
 * inserted (never deleted) with ids 1, 2, ..., so it is their count + 1.
 * Registration checks the guess inside its transaction. */
db_status_t shard_next_game_id(db_t *db, int64_t *id, char *err, size_t errlen);

/* Registers the already written shard file <run_dir>/<rel_path> (shard_write
 * of b after shard_builder_set_first_game_id(b, shard_next_game_id)) and b's
 * games in ONE transaction: the shards row, every games row with its
 * first_row/row_count, or nothing. Fails (nothing on record) when the ids the
 * database assigns differ from b's game_id column. The file is left as it is
 * on failure. out (NULL ok) gets the shards row. Returns the status with
 * err = "<what>: ..." (the database's message on a database failure).
 * Records no intent: prefer shard_commit, which survives a crash between the
 * rename of the file and the transaction. */
db_status_t shard_register(db_t *db, const char *run_dir, const char *rel_path, int32_t cycle,
                           const shard_builder_t *b, db_shard_t *out, char *err, size_t errlen);
/* The whole protocol on the thread that owns db (the writer thread): sets
 * b's game ids to shard_next_game_id, then db_shard_commit: intent row,
 * shard_write to <run_dir>/<rel_path> (directories created), size and XXH3
 * measured, shard + games inserted in one transaction; on failure the file
 * and the intent are removed and nothing is on record. A full disk is
 * DB_FULL. rel_path must not exist yet. out (NULL ok) gets the shards row. */
db_status_t shard_commit(db_t *db, const char *run_dir, const char *rel_path, int32_t cycle,
                         shard_builder_t *b, db_shard_t *out, char *err, size_t errlen);

/* shard_commit for a position set's builder (shard_builder_new_compact(1)):
 * the shard row (no games) and the set's progress (set: records_done,
 * positions, rejected, finished as they are with this shard) in ONE
 * transaction (db_shard_commit_set). */
db_status_t shard_commit_set(db_t *db, const char *run_dir, const char *rel_path, int32_t cycle,
                             const shard_builder_t *b, const db_set_t *set, db_shard_t *out, char *err,
                             size_t errlen);

/* Called once per submitted shard on the writer thread, after shard_commit
 * (status DB_OK and the shards row) or with its failure (DB_CANCELLED at
 * shutdown); shard is NULL unless status is DB_OK. Must not block long. */
typedef void (*shard_done_fn)(void *user, int status, const char *err, const db_shard_t *shard);

/* Queues shard_commit of b on the writer thread. On DB_OK the job owns b and
 * frees it when done; otherwise (DB_TIMEOUT: queue full, DB_CANCELLED:
 * stopping, DB_INVALID, DB_ERROR: no memory) nothing is queued, done is not
 * called and b stays the caller's. run_dir and rel_path are copied. */
int shard_submit(db_writer_t *w, const char *run_dir, const char *rel_path, int32_t cycle,
                 shard_builder_t *b, shard_done_fn done, void *user, int64_t timeout_ms);

/* ---- reader ----------------------------------------------------------------------- */
typedef struct shard shard_t;

enum {
    SHARD_OPEN_NO_CHECKSUM = 1, /* skip the XXH3 of every column (the value checks still run) */
};

/* Column pointers into the mapping (aligned; see the table above). */
typedef struct {
    const uint8_t *planes;          /* (R, planes_bytes) version 1, else NULL */
    const float *hand;              /* (R, hand_n) version 1, else NULL */
    const uint8_t *legal;           /* (R, legal_bytes) version 1, else NULL */
    const uint32_t *policy_offsets; /* (R), NULL in a position set */
    const uint16_t *policy_label;   /* (nnz) */
    const float *policy_prob;       /* (nnz) version 1, else NULL (shard_row_probs reads either version) */
    const uint16_t *policy_q16;     /* (nnz) version 2's 16-bit shares, else NULL */
    const int8_t *result;           /* (R) */
    const float *root_q;            /* (R) */
    const uint16_t *ply;            /* (R) */
    const int64_t *game_id;         /* (R) version 1, else NULL (shard_row_game reads either version) */
    const int64_t *game_ids;        /* (games) version 2's game shards: each game's id, increasing */
    const uint32_t *game_rows;      /* (games) version 2's game shards: each game's rows, in row order */
    const uint16_t *move;           /* (R) */
    const uint8_t *position;        /* (R, SHARD_POSITION_BYTES) version 1, else NULL */
    const uint8_t *hcp;             /* (R, SHARD_HCP_BYTES) version 2, else NULL */
    const float *surprise;          /* (R), or NULL: the shard has no surprise column */
    const int16_t *moves_left;      /* (R), or NULL: the shard has no moves_left column */
    const uint8_t *reason;          /* (R) a position set's end reasons (db_reason_t), or NULL */
} shard_columns_t;

/* Maps and validates path: checksums (unless SHARD_OPEN_NO_CHECKSUM), kind,
 * version (1 or 2), a version-1 shard's format against expect (NULL: accept
 * any; the caller reads shard_format; a version-2 shard's format is expect's,
 * or all zero without one), every column's dtype and shape, the row and entry
 * counts, offsets, labels, probabilities, results, values, positions (a
 * version-2 position must decode), game ids.
 * NULL with err = "<path>: <what>" for a bad shard. */
shard_t *shard_open(const char *path, const shard_format_t *expect, uint32_t flags, char *err,
                    size_t errlen);
void shard_close(shard_t *s); /* NULL ok */

const char *shard_path(const shard_t *s);
int shard_version(const shard_t *s); /* SHARD_VERSION_V1 or SHARD_VERSION */
int shard_is_set(const shard_t *s);  /* a position set (version 2, koma.set "1") */
const shard_format_t *shard_format(const shard_t *s);
int64_t shard_rows(const shard_t *s);
int64_t shard_games(const shard_t *s);
int64_t shard_nnz(const shard_t *s);
const shard_columns_t *shard_columns(const shard_t *s);
/* The lambda-return of every row's value (a short-term value target, as
 * KataGo's and TD(lambda)'s): out[r] = (1-lambda) * sum_k lambda^k * q(r+k)
 * + lambda^n * z(r), over the rows r+k (k = 0..n-1) of the same game from r
 * to the game's last row in the shard, each q = root_q in the side to move
 * at r's view (negated when the ply difference is odd), z(r) = result[r].
 * lambda 0 gives root_q, lambda 1 the result; in between it weights the
 * search values of the next ~1/(1-lambda) plies and then the result.
 * out holds shard_rows(s) floats, each in [-1, 1]. */
void shard_q_lambda(const shard_t *s, float lambda, float *out);
/* Row r's policy surprise (>= 0), or SHARD_SURPRISE_UNKNOWN (no column, or
 * none recorded for the row). */
float shard_row_surprise(const shard_t *s, int64_t r);
/* Row r's plies left until its game's end (>= 0), or
 * SHARD_MOVES_LEFT_UNKNOWN (no column, or unknown for the row). */
int32_t shard_row_moves_left(const shard_t *s, int64_t r);
/* The row whose target is row r's opponent-reply target: r + 1 when it is
 * the same game one ply later and has a policy target or a known move label
 * (move_label[r + 1] < SHARD_LABEL_NB; move_label: (rows) each row's played
 * move's label in its side to move's view, SHARD_LABEL_UNKNOWN where unknown,
 * as train/window.c derives them from the move and position columns; NULL:
 * none known); else -1. Its target: its policy entries, or (none) a one-hot
 * on its move label. */
int64_t shard_row_reply(const shard_t *s, const uint16_t *move_label, int64_t r);
/* Policy entries [*begin, *end) of row r (0 <= r < rows). */
void shard_row_policy(const shard_t *s, int64_t r, int64_t *begin, int64_t *end);
/* The id (games.id) of row r's game; -1 in a position set (rows stand alone). */
int64_t shard_row_game(const shard_t *s, int64_t r);
/* Row r's target probabilities, one per entry of shard_row_policy, into out:
 * a float column's values as stored; 16-bit shares (policy_q16) divided by
 * their row's sum (a row of zeros stays zeros). */
void shard_row_probs(const shard_t *s, int64_t r, float *out);

/* ---- training batches ------------------------------------------------------------- */
/* Host buffers for up to cap rows and nnz_cap policy entries, laid out as
 * nn_batch_t wants them; one allocation carved into the fields. */
typedef struct {
    shard_format_t fmt;
    int32_t cap;              /* rows the buffers hold */
    int64_t nnz_cap;          /* policy entries the buffers hold */
    int32_t B;                /* rows gathered so far */
    uint8_t *planes;          /* (cap, planes_bytes) */
    float *hand;              /* (cap, hand_n) */
    uint8_t *legal;           /* (cap, legal_bytes) */
    uint32_t *policy_offsets; /* (cap + 1); [B] = entries gathered so far */
    uint16_t *policy_label;   /* (nnz_cap) */
    float *policy_prob;       /* (nnz_cap) */
    int8_t *result;           /* (cap) */
    float *root_q;            /* (cap) */
    float *moves_left;        /* (cap) plies left, -1 unknown */
    uint32_t *opp_offsets;    /* (cap + 1) the opponent-reply targets (shard_row_reply's row's) */
    uint16_t *opp_label;      /* (nnz_cap) */
    float *opp_prob;          /* (nnz_cap) */
    uint8_t *position;        /* (cap, SHARD_HCP_BYTES) a version-2 row's position */
    uint8_t *expand;          /* (cap) 1: planes, hand and legal of the row are still to be made from
                                 position (train_batch_expand); 0: copied from a version-1 shard */
    int32_t pending;          /* rows with expand 1 */
    void *mem_;               /* private */
} shard_batch_t;

/* nnz_cap <= 0: cap * SHARD_LABEL_NB, enough for any rows. NULL with err for
 * bad sizes or out of memory. */
shard_batch_t *shard_batch_new(const shard_format_t *fmt, int32_t cap, int64_t nnz_cap, char *err,
                               size_t errlen);
void shard_batch_free(shard_batch_t *b); /* NULL ok */
void shard_batch_clear(shard_batch_t *b); /* B = 0 */

/* Appends rows[0..n) of s (any order, repeats allowed) at batch rows
 * [B, B+n): planes, hand, legal (version 1; a version-2 row's position goes
 * to out->position with expand set, its planes, hand and legal being the
 * caller's to make: train_batch_expand), result, root_q, moves_left copied, policy
 * entries appended with offsets (B+1), and the opponent-reply targets (the
 * policy entries of shard_row_reply(s, move_label, row)'s row, or a one-hot
 * on its move label when it has none; none without a reply row) with
 * theirs. move_label as shard_row_reply's (NULL: replies only where the next
 * row has a policy target). A position set's row takes a one-hot on
 * move_label[row] as its policy target (none where unknown or move_label is
 * NULL). Gather from several shards by calling once per shard. Returns 0, or
 * -1 with err (nothing appended) when a row is out of range, the batch is
 * full, or a version-1 shard's format differs from the batch's. */
int shard_row_batch_labels(const shard_t *s, const uint16_t *move_label, const int64_t *rows, int32_t n,
                           shard_batch_t *out, char *err, size_t errlen);
/* shard_row_batch_labels without move labels. */
int shard_row_batch(const shard_t *s, const int64_t *rows, int32_t n, shard_batch_t *out, char *err,
                    size_t errlen);
/* The gathered rows as the trainer's batch (pointers into b). */
nn_batch_t shard_batch_view(const shard_batch_t *b);

#endif
