/* leaf.h - what the game rules say about a position reached inside the tree.
 *
 * Owns: the tree's reading of engine/rules.h and engine/mate1.h at a leaf:
 *  - repetition at its first recurrence (rules_repetition_first over the
 *    tree path and the game history): a draw, or a loss for the side that
 *    gave check with every move of the cycle. Superior/inferior hands are
 *    not scored (the network sees the material);
 *  - max ply (a draw) and the entering-king declaration (a win for the side
 *    to move), judged once the side to move is known to have a legal move;
 *  - the history bound of Position (a draw, so the tree never overflows it);
 *  - mate in one for the side to move (a win).
 * Does not own: the rules themselves.
 */
#ifndef KOMA_MCTS_LEAF_H
#define KOMA_MCTS_LEAF_H

#include <stdbool.h>

#include "engine/position.h"

/* Before move generation: repetition and the history bound. If the game is
 * over, returns true and *v = its value for the side to move (1, 0, -1). */
bool mcts_leaf_repetition(const pos_t *pos, float *v);
/* For a side to move with at least one legal move: max ply (max_ply > 0)
 * and declaration. Same convention. */
bool mcts_leaf_end(const pos_t *pos, int32_t max_ply, float *v);
/* Does the side to move have a mate in one? */
bool mcts_leaf_mate1(pos_t *pos);

#endif
