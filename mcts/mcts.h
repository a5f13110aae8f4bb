/* mcts.h - Monte Carlo tree search over one game, evaluated in batches by its caller.
 *
 * Owns: the search tree (a preallocated node/edge pool per tree), PUCT and
 * Gumbel root selection, virtual loss, Dirichlet noise, move temperature,
 * playout cap randomization, tree reuse between moves, terminal and
 * mate-in-one leaves, and the search result (move, policy target, value, PV).
 * Does not own: the network (mcts/ never includes nn/: it hands out encoded
 * leaves and takes back plain float arrays), game records, threads (one tree
 * belongs to one thread at a time; only the cache and the stop flag are shared).
 *
 * ---- The batching protocol ----------------------------------------------------
 *   mcts_tree_t *t = mcts_tree_new(&params, cache);          // once per game slot
 *   mcts_tree_set_position(t, &pos);                      // new game
 *   loop over moves:
 *     mcts_search_begin(t, &limits);                      // one move's search
 *     while (!mcts_search_done(t)) {
 *         int32_t n = mcts_collect(t, 32, reqs);          // descend with virtual loss
 *         ... put reqs[i].packed / reqs[i].hand into the batch, evaluate ...
 *         for each i: mcts_deliver(t, &reqs[i], policy + 2187 * i, wdl + 3 * i);
 *     }
 *     mcts_search_result(t, &res);                        // move, policy target, value
 *     mcts_tree_advance(t, move_played);                  // keeps the played subtree
 * A caller driving many games collects from each tree into one batch and may
 * collect again from a tree whose earlier requests are still on the device:
 * requests stay valid until delivered, in any order. mcts_collect returns 0
 * when everything left is in flight (or the search stopped); leaves that need
 * no network (terminal, mate in one, cache hits) are resolved inside it.
 * Every collected request must be delivered before mcts_tree_advance or the
 * next mcts_search_begin. mcts_tree_set_position abandons requests in flight:
 * delivering one afterwards does nothing and returns false.
 *
 * ---- Memory ---------------------------------------------------------------------
 * One allocation per tree, made by mcts_tree_new: node_limit nodes (48 bytes)
 * and edge_limit edges (12 bytes; one per legal move of every expanded node,
 * about 80 in a middle game, so with the default edge_limit of 48 per node
 * the edge pool usually fills first: about 630 bytes per node in all).
 * Pages are touched only as the tree grows. When either pool is full the search stops
 * (MCTS_STOP_POOL) with what it has; mcts_tree_advance compacts the kept
 * subtree to the front of both pools. A Position (about 115 KiB) is kept per
 * tree. Nothing is allocated per playout.
 *
 * ---- Values ---------------------------------------------------------------------
 * The network's value head gives W/D/L logits from the side to move; the tree
 * keeps v = W - L and the draw probability. Every node's sums are from the
 * side to move at that node. Terminal leaves: no legal move = loss (mate);
 * repetition (the leaf position occurred before, in the tree path or the game)
 * = draw, or a loss for the side that gave check on every move of the cycle;
 * declaration win (under params.declare), max ply: as engine/rules says; a draw is worth
 * params.draw_value[side to move] (0 unless set: USI Contempt). With leaf_mate 1 or 3, a leaf
 * whose side to move has a mate in one (or three) is a win without asking the
 * network.
 *
 * ---- Moves left (lc0's moves-left head) ------------------------------------------
 * An answer may carry the network's estimate of the plies left until the game
 * ends (mcts_request_t.moves_left; NAN: none, a net without the head). Every
 * node keeps the mean over its visits of the plies left from its position:
 * a leaf's estimate, plus one per ply up the path; a terminal leaf 0, a leaf
 * mate in one 1, mated in two 2, mate in three 3, a cache hit the cached
 * estimate. Where a node's mean is known and |Q| > ml_threshold, selection
 * adds lc0's moves-left utility to each visited child's Q (PUCT; Gumbel: the
 * completed Q): M = clamp(ml_slope * (m_child - m_node), -ml_max_effect,
 * ml_max_effect) * -sign(q) * (ml_constant + ml_scaled * q' + ml_quadratic * q'^2),
 * q the child's value for the chooser, q' = max(0, |q| - ml_threshold) /
 * (1 - ml_threshold): fewer plies left are better when winning, more when
 * losing. Off with ml_max_effect or ml_slope 0, and wherever no estimate
 * came: the search is then the same, visit for visit, as without it.
 *
 * ---- Selection --------------------------------------------------------------
 * PUCT: Q(a) + c(N) P(a) sqrt(N) / (1 + N(a)), c(N) = c_init + log((N + c_base + 1) / c_base);
 * unvisited children get Q = Q(parent) - fpu * sqrt(visited prior mass)
 * (fpu_root at the root); each visit in flight counts as a loss of
 * virtual_loss for the chooser. Root: Dirichlet noise on full searches when
 * params.noise is on (alpha = noise_alpha, or noise_alpha_scale / legal moves).
 * Gumbel (root_mode MCTS_ROOT_GUMBEL): Gumbel-top-m sampling and sequential
 * halving over the visit budget at the root (mctx's schedule), final move
 * argmax(g + logits + sigma(completed Q)) among the most visited, policy
 * target softmax(logits + sigma(completed Q)); interior nodes use mctx's
 * deterministic selection argmax(pi'(a) - N(a) / (1 + sum N)) when
 * gumbel_interior is on, else PUCT. The Gumbel noise g is drawn on full
 * searches with params.noise on; otherwise g = 0 (greedy, deterministic).
 */
