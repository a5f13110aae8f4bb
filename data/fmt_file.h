/* fmt_file.h - the field's binary training files read into checked games,
 * and their records written: dlshogi's hcpe and hcpe3, YaneuraOu's
 * PackedSfenValue (psv).
 *
 * Owns: the record layouts below, the check of every position and move
 * against the rules (engine/), the mapping of each format's result fields
 * to a result and a db_reason_t, and the encoders export uses. Does not own:
 * the bit layouts of positions and moves (data/fmt_pack.h), the run and its
 * shards (tools/import.c and tools/export.c put games there and take them
 * out), the rules (engine/).
 *
 * ---- Records (little-endian, packed) -------------------------------------------------
 * hcpe (dlshogi HuffmanCodedPosAndEval, 38 bytes a position):
 *   hcp[32] (fmt_pack.h), eval s16 (side to move's view), bestMove16 u16
 *   (cshogi move16), gameResult u8, dummy u8 (0).
 * hcpe3 (dlshogi HuffmanCodedPosAndEval3, a game a record):
 *   hcp[32] of the start position, moveNum u16, result u8, opponent u8
 *   (0 = self-play), then moveNum times: selectedMove16 u16, eval s16,
 *   candidateNum u16, and candidateNum times (move16 u16, visitNum u16).
 * psv (YaneuraOu PackedSfenValue, 40 bytes a position):
 *   sfen[32] (PackedSfen), score s16, move u16 (Koma's move_t encoding),
 *   gamePly u16, game_result s8 (side to move: 1 won, -1 lost, 0 draw),
 *   padding u8 (0).
 * hcpe/hcpe3 result byte: bits 0-1 0 draw, 1 Black won, 2 White won; bit 2
 * sennichite (with a winner: perpetual check), bit 3 entering-king
 * declaration, bit 4 the move limit (dlshogi cppshogi.h).
 *
 * ---- Games -------------------------------------------------------------------------------
 * hcpe3: one game a record, every move checked; a move with candidates gets
 * their visit counts as its policy target (prob = visits / sum, as dlshogi's
 * loader), a move without candidates (candidateNum 0: an opening move, a
 * fast search) has no policy target, exactly as Koma's own rows without
 * one; the eval is the search value before the move. Reason: sennichite
 * (perpetual_check when someone won), declaration, max_ply from the flags;
 * else checkmate when the last position has no legal move, resign when
 * someone won, abort (a draw) otherwise.
 * hcpe and psv hold positions, not games: each record is a game of one
 * move from that position (its SFEN the start, ply 1 for hcpe, gamePly for
 * psv, 0 read as 1), the move a one-hot policy target, the eval the search
 * value and the result the value target. Import's dedup then drops a position
 * seen before with the same move (and, for psv, the same ply).
 * A position with fewer than 40 pieces (handicaps, tsume) is written with
 * cshogi's piece-box codes; YaneuraOu versions without a piece box cannot
 * read such psv records (Koma and cshogi can). Reason: the hcpe flags as above, else resign
 * (someone won) or abort (draw); psv: resign or abort.
 *
 * ---- Errors --------------------------------------------------------------------------------
 * A record that cannot be read (a bad code, an illegal position or move, a
 * candidate that is not legal, visits that sum to 0, an unknown result) is
 * rejected alone with a message naming the file, the record (1-based) and its
 * byte offset; the next record is read. A file whose size is not a whole
 * number of records (hcpe, psv) has its tail rejected; an hcpe3 record cut
 * by the end of the file is rejected (REC_ERR_TRUNCATED). Readers never read
 * past the file and never loop forever.
 */
#ifndef KOMA_DATA_FMT_FILE_H
#define KOMA_DATA_FMT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "data/db.h"
#include "data/fmt_pack.h"
#include "data/record.h"
#include "engine/position.h"
#include "engine/sfen.h"

