/* leaf.h - what the game rules say about a position reached inside the tree.
 *
 * Owns: the tree's reading of engine/rules.h and engine/mate1.h at a leaf:
 *  - repetition at its first recurrence (rules_repetition_first over the
 *    tree path and the game history): a draw, or a loss for the side that
 *    gave check with every move of the cycle. Superior/inferior hands are
 *    not scored (the network sees the material);
 *  - max ply (a draw) and the entering-king declaration under the search's
 *    rule (a win for the side to move; never under RULES_DECLARE_NONE),
 *    judged once the side to move is known to have a legal move;
 *  - the history bound of Position (a draw, so the tree never overflows it);
 *  - mate in one for the side to move (a win);
 *  - mate in three for the side to move (a win): a check after which every
 *    evasion allows a mate in one, with no repetition on the way and the
 *    mate before the max-ply draw (dlshogi checks its leaves the same way);
 *  - with it, the other side of that line: a side to move in check whose
 *    every evasion allows a mate in one (a loss). Without it a search would
 *    find the quiet moves before a mate in three (their replies end in
 *    resolved wins) sooner than the mating check itself, whose evasions the
 *    network would judge.
 * Does not own: the rules themselves.
 */
#ifndef KOMA_MCTS_LEAF_H
#define KOMA_MCTS_LEAF_H

#include <stdbool.h>

#include "engine/position.h"
#include "engine/rules.h"

/* Before move generation: repetition and the history bound. If the game is
 * over, returns true and *v = its value for the side to move (1, 0, -1). */
bool mcts_leaf_repetition(const pos_t *pos, float *v);
/* For a side to move with at least one legal move: max ply (max_ply > 0)
 * and declaration under rule (rules_can_declare_by). Same convention. */
bool mcts_leaf_end(const pos_t *pos, int32_t max_ply, rules_declare_t rule, float *v);
/* Does the side to move have a mate in one? */
bool mcts_leaf_mate1(pos_t *pos);
/* The first check of a mate in three for the side to move (see above), or
 * MOVE_NONE. legal: its legal moves (the caller generated them). pos is
 * scratch, unchanged on return. Call it after mcts_leaf_mate1 said no: a
 * mate in one is not reported. */
move_t mcts_leaf_mate3(pos_t *pos, const move_list_t *legal, int32_t max_ply);
/* Is the side to move in check, with every evasion (legal: its legal moves,
 * at least one) allowing a mate in one, no repetition on the way and the
 * mate before the max-ply draw? pos is scratch, unchanged on return. */
bool mcts_leaf_mated2(pos_t *pos, const move_list_t *legal, int32_t max_ply);

#endif