#ifndef KOMA_MCTS_MCTS_H
#define KOMA_MCTS_MCTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/encode.h"
#include "engine/position.h"
#include "engine/rules.h"
#include "mcts/cache.h"

enum {
    MCTS_MOVES_MAX = 600, /* > 593, the most legal moves of any position */
    MCTS_PV_MAX = 32
};

typedef enum { MCTS_ROOT_PUCT = 0, MCTS_ROOT_GUMBEL = 1 } mcts_root_mode_t;

typedef struct {
    mcts_root_mode_t root_mode; /* MCTS_ROOT_PUCT */
    /* PUCT */
    float c_init;           /* 1.25 */
    float c_base;           /* 19652 */
    float fpu_reduction;    /* 0.2: unvisited Q = parent Q - fpu * sqrt(visited prior mass) */
    float fpu_root;         /* 0.1: the same at the root */
    float virtual_loss;     /* 1.0: value each visit in flight counts as, a loss for the chooser */
    float policy_temp;      /* 1.0: softmax temperature of the network's move logits */
    /* root noise (full searches only) */
    bool noise;             /* false: Dirichlet (PUCT) / Gumbel noise (Gumbel) at the root */
    float noise_alpha;      /* 0.15 */
    float noise_alpha_scale;/* 0: when > 0, alpha = noise_alpha_scale / legal moves (e.g. 10) */
    float noise_weight;     /* 0.25 */
    /* move choice (PUCT): sample proportionally to N^(1/T) while game ply <= temp_plies */
    float move_temp;        /* 1.0 */
    int32_t move_temp_plies;/* 0 (never) */
    /* Gumbel */
    int32_t gumbel_m;       /* 16 sampled root actions */
    float gumbel_c_visit;   /* 50 */
    float gumbel_c_scale;   /* 0.1 (with Q min-max rescaled to [0, 1], as mctx) */
    bool gumbel_rescale;    /* true */
    bool gumbel_interior;   /* true: mctx interior selection; false: PUCT below the root */
    /* playout cap randomization (KataGo): a search whose limits give no visit
     * count is full with probability full_prob (visits_full, noise, a policy
     * training target) and otherwise fast (visits_fast, no noise, no target). */
    int32_t visits_full;    /* 800 */
    int32_t visits_fast;    /* 100 */
    float full_prob;        /* 1.0 */
    /* leaves and pool */
    int32_t leaf_mate;      /* 1: a leaf whose side to move mates in one is a win, no network; 3: in one or
                               three (mcts/leaf.h); 0: neither */
    int32_t max_ply;        /* RULES_MAX_PLY_DEFAULT (320): leaves after that many moves are draws; 0 = none */
    rules_declare_t declare;/* RULES_DECLARE_CSA27: a leaf whose side to move may declare under this rule is a
                               win; RULES_DECLARE_NONE: never (USI EnteringKingRule) */
    /* moves-left utility (lc0's MovesLeft* defaults; see "Moves left" above) */
    float ml_max_effect;    /* 0.0345: cap of the utility; 0 = off */
    float ml_threshold;     /* 0.8: |Q| of the parent above which it applies */
    float ml_slope;         /* 0.0027: utility per ply of difference; 0 = off */
    float ml_constant;      /* 0 */
    float ml_scaled;        /* 1.6521 */
    float ml_quadratic;     /* -0.6521 */
    float draw_value[COLOR_NB]; /* {0, 0}: value (W - L scale) of a drawn leaf (repetition, max ply) for
                                   its side to move, by colour; USI Contempt c gives the engine's colour
                                   -c and the other +c. Self-play keeps 0: a draw is worth nothing. */
    bool encode_leaves;     /* true: requests carry packed planes and hand values */
    bool single_move_stop;  /* true: a root with one legal move needs no visits */
    int32_t node_limit;     /* 65536 nodes in the pool */
    int64_t edge_limit;     /* 0: node_limit * 48 edges (legal moves of expanded nodes) */
    int32_t search_batch;   /* 16: leaves per evaluator call in mcts_search */
    uint64_t seed;          /* 1: random numbers (noise, playout cap, move temperature) */
} mcts_params_t;