#define FMT_HCPE_BYTES 38
#define FMT_PSV_BYTES 40
#define FMT_HCPE3_HEAD 36
#define FMT_HCPE3_MOVE 6
#define FMT_HCPE3_CAND 4

typedef enum { FMT_HCPE = 0, FMT_HCPE3, FMT_PSV, FMT_NB } fmt_kind_t;

const char *fmt_kind_name(fmt_kind_t k);              /* "hcpe", "hcpe3", "psv" */
int fmt_kind_parse(const char *name, fmt_kind_t *out); /* 0, or -1 */
/* By extension (.hcpe .hcpe3 .psv .bin): 0 and *out, or -1. ".bin" is psv
 * (YaneuraOu's gensfen names its files so). */
int fmt_kind_guess(const char *path, fmt_kind_t *out);

/* One game, valid during the sink's call. */
typedef struct {
    int64_t record;                 /* 1-based record index in the file */
    int64_t offset;                 /* its byte offset */
    char start_sfen[SFEN_MAX_LEN];  /* "startpos" or an SFEN with its ply */
    const move_t *moves;            /* (n_moves) legal */
    int32_t n_moves;
    const float *values;            /* (n_moves) search value before each move, side to move's view */
    const int16_t *evals;           /* (n_moves) the file's integer evals */
    const uint32_t *cand_begin;     /* (n_moves + 1): move i's candidates are [cand_begin[i], cand_begin[i+1]) */
    const move_t *cand_moves;       /* legal moves */
    const uint16_t *cand_visits;    /* sum > 0 for each move that has candidates */
    int32_t result;                 /* db_result_t, from Black */
    db_reason_t reason;
    uint8_t result_byte;            /* the file's result field as read */
} fmt_game_t;

typedef struct {
    int (*game)(void *user, const fmt_game_t *g); /* nonzero: stop reading */
    void (*reject)(void *user, const rec_reject_t *r); /* game = record index; NULL ok */
    void *user;
} fmt_sink_t;

/* Reads every record of data[0..len) (name in messages). Returns 0 when read
 * to the end, 1 when the sink stopped it, -1 out of memory (also a reject). */
int fmt_parse(const char *name, const void *data, size_t len, fmt_kind_t k, const fmt_sink_t *sink);
/* Same for a file (mapped); an unreadable file is one REC_ERR_IO reject. */
int fmt_parse_file(const char *path, fmt_kind_t k, const fmt_sink_t *sink);

/* ---- writing (export) ---------------------------------------------------------------------- */
/* The result byte of hcpe/hcpe3 for a game's result and reason. */
uint8_t fmt_result_byte(int32_t result, db_reason_t reason);
/* One hcpe record: 0, or -1 when the position has no hcp (see fmt_pack_encode). */
int fmt_hcpe_record(const pos_t *pos, float value, move_t m, uint8_t result_byte, uint8_t out[FMT_HCPE_BYTES]);
/* One psv record; result: the side to move's (+1, 0, -1). */
int fmt_psv_record(const pos_t *pos, float value, move_t m, int32_t result, uint8_t out[FMT_PSV_BYTES]);
/* The hcpe3 head of a game from start. */
int fmt_hcpe3_head(const pos_t *start, int32_t n_moves, uint8_t result_byte, uint8_t out[FMT_HCPE3_HEAD]);
/* Visit counts for a probability target (0 stays 0): the smallest integers
 * with (float)v[i] / (float)sum == prob[i] for every i when such counts exist
 * with the smallest count <= 1024 (a target read from visits gives those
 * visits back, in lowest terms); else counts proportional to prob (the
 * largest 10000) in lowest terms, taken to the smallest counts with the same
 * float quotients. Either way reading the counts back (v / sum) and calling
 * this again gives the same counts. */
void fmt_visits_of_probs(const float *prob, int32_t n, uint16_t *visits);

void fmt_board_of_pos(const pos_t *pos, fmt_board_t *b);

#endif
