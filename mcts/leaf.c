/* leaf.c - game rules at tree leaves (see leaf.h). */
#include "mcts/leaf.h"

#include <stddef.h>

#include "engine/mate1.h"
#include "engine/movegen.h"
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

bool mcts_leaf_end(const pos_t *pos, int32_t max_ply, rules_declare_t rule, float *v) {
    if (max_ply > 0 && pos_game_ply(pos) - 1 >= max_ply) {
        *v = 0.0f;
        return true;
    }
    if (rules_can_declare_by(pos, rule)) {
        *v = 1.0f;
        return true;
    }
    return false;
}

bool mcts_leaf_mate1(pos_t *pos) { return mate1_find(pos) != MOVE_NONE; }

/* A repetition inside the line ends it (as in the tree: rules_repetition_first). */
static bool repeats(const pos_t *pos) { return rules_repetition_first(pos, -1, false, NULL) != RULES_REP_NONE; }

/* Every move of list (the side to move's) lets the opponent mate in one. */
static bool all_allow_mate1(pos_t *pos, const move_list_t *list) {
    bool mated = true;
    for (int32_t j = 0; j < list->n && mated; j++) {
        pos_do_move(pos, list->moves[j]);
        mated = !repeats(pos) && mate1_find(pos) != MOVE_NONE;
        pos_undo_move(pos);
    }
    return mated;
}

bool mcts_leaf_mated2(pos_t *pos, const move_list_t *legal, int32_t max_ply) {
    if (!pos_in_check(pos) || legal->n == 0) return false;
    if (max_ply > 0 && pos_game_ply(pos) - 1 + 2 > max_ply) return false;
    if (pos_hist_len(pos) >= POS_HIST_MAX - 4) return false;
    return all_allow_mate1(pos, legal);
}

move_t mcts_leaf_mate3(pos_t *pos, const move_list_t *legal, int32_t max_ply) {
    /* The mating move is the third from here; the max-ply draw must not come first. */
    if (max_ply > 0 && pos_game_ply(pos) - 1 + 3 > max_ply) return MOVE_NONE;
    if (pos_hist_len(pos) >= POS_HIST_MAX - 4) return MOVE_NONE;
    for (int32_t i = 0; i < legal->n; i++) {
        move_t m = legal->moves[i];
        if (!pos_gives_check(pos, m)) continue;
        pos_do_move(pos, m);
        bool mated = !repeats(pos);
        if (mated) {
            /* no evasion is a mate in one (mate1 answers it first, except a pawn drop, never generated) */
            move_list_t ev;
            movegen_legal(pos, &ev);
            mated = all_allow_mate1(pos, &ev);
        }
        pos_undo_move(pos);
        if (mated) return m;
    }
    return MOVE_NONE;
}
