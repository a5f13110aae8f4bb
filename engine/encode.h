/* encode.h - the neural-network view of a position: input feature planes,
 * hand values, move labels and the legal-move mask.
 *
 * Owns: the feature set (ENC_FEATURES_VERSION), the move <-> label map and
 * the legal mask, all from the side to move's view.
 * Does not own: tensors or the packed-bit expansion (nn/), game rules.
 *
 * ---- The side to move's view --------------------------------------------
 * Everything is seen by the side to move ("us"). For Black the squares are
 * unchanged; for White the board is rotated 180 degrees (view square =
 * sq_flip(sq)) and the colours swap, so "us" always plays up the board
 * (towards rank a) and the side-to-move block of planes comes first. A
 * position and its colour-flipped mirror (board rotated, colours and hands
 * swapped, other side to move) encode to identical bits and floats.
 * The encoding depends only on board, hands and side to move (not on the
 * history or the move number), so it can be recomputed from an SFEN.
 *
 * ---- Packed planes (format fixed by nn/backend.h) --------------------------
 * Bit i = plane * 81 + view_square is byte i >> 3, bit (i & 7), LSB first.
 * Planes, version 1 (68). Block b = 0 for us (ENC_PLANE_US), b = 1 for them
 * (ENC_PLANE_THEM), each ENC_SIDE_PLANES = 33 planes starting at 33 * b:
 *   +0  .. +13  pieces of that side, one plane per type PAWN, LANCE, KNIGHT,
 *               SILVER, BISHOP, ROOK, GOLD, KING, PRO_PAWN, PRO_LANCE,
 *               PRO_KNIGHT, PRO_SILVER, HORSE, DRAGON (plane +pt-1)
 *   +14 .. +27  squares attacked by that side's pieces of each type (same
 *               order; "attacked" includes squares holding own pieces)
 *   +28 .. +30  squares attacked by at least 1, 2, 3 of that side's pieces
 *   +31         that side's pieces pinned to its own king
 *   +32         files on which that side has no unpromoted pawn (whole files;
 *               where nifu would not forbid that side a pawn drop)
 *   66          side to move is in check (all 81 bits)
 *   67          constant ones (lets convolutions with zero padding see the edge)
 *
 * ---- Hand values ------------------------------------------------------------
 * ENC_HAND = 14 floats: us then them, each 7 kinds in piece_type_t order PAWN,
 * LANCE, KNIGHT, SILVER, BISHOP, ROOK, GOLD, as count / most of that kind
 * (P/18, L/4, N/4, S/4, B/2, R/2, G/4), so each lies in [0, 1].
 *
 * ---- Move labels --------------------------------------------------------------
 * label = direction * 81 + view destination square, 0..2186.
 * Board moves: the direction is the step from the origin to the destination
 * in the side to move's view ("up" = towards rank a of the view, "left" =
 * towards higher files, i.e. the mover's left hand):
 *   0 UP, 1 UP_LEFT, 2 UP_RIGHT, 3 LEFT, 4 RIGHT, 5 DOWN, 6 DOWN_LEFT,
 *   7 DOWN_RIGHT, 8 KNIGHT_LEFT (2 up 1 left), 9 KNIGHT_RIGHT (2 up 1 right);
 *   + 10 when the move promotes (10..19).
 * A slider's label is unique: only the nearest piece along the ray behind
 * the destination can reach it. Drops: 20 + (piece_type_t - PAWN), i.e.
 * 20 P, 21 L, 22 N, 23 S, 24 B, 25 R, 26 G.
 * The legal mask uses the packed format with bit = label (27 planes).
 *
 * Thread safety: all functions are pure readers of the position (engine_init
 * must have run, which setting any position does).
 */
#ifndef KOMA_ENGINE_ENCODE_H
#define KOMA_ENGINE_ENCODE_H

#include "engine/position.h"

#define ENC_FEATURES_VERSION 1
#define ENC_SIDE_PLANES 33
#define ENC_PLANE_US 0
#define ENC_PLANE_THEM ENC_SIDE_PLANES
/* Offsets inside one side's block. */
#define ENC_OFF_PIECE 0   /* + pt - 1, pt = PAWN..DRAGON */
#define ENC_OFF_ATTACK 14 /* + pt - 1 */
#define ENC_OFF_COUNT 28  /* + k - 1: attacked by >= k pieces, k = 1..3 */
#define ENC_OFF_PINNED 31
#define ENC_OFF_NO_PAWN_FILE 32
#define ENC_PLANE_IN_CHECK (2 * ENC_SIDE_PLANES)
#define ENC_PLANE_ONES (2 * ENC_SIDE_PLANES + 1)
#define ENC_PLANES (2 * ENC_SIDE_PLANES + 2) /* 68 */
#define ENC_HAND 14
#define ENC_PACKED_BYTES ((ENC_PLANES * 81 + 7) / 8)
#define ENC_LABEL_NB 2187 /* 27 directions x 81 destination squares */
#define ENC_LEGAL_BYTES ((2187 + 7) / 8)
#define ENC_DIR_NB 27
#define ENC_DIR_PROMOTE 10 /* added to a board direction when the move promotes */
#define ENC_DIR_DROP 20    /* + piece_type_t - PAWN */

/* Writes the planes (all ENC_PACKED_BYTES bytes, unused tail bits zero) and
 * the ENC_HAND hand values of pos, from the side to move's view. */
void encode_position(const pos_t *pos, uint8_t packed[ENC_PACKED_BYTES], float hand[ENC_HAND]);
/* Label 0..2186 of a legal (or pseudo-legal) move, side-to-move view; -1 for
 * MOVE_NONE / MOVE_NULL or a board move whose origin and destination are on
 * no line or knight jump. */
int32_t encode_move_label(const pos_t *pos, move_t m);
/* The legal move with that label, or MOVE_NONE (label out of range, no such
 * move, or not legal here). */
move_t encode_label_move(const pos_t *pos, int32_t label);
/* Bit label set for every legal move, all others (and the tail bits) zero. */
void encode_legal_mask(const pos_t *pos, uint8_t mask[ENC_LEGAL_BYTES]);
/* The same from a list of legal moves the caller already generated
 * (movegen_legal), skipping the generation. */
void encode_legal_mask_list(const pos_t *pos, const move_list_t *list, uint8_t mask[ENC_LEGAL_BYTES]);
/* Is bit i set in a packed buffer (planes or mask)? */
static inline bool encode_bit(const uint8_t *packed, int32_t i) { return (packed[i >> 3] >> (i & 7)) & 1; }

#endif
