/* fmt_pack.h - the 32-byte positions and 16-bit moves of the shogi field's
 * training data: Apery/dlshogi's HuffmanCodedPos ("hcp", in hcpe and hcpe3
 * files) and YaneuraOu's PackedSfen (in PackedSfenValue "psv" files), their
 * move16 encodings, and the mapping between their integer evaluations and
 * Koma's search value in [-1, 1].
 *
 * Owns: bit-exact encode/decode of both 256-bit layouts, the move16
 * conversions, the eval <-> value maps. Does not own: the files (data/fmt_file.h),
 * the rules (a decoded board is checked by the SFEN reader, engine/sfen.h).
 *
 * ---- The two layouts (both written LSB first: bit i is byte i/8, bit i%8) -----
 * 1 bit side to move (0 Black), 7 bits Black's king square, 7 bits White's
 * (squares as engine/types.h: (file-1)*9 + rank-1, which is Apery's and
 * YaneuraOu's SQ_11 = 0 numbering), then every other square 0..80 in order
 * (the kings' skipped) as a prefix code of its piece, then the pieces in hand
 * (Black's, then White's; pawn, lance, knight, silver, gold, bishop, rook as
 * cshogi writes them; readers take any order: YaneuraOu's own packer writes
 * bishop and rook before gold, so a psv record from its gensfen whose hand
 * holds a gold with a bishop or rook is read the same but written back by
 * Koma in cshogi's order; YaneuraOu and cshogi read both) and the pieces in neither
 * ("piece box", positions with fewer than 40 pieces), up to exactly 256 bits.
 * The codes are cshogi's tables (src/position.cpp): hcp's HuffmanCodedPos
 * boardCodeTable/handCodeTable/pieceBoxCodeTable; PackedSfen's are
 * YaneuraOu's sfen_packer.cpp (piece code, then a promotion bit except for
 * gold, then a colour bit; a hand piece drops the code's last bit).
 *
 * ---- Moves ----------------------------------------------------------------
 * psv move16 is Koma's move_t bit for bit (to 0-6, from or dropped piece
 * type 7-13, drop 14, promote 15). hcpe/hcpe3 move16 (cshogi's Move & 0xffff):
 * to 0-6, from 7-13 where a drop has from = 80 + piece type (81..87),
 * promote bit 14.
 *
 * ---- Values ---------------------------------------------------------------
 * dlshogi: value = sigmoid(eval / 756.0864962951762), so q = 2 value - 1 =
 * tanh(eval / (2 * 756.08...)); eval +-30000 (and beyond) is q = +-1.
 * YaneuraOu (psv): the learner's sigmoid(score / 600); +-32000 is q = +-1.
 * fmt_value_to_eval picks the integer whose value, read back as a float,
 * gives that integer again (a fixed point), so an exported file imported and
 * exported again is the same bytes. Integers beyond about +-8000 do not all
 * survive a float: a foreign file's eval of 12345 comes back within a few
 * points (the value is kept, the exact integer is not).
 */
#ifndef KOMA_DATA_FMT_PACK_H
#define KOMA_DATA_FMT_PACK_H

#include <stdint.h>

#include "engine/types.h"

#define FMT_PACK_BYTES 32

typedef enum { FMT_PACK_HCP = 0, FMT_PACK_PSFEN = 1 } fmt_pack_t;

/* A position as the layouts hold it: no ply. */
typedef struct {
    uint8_t board[81]; /* engine piece codes (types.h), 0 = empty */
    hand_t hand[2];    /* Black's, White's */
    uint8_t side;      /* 0 Black, 1 White */
} fmt_board_t;

/* Decodes in[32]. NULL on success, else what is wrong ("bad code at bit 97",
 * "king square 93", "29 pawns") - the rules are not checked here. */
const char *fmt_pack_decode(fmt_pack_t k, const uint8_t in[FMT_PACK_BYTES], fmt_board_t *out);
/* Encodes b into out[32]. 0, or -1 when b has no place in 256 bits (a king
 * missing, more pieces of a kind than a game has). */
int fmt_pack_encode(fmt_pack_t k, const fmt_board_t *b, uint8_t out[FMT_PACK_BYTES]);

/* cshogi move16 -> Koma move (MOVE_NONE for 0 or a code out of range: from
 * 88..127, a square >= 81, a promoted drop); and back. Legality is the caller's. */
move_t fmt_move_from_cshogi(uint16_t m16);
uint16_t fmt_move_to_cshogi(move_t m);

/* The value scales. */
#define FMT_EVAL_DLSHOGI 756.0864962951762 /* eval of a 73.1% win rate: sigmoid(1) */
#define FMT_EVAL_DLSHOGI_MAX 30000
#define FMT_EVAL_YANEURAOU 600.0
#define FMT_EVAL_YANEURAOU_MAX 32000

/* eval (side to move's view) -> q in [-1, 1]. */
float fmt_eval_to_value(int32_t eval, double scale, int32_t max);
/* q -> the eval a file holds (see Values above), in [-max, max]; NaN -> 0. */
int32_t fmt_value_to_eval(float q, double scale, int32_t max);

#endif
