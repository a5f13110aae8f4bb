/* movegen.h - move generation.
 *
 * Owns: legal move generation, legal move counting (for perft's last ply),
 * and a pseudo-legal generator (for tests and pos_is_legal users).
 * Does not own: making moves or legality of a single move (position.h).
 *
 * Legal moves include every optional non-promotion (pawn, lance to rank 2-3,
 * knight to rank 3, silver, bishop, rook), never a move that leaves a piece
 * unable to move (pawn/lance to the last rank or knight to the last two
 * without promoting), no nifu, no pawn-drop mate, no self-check.
 */
#ifndef KOMA_ENGINE_MOVEGEN_H
#define KOMA_ENGINE_MOVEGEN_H

#include "engine/position.h"

/* Fills list with every legal move; returns list->n. Order: board moves, then drops. */
int32_t movegen_legal(const pos_t *pos, move_list_t *list);
/* Number of legal moves, without writing them (same count as movegen_legal). */
int32_t movegen_count_legal(const pos_t *pos);
/* Every pseudo-legal move: piece movement, promotion, nifu and dead-square
 * rules obeyed, but the own king may be left attacked and pawn drops may mate.
 * pos_is_legal filters these down to exactly movegen_legal's set. */
int32_t movegen_pseudo(const pos_t *pos, move_list_t *list);
/* Is m in the list? */
bool movegen_list_contains(const move_list_t *list, move_t m);

/* Leaf count of the legal move tree to depth (perft), counting the last ply
 * without making its moves. depth 0 returns 1. */
uint64_t movegen_perft(pos_t *pos, int32_t depth);

#endif