void mcts_params_default(mcts_params_t *p);

/* Why a search stopped. */
typedef enum {
    MCTS_STOP_NONE = 0,   /* still running */
    MCTS_STOP_VISITS,     /* the visit budget is spent */
    MCTS_STOP_FLAG,       /* *limits.stop became nonzero */
    MCTS_STOP_TIME,       /* a deadline passed */
    MCTS_STOP_POOL,       /* the node or edge pool is full */
    MCTS_STOP_TERMINAL,   /* the root has no legal move or the game is over */
    MCTS_STOP_SINGLE,     /* the root has one legal move */
    MCTS_STOP_NB
} mcts_stop_t;

const char *mcts_stop_name(mcts_stop_t s);

typedef struct {
    int64_t visits;           /* playouts this search; 0: playout cap randomization decides */
    int32_t full;             /* with visits > 0: 1 full search (noise, target), 0 fast */
    int64_t soft_deadline_ms; /* compat_now_ms() time; 0 = none. Past it the search stops
                                 when the most visited move is also the best by Q
                                 (+ the moves-left utility, where selection adds it) */
    int64_t hard_deadline_ms; /* 0 = none. Past it the search stops */
    const atomic_int *stop;   /* NULL = none; nonzero stops the search */
} mcts_limits_t;

/* A leaf for the network. Valid from mcts_collect until delivered. */
typedef struct {
    uint64_t key;             /* Zobrist key of the leaf position */
    int32_t n_moves;          /* legal moves of the leaf, >= 1 */
    const move_t *moves;        /* (n_moves) in move-generation order */
    const uint16_t *labels;   /* (n_moves) encode_move_label of each move */
    uint8_t packed[ENC_PACKED_BYTES]; /* encode_position (when params.encode_leaves) */
    float hand[ENC_HAND];
    /* The answer's moves-left estimate (plies from the leaf until the game
     * ends), read by mcts_deliver*: mcts_collect sets NAN (none); a caller
     * with a moves-left head writes it before delivering (mcts_batch does). */
    float moves_left;
    int32_t node_;            /* private */
    uint32_t epoch_;          /* private: tree reset counter, catches stale requests */
} mcts_request_t;

/* Search result. Arrays hold every legal root move, in move-generation order. */
typedef struct {
    move_t best;                /* the move to play (MOVE_NONE if the root has none) */
    move_t best_greedy;         /* the most visited move (Gumbel: the final move) */
    int32_t n;                /* legal root moves */
    move_t moves[MCTS_MOVES_MAX];
    int32_t labels[MCTS_MOVES_MAX];   /* encode_move_label */
    float policy[MCTS_MOVES_MAX];     /* training target, sums to 1: visit shares (PUCT)
                                          or softmax(logits + sigma(completed Q)) (Gumbel) */
    int32_t visits[MCTS_MOVES_MAX];   /* completed visits of each child */
    float q[MCTS_MOVES_MAX];          /* mean value of each child for the root's side (0 unvisited) */
    float prior[MCTS_MOVES_MAX];      /* network prior (without noise) */
    float root_q;             /* mean value of all root visits for the side to move, W - L */
    float root_wdl[3];        /* mean W, D, L for the side to move */
    float root_moves_left;    /* mean plies left until the game ends over the root's visits (NAN: no
                                 estimate, a net without the moves-left head; lc0's `movesleft`) */
    float policy_q;           /* sum_a policy(a) q(a), unvisited q = mctx's v_mix: the value of
                                 the target policy (for Gumbel, where root_q also averages the
                                 halving's exploration visits, the better value estimate) */
    int64_t root_visits;      /* completed visits of the root (with reused ones) */
    int64_t playouts;         /* playouts this search */
    bool full_search;         /* the policy is a training target */
    mcts_stop_t stop;
    int32_t pv_len;
    move_t pv[MCTS_PV_MAX];     /* most visited line from the root */
    int32_t nodes;            /* nodes in the pool */
    int64_t edges;            /* edges in the pool */
    int64_t cache_hits;       /* this search */
    int64_t collisions;       /* this search */
} mcts_result_t;

typedef struct mcts_tree mcts_tree_t;

