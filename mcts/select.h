/* select.h - the arithmetic of tree search, on plain arrays: random numbers,
 * Dirichlet and Gumbel noise, the PUCT exploration schedule, the Gumbel
 * sequential-halving schedule, completed Q values and the improved policy.
 *
 * Owns: formulas and their numeric conventions (no tree, no positions).
 * Does not own: walking the tree (mcts.c), the network.
 *
 * Values are in [-1, 1] from the point of view of the player choosing among
 * the children (the parent's side to move).
 */
#ifndef KOMA_MCTS_SELECT_H
#define KOMA_MCTS_SELECT_H

#include <stdint.h>

/* ---- random numbers (xoshiro256**, seeded through splitmix64) ------------- */
typedef struct {
    uint64_t s[4];
} mcts_rng_t;

void mcts_rng_seed(mcts_rng_t *r, uint64_t seed);
uint64_t mcts_rng_u64(mcts_rng_t *r);
/* Uniform in [0, 1). */
double mcts_rng_uniform(mcts_rng_t *r);
/* Gamma(alpha, 1), alpha > 0 (Marsaglia-Tsang; alpha < 1 by boosting). */
double mcts_rng_gamma(mcts_rng_t *r, double alpha);
/* Standard Gumbel(0, 1): -log(-log(U)). */
double mcts_rng_gumbel(mcts_rng_t *r);
/* out (n) ~ Dirichlet(alpha, ..., alpha); sums to 1. */
void mcts_dirichlet(mcts_rng_t *r, double alpha, int32_t n, float *out);

/* ---- PUCT ----------------------------------------------------------------- */
/* AlphaZero's exploration schedule c(N) = c_init + log((N + c_base + 1) / c_base). */
static inline float mcts_puct_c(float c_init, float c_base, float parent_visits);

/* ---- Gumbel root search (Danihelka et al. 2022; mctx's schedule) ---------- */
/* The number of visits an action must already have to be considered at
 * simulation index sim (0-based) of a sequential-halving search over m
 * sampled actions with the given budget (mctx get_sequence_of_considered_visits,
 * computed phase by phase instead of tabled, so any budget works).
 * m <= 1 gives sim (one action takes every visit). */
int64_t mcts_gumbel_considered_visit(int32_t m, int64_t budget, int64_t sim);

/* Completed Q values, transformed by sigma (mctx qtransform_completed_by_mix_value):
 *   q_i     visits[i] > 0 ? q[i] : v_mix
 *   v_mix = (v_net + sum_b N_b * sum_{b visited} p_b q_b / sum_{b visited} p_b) / (1 + sum_b N_b)
 *   q'    = rescaled to [0, 1] by the min and max over all n (when rescale and max > min),
 *           else (q + 1) / 2
 *   out_i = (c_visit + max_b N_b) * c_scale * q'_i
 * q (n): value of each child for the chooser (only read where visits > 0);
 * visits (n): completed visits; prior (n): probabilities; v_net: the network
 * value of the parent for its side to move. Returns v_mix. */
float mcts_completed_q(int32_t n, const float *q, const int32_t *visits, const float *prior, float v_net,
                       float c_visit, float c_scale, int rescale, float *out);

/* Softmax of x (n) into out (n), numerically stable; out may be x. */
void mcts_softmax(int32_t n, const float *x, float *out);

/* ---- implementation of the inline ------------------------------------------ */
#include <math.h>
static inline float mcts_puct_c(float c_init, float c_base, float parent_visits) {
    return c_init + logf((parent_visits + c_base + 1.0f) / c_base);
}

#endif
