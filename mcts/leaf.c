/* leaf.c - game rules at tree leaves (see leaf.h). */
#include "mcts/leaf.h"

#include <stddef.h>

#include "engine/mate1.h"
#include "engine/rules.h"

bool mcts_leaf_repetition(const pos_t *pos, float *v) {
    if (pos_hist_len(pos) >= POS_HIST_MAX - 2) { /* no room to go deeper: call it a draw */
        *v = 0.0f;
        return true;
    }
    switch (rules_repetition_first(pos, -1, false, NULL)) {
    case RULES_REP_DRAW: *v = 0.0f; return true;
    case RULES_REP_WIN: *v = 1.0f; return true;
    case RULES_REP_LOSS: *v = -1.0f; return true;
    default: return false;
    }
}

bool mcts_leaf_end(const pos_t *pos, int32_t max_ply, float *v) {
    if (max_ply > 0 && pos_game_ply(pos) - 1 >= max_ply) {
        *v = 0.0f;
        return true;
    }
    if (rules_can_declare(pos)) {
        *v = 1.0f;
        return true;
    }
    return false;
}

bool mcts_leaf_mate1(pos_t *pos) { return mate1_find(pos) != MOVE_NONE; }