/* A tree with a pool sized by params (copied). cache may be NULL and may be
 * shared by any number of trees and threads. NULL when out of memory. */
mcts_tree_t *mcts_tree_new(const mcts_params_t *params, mcts_cache_t *cache);
void mcts_tree_free(mcts_tree_t *t); /* NULL ok */
const mcts_params_t *mcts_tree_params(const mcts_tree_t *t);
/* The line that starts with root move `first`: it, then the most visited
 * child at each node (mcts_search_result's PV rule), at most max moves
 * (MCTS_PV_MAX fits). 0 when first is not a root move or the root is not
 * expanded. For analysis lines of other root moves (USI MultiPV). */
int32_t mcts_tree_pv(const mcts_tree_t *t, move_t first, move_t *pv, int32_t max);
/* Replaces the parameters that do not size the pool (node/edge limits and
 * search_batch are kept). */
void mcts_tree_set_params(mcts_tree_t *t, const mcts_params_t *params);

/* Sets the root to pos (copied with its history, which repetition checks use)
 * and empties the tree. */
void mcts_tree_set_position(mcts_tree_t *t, const pos_t *pos);
/* Plays m at the root. Keeps the subtree below m when it was searched (its
 * visits and values carry over; the rest of the pool is compacted) and
 * returns true; otherwise starts an empty tree and returns false. m must be
 * legal at the root. */
bool mcts_tree_advance(mcts_tree_t *t, move_t m);
/* The root position (with its history). */
const pos_t *mcts_tree_position(const mcts_tree_t *t);

/* ---- batched search ------------------------------------------------------- */
/* Starts a search at the root. limits may be NULL (playout cap randomization
 * picks the visits). */
void mcts_search_begin(mcts_tree_t *t, const mcts_limits_t *limits);
/* Descends up to max_leaves times and writes the leaves that need the
 * network into out; returns their number. */
int32_t mcts_collect(mcts_tree_t *t, int32_t max_leaves, mcts_request_t *out);
/* The network's answer for one request: policy_logits (2187, indexed by
 * encode_move_label), wdl_logits (3: win, draw, loss for the leaf's side to
 * move). Expands the leaf, backs the value up and removes its virtual loss.
 * Returns false (and does nothing) for a request the tree abandoned. */
bool mcts_deliver(mcts_tree_t *t, const mcts_request_t *req, const float *policy_logits, const float *wdl_logits);
/* The same with one logit per legal move (req->n_moves, in req->moves order). */
bool mcts_deliver_moves(mcts_tree_t *t, const mcts_request_t *req, const float *move_logits, const float *wdl_logits);
/* The search has stopped and no request is in flight. */
bool mcts_search_done(const mcts_tree_t *t);
/* Requests collected and not yet delivered. */
int32_t mcts_pending(const mcts_tree_t *t);
/* Fills res (may be called at any time; a running search is summarized). */
void mcts_search_result(mcts_tree_t *t, mcts_result_t *res);

/* ---- synchronous search ------------------------------------------------------ */
/* Evaluates n requests: writes policy_logits (n, 2187) and wdl_logits (n, 3). */
typedef void (*mcts_eval_fn_t)(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n,
                           float *policy_logits, float *wdl_logits);
/* Runs a whole search (begin, collect/evaluate/deliver in batches of
 * params.search_batch, result). */
void mcts_search(mcts_tree_t *t, const mcts_limits_t *limits, mcts_eval_fn_t eval, void *user, mcts_result_t *res);
/* The same with moves-left estimates: moves_left (n) comes filled with NAN
 * (none); the evaluator writes plies left for the leaves it knows. */
typedef void (*mcts_eval_ml_fn_t)(void *user, mcts_tree_t *t, const mcts_request_t *reqs, int32_t n,
                                  float *policy_logits, float *wdl_logits, float *moves_left);
void mcts_search_ml(mcts_tree_t *t, const mcts_limits_t *limits, mcts_eval_ml_fn_t eval, void *user,
                    mcts_result_t *res);

/* ---- inspection ------------------------------------------------------------------ */
/* Rebuilds the position of a request's leaf (root position + path moves). */
void mcts_request_position(const mcts_tree_t *t, const mcts_request_t *req, pos_t *out);
/* Checks every tree invariant (visit sums, virtual loss, parent links,
 * pool bounds, priors); returns NULL when all hold, else a static
 * description of the first fault. With pending requests only the checks
 * that hold mid-search are made. */
const char *mcts_tree_validate(const mcts_tree_t *t);
/* Nodes in use. */
int32_t mcts_tree_nodes(const mcts_tree_t *t);

#endif
