/* mate1.h - mate in one: is the side to move mated, and is there a move
 * that mates at once.
 *
 * Owns: the fast mate-in-one finder used at MCTS leaves, its slow reference,
 * and the fast "mated now" test.
 * Does not own: deeper mate search, repetition or declaration (rules.h).
 *
 * Coverage (mate1_find and mate1_find_reference find the same positions):
 * every legal mating move - board moves with or without promotion, drops of
 * lance, knight, silver, gold, bishop and rook, discovered checks, double
 * checks, king moves that discover check, and moves made while in check.
 * Pawn drops are never returned (a mating pawn drop is uchifuzume, illegal);
 * pawn moves on the board that mate are. When the side to move is in check
 * only evasions are considered (the move must be legal).
 * Where a plain and a promoting move of a pawn, bishop or rook both exist,
 * mate1_find tries the promoting one, and the plain one only where it could
 * mate when the promoting one does not (see mate1.c); so it may return the
 * promoting move where the reference returns the plain one.
 */
#ifndef KOMA_ENGINE_MATE1_H
#define KOMA_ENGINE_MATE1_H

#include "engine/position.h"

/* A legal move that mates the opponent at once, or MOVE_NONE. pos is used
 * as scratch (moves made and taken back) and is unchanged on return. */
move_t mate1_find(pos_t *pos);
/* The generic version: every legal move that gives check is made and the
 * reply count taken with movegen. Slow; the tests' reference. */
move_t mate1_find_reference(pos_t *pos);
/* Is the side to move checkmated: in check with no legal move? (A side not
 * in check is never "mated" here, even without legal moves: see
 * rules_has_legal_move.) Returns at the first legal evasion found, so it is
 * much cheaper than generating evasions. */
bool mate1_is_mated(const pos_t *pos);

#endif
