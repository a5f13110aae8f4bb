/* mcts.c - the search tree: pool, descent with virtual loss, leaf
 * classification, expansion, backup, root preparation (noise, Gumbel),
 * results and tree reuse (see mcts.h for the protocol and conventions).
 *
 * Storage: one allocation per tree holds the node array, the edge arrays
 * (structure of arrays: move, label, prior, child) and a scratch table for
 * compaction. Nodes are created when first reached and get their edges at
 * the same moment (a pending or expanded node owns edge_n consecutive
 * edges), so node order and edge order agree: compaction slides both down
 * in one pass. A child always has a larger index than its parent.
 */
#include "mcts/mcts.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "engine/mate1.h"
#include "engine/movegen.h"
#include "engine/rules.h"
#include "mcts/select.h"
#include "mcts/leaf.h"

enum {
    NODE_NEW = 0,      /* the root before its first evaluation */
    NODE_PENDING = 1,  /* edges made, waiting for the network */
    NODE_EXPANDED = 2, /* priors set */
    NODE_TERMINAL = 3  /* value fixed (v_net), no edges */
};

typedef struct {
    int32_t n;            /* completed visits */
    int32_t vl;           /* visits in flight through this node */
    double w;             /* sum of values, for this node's side to move */
    float d;              /* sum of draw probabilities */
    float m;              /* mean plies left until the game ends over the visits, from this
                             position (NAN once an answer without an estimate came) */
    float v_net;          /* network value at expansion, or the terminal value */
    int32_t parent;       /* -1 for the root */
    uint32_t edge_begin;  /* first edge */
    uint16_t edge_n;      /* legal moves (0 for a terminal node) */
    uint16_t parent_edge; /* index of this node among its parent's edges */
    uint8_t state;
    uint8_t mate;         /* terminal by a leaf mate check: 1 / 3 the side to move mates in one / three,
                             2 it is mated in two (mcts/leaf.h) */
    uint8_t pad_[2];
} mcts_node_t;

enum { COLL_MAX = 4096 };

struct mcts_tree {
    mcts_params_t p;
    mcts_cache_t *cache;
    pos_t pos; /* the root position; descents do and undo moves on it */

    void *mem;
    mcts_node_t *nodes;       /* (node_cap) */
    move_t *e_move;      /* (edge_cap) */
    uint16_t *e_label; /* (edge_cap) */
    float *e_prior;    /* (edge_cap) */
    int32_t *e_child;  /* (edge_cap) -1 = not reached yet */
    int32_t *fwd;      /* (node_cap) compaction scratch */
    int32_t n_nodes, node_cap;
    int64_t n_edges, edge_cap;

    uint32_t epoch;
    int32_t pending;

    /* the current search */
    bool active;
    mcts_stop_t stop;
    int64_t budget, playouts;
    bool full;
    int64_t soft_ms, hard_ms;
    const atomic_int *stop_flag;
    bool root_ready;
    int32_t root_n;
    int32_t gumbel_m;
    double temp_u; /* uniform draw for the move temperature */
    int64_t cache_hits, collisions;
    float root_prior[MCTS_MOVES_MAX]; /* priors with noise (PUCT root) */
    float root_logit[MCTS_MOVES_MAX]; /* log priors (Gumbel) */
    float root_g[MCTS_MOVES_MAX];     /* Gumbel noise */
    int32_t root_sv[MCTS_MOVES_MAX];  /* Gumbel: visits this search, in flight included */
    mcts_rng_t rng;

    /* scratch */
    float sf[3][MCTS_MOVES_MAX];
    int32_t si[MCTS_MOVES_MAX];
    uint16_t sq[MCTS_MOVES_MAX];
    int32_t coll[COLL_MAX];
    int32_t n_coll;

    /* mcts_search's batch */
    mcts_request_t *reqs; /* (search_batch) */
    float *pol;        /* (search_batch, ENC_LABEL_NB) */
    float *wdl;        /* (search_batch, 3) */
    float *ml;         /* (search_batch) moves left */
};

void mcts_params_default(mcts_params_t *p) {
    memset(p, 0, sizeof *p);
    p->root_mode = MCTS_ROOT_PUCT;
    p->c_init = 1.25f;
    p->c_base = 19652.0f;
    p->fpu_reduction = 0.2f;
    p->fpu_root = 0.1f;
    p->virtual_loss = 1.0f;
    p->policy_temp = 1.0f;
    p->noise = false;
    p->noise_alpha = 0.15f;
    p->noise_alpha_scale = 0.0f;
    p->noise_weight = 0.25f;
    p->move_temp = 1.0f;
    p->move_temp_plies = 0;
    p->gumbel_m = 16;
    p->gumbel_c_visit = 50.0f;
    p->gumbel_c_scale = 0.1f;
    p->gumbel_rescale = true;
    p->gumbel_interior = true;
    p->visits_full = 800;
    p->visits_fast = 100;
    p->full_prob = 1.0f;
    p->leaf_mate = 1;
    p->max_ply = RULES_MAX_PLY_DEFAULT;
    p->ml_max_effect = 0.0345f; /* lc0's MovesLeft* defaults */
    p->ml_threshold = 0.8f;
    p->ml_slope = 0.0027f;
    p->ml_constant = 0.0f;
    p->ml_scaled = 1.6521f;
    p->ml_quadratic = -0.6521f;
    p->declare = RULES_DECLARE_CSA27;
    p->encode_leaves = true;
    p->single_move_stop = true;
    p->node_limit = 65536;
    p->edge_limit = 0;
    p->search_batch = 16;
    p->seed = 1;
}

const char *mcts_stop_name(mcts_stop_t s) {
    static const char *names[MCTS_STOP_NB] = {"running", "visits", "stop flag", "time",
                                              "pool full", "terminal", "single move"};
    return (s >= 0 && s < MCTS_STOP_NB) ? names[s] : "?";
}

/* ---- pool ------------------------------------------------------------------ */

static void tree_clear(mcts_tree_t *t) {
    t->n_nodes = 1;
    t->n_edges = 0;
    mcts_node_t *r = &t->nodes[0];
    memset(r, 0, sizeof *r);
    r->parent = -1;
    r->state = NODE_NEW;
    t->epoch++;
    t->pending = 0;
    t->active = false;
    t->root_ready = false;
}

mcts_tree_t *mcts_tree_new(const mcts_params_t *params, mcts_cache_t *cache) {
    mcts_params_t p;
    if (params) p = *params;
    else mcts_params_default(&p);
    if (p.node_limit < 2) p.node_limit = 2;
    if (p.edge_limit <= 0) p.edge_limit = (int64_t)p.node_limit * 48;
    if (p.edge_limit < MCTS_MOVES_MAX) p.edge_limit = MCTS_MOVES_MAX;
    if (p.edge_limit > (int64_t)UINT32_MAX - MCTS_MOVES_MAX) p.edge_limit = (int64_t)UINT32_MAX - MCTS_MOVES_MAX;
    if (p.search_batch < 1) p.search_batch = 1;

    mcts_tree_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->p = p;
    t->cache = cache;
    t->node_cap = p.node_limit;
    t->edge_cap = p.edge_limit;
    /* One block: nodes, fwd, then the edge arrays (largest alignment first). */
    size_t nodes_b = (size_t)t->node_cap * sizeof(mcts_node_t);
    size_t fwd_b = (size_t)t->node_cap * sizeof(int32_t);
    size_t ec = (size_t)t->edge_cap;
    size_t total = nodes_b + fwd_b + ec * (sizeof(float) + sizeof(int32_t) + sizeof(move_t) + sizeof(uint16_t)) + 64;
    t->mem = malloc(total);
    if (!t->mem) {
        free(t);
        return NULL;
    }
    uint8_t *b = t->mem;
    t->nodes = (mcts_node_t *)b;
    b += nodes_b;
    t->fwd = (int32_t *)b;
    b += fwd_b;
    t->e_prior = (float *)b;
    b += ec * sizeof(float);
    t->e_child = (int32_t *)b;
    b += ec * sizeof(int32_t);
    t->e_move = (move_t *)b;
    b += ec * sizeof(move_t);
    t->e_label = (uint16_t *)b;
    mcts_rng_seed(&t->rng, p.seed);
    pos_set_startpos(&t->pos);
    tree_clear(t);
    return t;
}

void mcts_tree_free(mcts_tree_t *t) {
    if (!t) return;
    free(t->reqs);
    free(t->pol);
    free(t->wdl);
    free(t->ml);
    free(t->mem);
    free(t);
}

const mcts_params_t *mcts_tree_params(const mcts_tree_t *t) { return &t->p; }

void mcts_tree_set_params(mcts_tree_t *t, const mcts_params_t *params) {
    mcts_params_t keep = t->p;
    t->p = *params;
    t->p.node_limit = keep.node_limit;
    t->p.edge_limit = keep.edge_limit;
    t->p.search_batch = keep.search_batch;
}

int32_t mcts_tree_nodes(const mcts_tree_t *t) { return t->n_nodes; }
const pos_t *mcts_tree_position(const mcts_tree_t *t) { return &t->pos; }

void mcts_tree_set_position(mcts_tree_t *t, const pos_t *pos) {
    pos_copy(&t->pos, pos);
    tree_clear(t);
}

static int32_t node_new(mcts_tree_t *t, int32_t parent, int32_t parent_edge) {
    if (t->n_nodes >= t->node_cap) return -1;
    int32_t i = t->n_nodes++;
    mcts_node_t *x = &t->nodes[i];
    memset(x, 0, sizeof *x);
    x->parent = parent;
    x->parent_edge = (uint16_t)parent_edge;
    return i;
}

/* ---- values -------------------------------------------------------------- */

/* Mean value of child c for the player choosing it (its parent's side to move). */
static inline float child_q(const mcts_node_t *c) { return c->n > 0 ? (float)(-c->w / c->n) : 0.0f; }

/* lc0's moves-left utility at one parent (mcts.h, "Moves left"). */
typedef struct {
    float parent_m, slope, cap, a_c, a_l, a_q, thr, inv_span;
} ml_util_t;

/* Does the utility apply among x's children? Fills u when it does: it is
 * on, x's plies left are known and |Q(x)| > ml_threshold. */
static inline bool ml_util_at(const mcts_tree_t *t, const mcts_node_t *x, ml_util_t *u) {
    const mcts_params_t *p = &t->p;
    if (!(p->ml_max_effect > 0.0f && p->ml_slope > 0.0f) || x->n == 0 || !isfinite(x->m)) return false;
    if (!(fabs(x->w / x->n) > p->ml_threshold)) return false;
    u->parent_m = x->m;
    u->slope = p->ml_slope;
    u->cap = p->ml_max_effect;
    u->a_c = p->ml_constant;
    u->a_l = p->ml_scaled;
    u->a_q = p->ml_quadratic;
    u->thr = p->ml_threshold > 0.0f && p->ml_threshold < 1.0f ? p->ml_threshold : 0.0f;
    u->inv_span = 1.0f / (1.0f - u->thr);
    return true;
}

/* The utility of visited child c whose value for the chooser is q: fewer
 * plies left than its parent's mean score higher when q > 0, more when q < 0. */
static inline float ml_util(const ml_util_t *u, const mcts_node_t *c, float q) {
    if (c->n == 0 || !isfinite(c->m)) return 0.0f;
    float m = u->slope * (c->m - u->parent_m);
    m = m < -u->cap ? -u->cap : m > u->cap ? u->cap : m;
    if (q > 0.0f) m = -m;
    float a = fabsf(q);
    a = (a > u->thr ? a - u->thr : 0.0f) * u->inv_span;
    return m * (u->a_c + u->a_l * a + u->a_q * a * a);
}

/* v, d from node's side to move, m plies left from its position (NAN:
 * unknown); removes one visit in flight from every node on the path. */
static void backup(mcts_tree_t *t, int32_t node, float v, float d, float m) {
    while (node >= 0) {
        mcts_node_t *x = &t->nodes[node];
        x->n++;
        x->w += v;
        x->d += d;
        x->m += (m - x->m) / (float)x->n;
        x->vl--;
        v = -v;
        m += 1.0f;
        node = x->parent;
    }
}

/* Removes one visit in flight from node and its ancestors (and the Gumbel
 * root count of the root move on that path). */
static void revert_virtual(mcts_tree_t *t, int32_t node) {
    while (node >= 0) {
        mcts_node_t *x = &t->nodes[node];
        x->vl--;
        if (x->parent == 0 && t->p.root_mode == MCTS_ROOT_GUMBEL) t->root_sv[x->parent_edge]--;
        node = x->parent;
    }
}

/* ---- expansion ----------------------------------------------------------- */

static uint32_t moves_check(const move_t *m, int32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) {
        h ^= m[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static void quantize_logits(int32_t n, const float *logits, uint16_t *q) {
    float mx = -FLT_MAX;
    bool any = false;
    for (int32_t i = 0; i < n; i++)
        if (isfinite(logits[i]) && logits[i] > mx) mx = logits[i], any = true;
    for (int32_t i = 0; i < n; i++) {
        float l = logits[i];
        if (!any || l == INFINITY) q[i] = 0;
        else if (!(l == l) || l == -INFINITY) q[i] = 65535; /* NaN or -inf: no mass */
        else {
            double dq = ((double)mx - (double)l) * MCTS_QLOGIT_SCALE;
            q[i] = dq >= 65535.0 ? 65535 : (uint16_t)(dq + 0.5);
        }
    }
}

/* Sets the node's priors from compressed logits and its value from wdl,
 * and marks it expanded. Returns v = W - L; *d = D. */
static float node_expand(mcts_tree_t *t, int32_t node, const uint16_t *q, const float wdl[3], float *d) {
    mcts_node_t *x = &t->nodes[node];
    float *pr = &t->e_prior[x->edge_begin];
    float inv_t = 1.0f / (t->p.policy_temp > 1e-3f ? t->p.policy_temp : 1e-3f);
    double sum = 0.0;
    for (int32_t i = 0; i < x->edge_n; i++) sum += (pr[i] = expf(-(float)q[i] * (inv_t / MCTS_QLOGIT_SCALE)));
    float inv = (float)(1.0 / sum); /* q has a 0, so sum >= 1 */
    for (int32_t i = 0; i < x->edge_n; i++) pr[i] *= inv;
    x->v_net = wdl[0] - wdl[2];
    x->state = NODE_EXPANDED;
    *d = wdl[1];
    return x->v_net;
}

static void set_terminal(mcts_tree_t *t, int32_t node, float v) {
    mcts_node_t *x = &t->nodes[node];
    x->state = NODE_TERMINAL;
    x->v_net = v;
    x->edge_n = 0;
    x->edge_begin = (uint32_t)t->n_edges;
}

enum { LEAF_REQUEST = 0, LEAF_RESOLVED = 1, LEAF_FULL = -1, LEAF_COLLISION = 2, LEAF_REVISIT = 3 };

/* The value of a terminal leaf at t->pos whose rules value is tv: a draw (0)
 * is worth params.draw_value for the side to move; *d = 1 for a draw. */
static float terminal_value(const mcts_tree_t *t, float tv, float *d) {
    *d = tv == 0.0f ? 1.0f : 0.0f;
    return tv == 0.0f ? t->p.draw_value[pos_side_to_move(&t->pos)] : tv;
}

/* Classifies the node whose position t->pos now is: resolves it (terminal,
 * mate in one, cache hit: *v, *d, *m set), writes a request, or reports a full pool. */
static int leaf_eval(mcts_tree_t *t, int32_t node, bool is_root, mcts_request_t *req, float *v, float *d,
                     float *m) {
    *d = 0.0f;
    *m = 0.0f; /* a terminal position: the game is over */
    float tv;
    if (!is_root && mcts_leaf_repetition(&t->pos, &tv)) {
        *v = terminal_value(t, tv, d);
        set_terminal(t, node, *v);
        return LEAF_RESOLVED;
    }
    move_list_t list;
    movegen_legal(&t->pos, &list);
    if (list.n == 0) { /* mate (or no move at all): the side to move loses */
        set_terminal(t, node, -1.0f);
        *v = -1.0f;
        return LEAF_RESOLVED;
    }
    bool end = !is_root && mcts_leaf_end(&t->pos, t->p.max_ply, t->p.declare, &tv);
    uint8_t mate = 0;
    if (!is_root && !end && t->p.leaf_mate >= 1 && mcts_leaf_mate1(&t->pos)) mate = 1;
    if (!is_root && !end && !mate && t->p.leaf_mate >= 3) {
        if (mcts_leaf_mate3(&t->pos, &list, t->p.max_ply) != MOVE_NONE) mate = 3;
        else if (mcts_leaf_mated2(&t->pos, &list, t->p.max_ply)) mate = 2;
    }
    if (mate) end = true, tv = mate == 2 ? -1.0f : 1.0f;
    if (end) {
        *v = terminal_value(t, tv, d);
        *m = (float)mate; /* plies to the mate: 1, 3, or 2 for mated in two */
        set_terminal(t, node, *v);
        t->nodes[node].mate = mate;
        return LEAF_RESOLVED;
    }
    KOMA_ASSERT(list.n <= MCTS_MOVES_MAX);
    if (t->n_edges + list.n > t->edge_cap) return LEAF_FULL;
    mcts_node_t *x = &t->nodes[node];
    x->edge_begin = (uint32_t)t->n_edges;
    x->edge_n = (uint16_t)list.n;
    t->n_edges += list.n;
    move_t *mv = &t->e_move[x->edge_begin];
    uint16_t *lb = &t->e_label[x->edge_begin];
    int32_t *ch = &t->e_child[x->edge_begin];
    for (int32_t i = 0; i < list.n; i++) {
        mv[i] = list.moves[i];
        int32_t l = encode_move_label(&t->pos, list.moves[i]);
        KOMA_ASSERT(l >= 0 && l < ENC_LABEL_NB);
        lb[i] = (uint16_t)l;
        ch[i] = -1;
    }
    uint64_t key = pos_key(&t->pos);
    if (t->cache) {
        float wdl[3];
        if (mcts_cache_get(t->cache, key, moves_check(mv, list.n), list.n, t->sq, wdl, m)) {
            *v = node_expand(t, node, t->sq, wdl, d);
            t->cache_hits++;
            return LEAF_RESOLVED;
        }
    }
    x->state = NODE_PENDING;
    req->key = key;
    req->n_moves = list.n;
    req->moves = mv;
    req->moves_left = NAN;
    req->labels = lb;
    req->node_ = node;
    req->epoch_ = t->epoch;
    if (t->p.encode_leaves) encode_position(&t->pos, req->packed, req->hand);
    return LEAF_REQUEST;
}

/* ---- selection ------------------------------------------------------------- */

static int32_t select_puct(const mcts_tree_t *t, const mcts_node_t *x, const float *prior, float fpu_red) {
    const int32_t *ch = &t->e_child[x->edge_begin];
    float parent_n = (float)(x->n + x->vl);
    float c = mcts_puct_c(t->p.c_init, t->p.c_base, parent_n);
    float cs = c * sqrtf(parent_n);
    float visited = 0.0f;
    for (int32_t i = 0; i < x->edge_n; i++)
        if (ch[i] >= 0 && t->nodes[ch[i]].n + t->nodes[ch[i]].vl > 0) visited += prior[i];
    float parent_q = x->n > 0 ? (float)(x->w / x->n) : 0.0f;
    float fpu = parent_q - fpu_red * sqrtf(visited);
    float vloss = t->p.virtual_loss;
    ml_util_t mu = {0};
    bool ml = ml_util_at(t, x, &mu);
    int32_t best = 0;
    float best_s = -FLT_MAX;
    for (int32_t i = 0; i < x->edge_n; i++) {
        float q, nv = 0.0f;
        const mcts_node_t *cn = ch[i] >= 0 ? &t->nodes[ch[i]] : NULL;
        if (cn && cn->n + cn->vl > 0) {
            nv = (float)(cn->n + cn->vl);
            q = (float)(-cn->w - vloss * cn->vl) / nv;
            if (ml) q += ml_util(&mu, cn, child_q(cn));
        } else {
            q = fpu;
        }
        float s = q + cs * prior[i] / (1.0f + nv);
        if (s > best_s) best_s = s, best = i;
    }
    return best;
}

/* Completed, sigma-transformed Q of node x's children into out (x->edge_n). */
static void node_completed_q(mcts_tree_t *t, const mcts_node_t *x, float *out) {
    const int32_t *ch = &t->e_child[x->edge_begin];
    float *q = t->sf[2];
    int32_t *vis = t->si;
    ml_util_t mu = {0};
    bool ml = ml_util_at(t, x, &mu);
    for (int32_t i = 0; i < x->edge_n; i++) {
        const mcts_node_t *cn = ch[i] >= 0 ? &t->nodes[ch[i]] : NULL;
        vis[i] = cn ? cn->n : 0;
        q[i] = cn ? child_q(cn) : 0.0f;
        if (ml && cn) q[i] += ml_util(&mu, cn, q[i]);
    }
    mcts_completed_q(x->edge_n, q, vis, &t->e_prior[x->edge_begin], x->v_net, t->p.gumbel_c_visit,
                     t->p.gumbel_c_scale, t->p.gumbel_rescale, out);
}

/* mctx's interior rule: argmax pi'(a) - N(a) / (1 + sum N), visits in flight
 * included, pi' = softmax(log prior + sigma(completed Q)). The same numbers
 * as mcts_completed_q + mcts_softmax, computed in one pass over the children
 * with one exp per visited child: every unvisited child shares v_mix, so
 * pi'(a) = prior(a) exp(sigma(q_a) - sigma_max) / Z. */
static int32_t select_gumbel_interior(mcts_tree_t *t, const mcts_node_t *x) {
    const int32_t *ch = &t->e_child[x->edge_begin];
    const float *pr = &t->e_prior[x->edge_begin];
    int32_t *vis = t->si;  /* completed visits */
    float *q = t->sf[0];   /* q of visited children, then their weights */
    int64_t sum_n = 0, sum_nv = 0;
    int32_t max_n = 0;
    double sum_p = 0.0, sum_pq = 0.0, p_unvisited = 0.0;
    float lo = FLT_MAX, hi = -FLT_MAX;
    ml_util_t mu = {0};
    bool ml = ml_util_at(t, x, &mu);
    for (int32_t i = 0; i < x->edge_n; i++) {
        const mcts_node_t *cn = ch[i] >= 0 ? &t->nodes[ch[i]] : NULL;
        vis[i] = cn ? cn->n : 0;
        sum_nv += cn ? cn->n + cn->vl : 0;
        if (vis[i] == 0) {
            p_unvisited += pr[i];
            continue;
        }
        q[i] = child_q(cn);
        if (ml) q[i] += ml_util(&mu, cn, q[i]);
        sum_n += vis[i];
        if (vis[i] > max_n) max_n = vis[i];
        double pp = pr[i] > FLT_MIN ? pr[i] : FLT_MIN;
        sum_p += pp;
        sum_pq += pp * q[i];
        if (q[i] < lo) lo = q[i];
        if (q[i] > hi) hi = q[i];
    }
    float v_mix = sum_n > 0 ? (float)((x->v_net + (double)sum_n * (sum_pq / sum_p)) / (double)(sum_n + 1)) : x->v_net;
    if (p_unvisited > 0.0) {
        if (v_mix < lo) lo = v_mix;
        if (v_mix > hi) hi = v_mix;
    }
    float scale = (t->p.gumbel_c_visit + (float)max_n) * t->p.gumbel_c_scale;
    bool rescale = t->p.gumbel_rescale && hi > lo;
    float a, b; /* sigma(q) = a * q + b */
    if (!t->p.gumbel_rescale) a = scale * 0.5f, b = scale * 0.5f;
    else if (rescale) a = scale / (hi - lo), b = -lo * a;
    else a = 0.0f, b = scale * 0.5f;
    float smax = a * (a >= 0.0f ? hi : lo) + b; /* sigma is increasing: its max is at hi */
    double z = 0.0;
    float w_unvisited = expf(a * v_mix + b - smax);
    z += p_unvisited * w_unvisited;
    for (int32_t i = 0; i < x->edge_n; i++)
        if (vis[i] > 0) z += (q[i] = pr[i] * expf(a * q[i] + b - smax));
    float inv_z = (float)(1.0 / z), inv_n = 1.0f / (1.0f + (float)sum_nv);
    int32_t best = 0;
    float best_s = -FLT_MAX;
    for (int32_t i = 0; i < x->edge_n; i++) {
        float pi = (vis[i] > 0 ? q[i] : pr[i] * w_unvisited) * inv_z;
        int32_t nv = ch[i] >= 0 ? t->nodes[ch[i]].n + t->nodes[ch[i]].vl : 0;
        float s = pi - (float)nv * inv_n;
        if (s > best_s) best_s = s, best = i;
    }
    return best;
}

/* Gumbel score g + logit + sigma(completed Q) of every root move into out. */
static void root_gumbel_scores(mcts_tree_t *t, float *out) {
    const mcts_node_t *r = &t->nodes[0];
    node_completed_q(t, r, out);
    for (int32_t i = 0; i < r->edge_n; i++) out[i] += t->root_g[i] + t->root_logit[i];
}

static int32_t select_gumbel_root(mcts_tree_t *t) {
    const mcts_node_t *r = &t->nodes[0];
    int64_t sim = 0;
    for (int32_t i = 0; i < r->edge_n; i++) sim += t->root_sv[i];
    int64_t cv = mcts_gumbel_considered_visit(t->gumbel_m, t->budget, sim);
    float *sc = t->sf[0];
    root_gumbel_scores(t, sc);
    int32_t best = -1;
    float best_s = -FLT_MAX;
    for (int32_t i = 0; i < r->edge_n; i++)
        if (t->root_sv[i] == cv && (best < 0 || sc[i] > best_s)) best_s = sc[i], best = i;
    if (best < 0) /* off schedule (cannot happen when counts follow it): least visited first */
        for (int32_t i = 0; i < r->edge_n; i++)
            if (t->root_sv[i] <= cv && (best < 0 || sc[i] > best_s)) best_s = sc[i], best = i;
    return best < 0 ? 0 : best;
}

static int32_t select_child(mcts_tree_t *t, int32_t node) {
    const mcts_node_t *x = &t->nodes[node];
    if (t->p.root_mode == MCTS_ROOT_GUMBEL) {
        if (node == 0) return select_gumbel_root(t);
        if (t->p.gumbel_interior) return select_gumbel_interior(t, x);
        return select_puct(t, x, &t->e_prior[x->edge_begin], t->p.fpu_reduction);
    }
    if (node == 0) return select_puct(t, x, t->root_prior, t->p.fpu_root);
    return select_puct(t, x, &t->e_prior[x->edge_begin], t->p.fpu_reduction);
}

/* ---- descent ------------------------------------------------------------------ */

static void undo_moves(mcts_tree_t *t, int32_t depth) {
    for (int32_t i = 0; i < depth; i++) pos_undo_move(&t->pos);
}

/* One playout from the root. Returns LEAF_REQUEST (req written), LEAF_RESOLVED,
 * LEAF_REVISIT (resolved at a terminal node visited before: its exact value
 * backed up once more), LEAF_COLLISION (path left with its virtual visit, node
 * in t->coll) or LEAF_FULL. */
static int descend(mcts_tree_t *t, mcts_request_t *req) {
    int32_t node = 0, depth = 0;
    t->nodes[0].vl++;
    for (;;) {
        mcts_node_t *x = &t->nodes[node];
        if (x->state == NODE_TERMINAL) { /* its mean plies left is its fixed value */
            backup(t, node, x->v_net, x->v_net == 0.0f ? 1.0f : 0.0f, x->m);
            undo_moves(t, depth);
            return LEAF_REVISIT;
        }
        if (x->state == NODE_PENDING) {
            undo_moves(t, depth);
            if (t->n_coll < COLL_MAX) t->coll[t->n_coll++] = node;
            else revert_virtual(t, node);
            return LEAF_COLLISION;
        }
        int32_t e = select_child(t, node);
        uint32_t ei = x->edge_begin + (uint32_t)e;
        if (node == 0 && t->p.root_mode == MCTS_ROOT_GUMBEL) t->root_sv[e]++;
        pos_do_move(&t->pos, t->e_move[ei]);
        depth++;
        int32_t c = t->e_child[ei];
        if (c < 0) {
            c = node_new(t, node, e);
            if (c < 0) {
                undo_moves(t, depth);
                if (node == 0 && t->p.root_mode == MCTS_ROOT_GUMBEL) t->root_sv[e]--;
                revert_virtual(t, node);
                return LEAF_FULL;
            }
            t->nodes[c].vl = 1;
            float v, d, m;
            int r = leaf_eval(t, c, false, req, &v, &d, &m);
            if (r == LEAF_FULL) {
                t->n_nodes--;
                undo_moves(t, depth);
                revert_virtual(t, node);
                if (node == 0 && t->p.root_mode == MCTS_ROOT_GUMBEL) t->root_sv[e]--;
                return LEAF_FULL;
            }
            t->e_child[ei] = c;
            if (r == LEAF_RESOLVED) backup(t, c, v, d, m);
            undo_moves(t, depth);
            return r;
        }
        t->nodes[c].vl++;
        node = c;
    }
}

/* ---- searching ----------------------------------------------------------------- */

static void root_prepare(mcts_tree_t *t) {
    mcts_node_t *r = &t->nodes[0];
    t->root_n = r->edge_n;
    const float *pr = &t->e_prior[r->edge_begin];
    bool noise = t->p.noise && t->full;
    memcpy(t->root_prior, pr, (size_t)r->edge_n * sizeof(float));
    if (t->p.root_mode == MCTS_ROOT_GUMBEL) {
        t->gumbel_m = t->p.gumbel_m < r->edge_n ? t->p.gumbel_m : r->edge_n;
        if (t->gumbel_m < 1) t->gumbel_m = 1;
        for (int32_t i = 0; i < r->edge_n; i++) {
            t->root_logit[i] = logf(pr[i] > 1e-30f ? pr[i] : 1e-30f);
            t->root_g[i] = noise ? (float)mcts_rng_gumbel(&t->rng) : 0.0f;
            t->root_sv[i] = 0;
        }
    } else if (noise && r->edge_n > 1) {
        float alpha = t->p.noise_alpha_scale > 0 ? t->p.noise_alpha_scale / (float)r->edge_n : t->p.noise_alpha;
        float *eta = t->sf[0];
        mcts_dirichlet(&t->rng, alpha, r->edge_n, eta);
        float e = t->p.noise_weight;
        for (int32_t i = 0; i < r->edge_n; i++) t->root_prior[i] = (1.0f - e) * pr[i] + e * eta[i];
    }
    t->root_ready = true;
    if (t->p.single_move_stop && r->edge_n == 1 && t->stop == MCTS_STOP_NONE) t->stop = MCTS_STOP_SINGLE;
}

void mcts_search_begin(mcts_tree_t *t, const mcts_limits_t *limits) {
    KOMA_ASSERT(t->pending == 0);
    t->active = true;
    t->stop = MCTS_STOP_NONE;
    t->playouts = 0;
    t->cache_hits = 0;
    t->collisions = 0;
    t->n_coll = 0;
    if (limits && limits->visits > 0) {
        t->budget = limits->visits;
        t->full = limits->full != 0;
    } else {
        t->full = mcts_rng_uniform(&t->rng) < (double)t->p.full_prob;
        t->budget = t->full ? t->p.visits_full : t->p.visits_fast;
    }
    t->soft_ms = limits ? limits->soft_deadline_ms : 0;
    t->hard_ms = limits ? limits->hard_deadline_ms : 0;
    t->stop_flag = limits ? limits->stop : NULL;
    t->temp_u = mcts_rng_uniform(&t->rng);
    t->root_ready = false;
    mcts_node_t *r = &t->nodes[0];
    if (r->state == NODE_TERMINAL || pos_hist_len(&t->pos) >= POS_HIST_MAX - 2) t->stop = MCTS_STOP_TERMINAL;
    else if (r->state == NODE_EXPANDED) root_prepare(t);
}

/* Most visited root child, and whether it is also the best by mean value
 * (plus the moves-left utility where selection adds it, as lc0's stopper:
 * else a shorter win that selection prefers to a slightly better Q would
 * keep every won position searching to the hard deadline). */
static bool root_stable(const mcts_tree_t *t) {
    const mcts_node_t *r = &t->nodes[0];
    int32_t bv = -1, bq = -1;
    float bqv = -FLT_MAX;
    int32_t bn = -1;
    ml_util_t mu = {0};
    bool ml = ml_util_at(t, r, &mu);
    for (int32_t i = 0; i < r->edge_n; i++) {
        int32_t c = t->e_child[r->edge_begin + i];
        if (c < 0 || t->nodes[c].n == 0) continue;
        const mcts_node_t *cn = &t->nodes[c];
        if (cn->n > bn) bn = cn->n, bv = i;
        float q = child_q(cn);
        if (ml) q += ml_util(&mu, cn, q);
        if (q > bqv) bqv = q, bq = i;
    }
    return bv == bq;
}

static bool check_stop(mcts_tree_t *t) {
    if (t->stop != MCTS_STOP_NONE) return true;
    if (t->playouts >= t->budget) t->stop = MCTS_STOP_VISITS;
    else if (t->stop_flag && atomic_load_explicit(t->stop_flag, memory_order_relaxed)) t->stop = MCTS_STOP_FLAG;
    else if (t->hard_ms || t->soft_ms) {
        int64_t now = compat_now_ms();
        if (t->hard_ms && now >= t->hard_ms) t->stop = MCTS_STOP_TIME;
        else if (t->soft_ms && now >= t->soft_ms && root_stable(t)) t->stop = MCTS_STOP_TIME;
    }
    return t->stop != MCTS_STOP_NONE;
}

int32_t mcts_collect(mcts_tree_t *t, int32_t max_leaves, mcts_request_t *out) {
    if (!t->active || max_leaves <= 0) return 0;
    mcts_node_t *r = &t->nodes[0];
    if (r->state == NODE_NEW) { /* evaluated even when stopped: a result needs the root's moves */
        r->vl = 1;
        float v, d, m;
        int res = leaf_eval(t, 0, true, &out[0], &v, &d, &m);
        if (res == LEAF_FULL) { /* the root's moves do not fit: nothing to search */
            r->vl = 0;
            t->stop = MCTS_STOP_POOL;
            return 0;
        }
        if (res == LEAF_RESOLVED) {
            backup(t, 0, v, d, m);
            if (r->state == NODE_TERMINAL) {
                t->stop = MCTS_STOP_TERMINAL;
                return 0;
            }
            root_prepare(t);
        } else {
            t->pending++;
            return 1;
        }
    }
    if (r->state != NODE_EXPANDED) return 0; /* the root is in flight or terminal */
    if (!t->root_ready) root_prepare(t);
    int32_t n_out = 0, resolved = 0, coll = 0;
    t->n_coll = 0;
    while (n_out < max_leaves && !check_stop(t)) {
        int res = descend(t, &out[n_out]);
        if (res == LEAF_REQUEST) {
            n_out++;
            t->playouts++;
            t->pending++;
        } else if (res == LEAF_RESOLVED || res == LEAF_REVISIT) {
            t->playouts++;
            /* A terminal visited again while leaves wait for the network,
             * where selection is PUCT's: their virtual losses make every other
             * path look lost, so the exact value would take every visit the
             * gathering allows (a repetition draw took 180 of 200 in a won
             * position). The batch ends here; it resumes with the network's
             * answers. Gumbel selection (self-play's root and interior) counts
             * visits in flight but gives them no value, so there ending the
             * batch only shrinks it: self-play that did so made 5-7% fewer
             * positions per CPU-minute and learned slower (docs/LEARNING.md,
             * session 17). */
            if (res == LEAF_REVISIT && t->pending > 0 &&
                (t->p.root_mode == MCTS_ROOT_PUCT || !t->p.gumbel_interior))
                break;
            if (++resolved >= 4 * max_leaves) break;
        } else if (res == LEAF_COLLISION) {
            t->collisions++;
            if (++coll >= max_leaves) break;
        } else {
            t->stop = MCTS_STOP_POOL;
        }
    }
    for (int32_t i = 0; i < t->n_coll; i++) revert_virtual(t, t->coll[i]);
    t->n_coll = 0;
    return n_out;
}

bool mcts_deliver_moves(mcts_tree_t *t, const mcts_request_t *req, const float *move_logits, const float *wdl_logits) {
    if (req->epoch_ != t->epoch) return false; /* abandoned by mcts_tree_set_position */
    KOMA_ASSERT(req->node_ >= 0 && req->node_ < t->n_nodes);
    mcts_node_t *x = &t->nodes[req->node_];
    KOMA_ASSERT(x->state == NODE_PENDING && x->edge_n == req->n_moves);
    float wdl[3];
    mcts_softmax(3, wdl_logits, wdl);
    for (int32_t i = 0; i < 3; i++)
        if (!(wdl[i] == wdl[i])) wdl[0] = wdl[2] = 0.0f, wdl[1] = 1.0f; /* NaN from the net: a draw */
    quantize_logits(req->n_moves, move_logits, t->sq);
    float m = req->moves_left; /* NAN: no estimate; a negative or infinite one is clipped */
    if (m == m) m = m < 0.0f ? 0.0f : m > 1e6f ? 1e6f : m;
    if (t->cache)
        mcts_cache_put(t->cache, req->key, moves_check(req->moves, req->n_moves), req->n_moves, t->sq, wdl, m);
    float d;
    float v = node_expand(t, req->node_, t->sq, wdl, &d);
    backup(t, req->node_, v, d, m);
    t->pending--;
    if (req->node_ == 0 && t->active) root_prepare(t);
    return true;
}

bool mcts_deliver(mcts_tree_t *t, const mcts_request_t *req, const float *policy_logits, const float *wdl_logits) {
    if (req->epoch_ != t->epoch) return false;
    float *ml = t->sf[0];
    for (int32_t i = 0; i < req->n_moves; i++) ml[i] = policy_logits[req->labels[i]];
    return mcts_deliver_moves(t, req, ml, wdl_logits);
}

bool mcts_search_done(const mcts_tree_t *t) { return !t->active || (t->stop != MCTS_STOP_NONE && t->pending == 0); }
int32_t mcts_pending(const mcts_tree_t *t) { return t->pending; }

/* ---- results ---------------------------------------------------------------------- */

static int32_t most_visited_child(const mcts_tree_t *t, int32_t node) {
    const mcts_node_t *x = &t->nodes[node];
    int32_t best = -1, bn = 0;
    float bq = -FLT_MAX;
    for (int32_t i = 0; i < x->edge_n; i++) {
        int32_t c = t->e_child[x->edge_begin + i];
        if (c < 0 || t->nodes[c].n == 0) continue;
        const mcts_node_t *cn = &t->nodes[c];
        float q = child_q(cn);
        if (cn->n > bn || (cn->n == bn && q > bq)) bn = cn->n, bq = q, best = i;
    }
    return best;
}

int32_t mcts_tree_pv(const mcts_tree_t *t, move_t first, move_t *pv, int32_t max) {
    const mcts_node_t *r = &t->nodes[0];
    int32_t len = 0, node = -1;
    if (max <= 0 || r->state != NODE_EXPANDED) return 0;
    for (int32_t i = 0; i < r->edge_n; i++)
        if (t->e_move[r->edge_begin + i] == first) {
            pv[len++] = first;
            node = t->e_child[r->edge_begin + i];
            break;
        }
    while (len < max && node >= 0 && t->nodes[node].state == NODE_EXPANDED) {
        int32_t e = most_visited_child(t, node);
        if (e < 0) break;
        const mcts_node_t *x = &t->nodes[node];
        pv[len++] = t->e_move[x->edge_begin + (uint32_t)e];
        node = t->e_child[x->edge_begin + (uint32_t)e];
    }
    return len;
}

void mcts_search_result(mcts_tree_t *t, mcts_result_t *res) {
    res->best = res->best_greedy = MOVE_NONE;
    res->n = 0;
    res->pv_len = 0;
    res->stop = t->stop;
    res->full_search = t->full;
    res->playouts = t->playouts;
    res->nodes = t->n_nodes;
    res->edges = t->n_edges;
    res->cache_hits = t->cache_hits;
    res->collisions = t->collisions;
    const mcts_node_t *r = &t->nodes[0];
    res->root_visits = r->n;
    res->root_q = r->n > 0 ? (float)(r->w / r->n) : 0.0f;
    float dr = r->n > 0 ? r->d / (float)r->n : 0.0f;
    res->root_wdl[1] = dr;
    res->root_wdl[0] = fmaxf(0.0f, (1.0f + res->root_q - dr) * 0.5f);
    res->root_wdl[2] = fmaxf(0.0f, (1.0f - res->root_q - dr) * 0.5f);
    res->policy_q = res->root_q;
    res->root_moves_left = r->n > 0 ? r->m : NAN;
    if (r->state != NODE_EXPANDED) return;
    int32_t n = r->edge_n;
    res->n = n;
    int64_t sum_n = 0;
    for (int32_t i = 0; i < n; i++) {
        uint32_t ei = r->edge_begin + (uint32_t)i;
        int32_t c = t->e_child[ei];
        res->moves[i] = t->e_move[ei];
        res->labels[i] = t->e_label[ei];
        res->prior[i] = t->e_prior[ei];
        res->visits[i] = c >= 0 ? t->nodes[c].n : 0;
        res->q[i] = c >= 0 ? child_q(&t->nodes[c]) : 0.0f;
        sum_n += res->visits[i];
    }
    int32_t greedy;
    if (t->p.root_mode == MCTS_ROOT_GUMBEL && t->root_ready) {
        float *sc = t->sf[1];
        root_gumbel_scores(t, sc);
        /* Target: softmax(logits + sigma(completed Q)) = scores without g. */
        for (int32_t i = 0; i < n; i++) res->policy[i] = sc[i] - t->root_g[i];
        mcts_softmax(n, res->policy, res->policy);
        int32_t max_sv = 0;
        for (int32_t i = 0; i < n; i++)
            if (t->root_sv[i] > max_sv) max_sv = t->root_sv[i];
        greedy = 0;
        float bs = -FLT_MAX;
        for (int32_t i = 0; i < n; i++)
            if (t->root_sv[i] == max_sv && sc[i] > bs) bs = sc[i], greedy = i;
        res->best_greedy = res->best = res->moves[greedy];
    } else {
        if (sum_n > 0) {
            for (int32_t i = 0; i < n; i++) res->policy[i] = (float)((double)res->visits[i] / (double)sum_n);
        } else {
            for (int32_t i = 0; i < n; i++) res->policy[i] = res->prior[i];
        }
        greedy = most_visited_child(t, 0);
        if (greedy < 0) { /* nothing visited: highest prior */
            greedy = 0;
            for (int32_t i = 1; i < n; i++)
                if (res->prior[i] > res->prior[greedy]) greedy = i;
        }
        res->best_greedy = res->best = res->moves[greedy];
        if (t->p.move_temp > 0.0f && pos_game_ply(&t->pos) <= t->p.move_temp_plies && sum_n > 0) {
            /* Sample proportionally to N^(1/T) with this search's uniform draw. */
            double inv_t = 1.0 / t->p.move_temp, tot = 0.0;
            for (int32_t i = 0; i < n; i++)
                if (res->visits[i] > 0) tot += pow((double)res->visits[i], inv_t);
            double u = t->temp_u * tot, acc = 0.0;
            for (int32_t i = 0; i < n; i++) {
                if (res->visits[i] == 0) continue;
                acc += pow((double)res->visits[i], inv_t);
                res->best = res->moves[i];
                if (u < acc) break;
            }
        }
    }
    /* Value of the target policy; unvisited moves count at v_mix. */
    double sum_p = 0.0, sum_pq = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (res->visits[i] > 0) {
            double pp = res->prior[i] > FLT_MIN ? res->prior[i] : FLT_MIN;
            sum_p += pp;
            sum_pq += pp * res->q[i];
        }
    double v_mix = sum_n > 0 ? (r->v_net + (double)sum_n * (sum_pq / sum_p)) / (double)(sum_n + 1) : r->v_net;
    double pq = 0.0;
    for (int32_t i = 0; i < n; i++) pq += res->policy[i] * (res->visits[i] > 0 ? res->q[i] : v_mix);
    res->policy_q = (float)pq;
    /* PV: the greedy root move, then most visited children; a leaf resolved
     * as a mate in one adds that mate. */
    int32_t node = 0, e = greedy;
    while (res->pv_len < MCTS_PV_MAX && e >= 0) {
        const mcts_node_t *x = &t->nodes[node];
        res->pv[res->pv_len++] = t->e_move[x->edge_begin + (uint32_t)e];
        node = t->e_child[x->edge_begin + (uint32_t)e];
        if (node < 0 || t->nodes[node].state != NODE_EXPANDED) break;
        e = most_visited_child(t, node);
    }
    if (node >= 0 && t->nodes[node].mate) {
        int32_t base = res->pv_len, k = t->nodes[node].mate;
        for (int32_t i = 0; i < base; i++) pos_do_move(&t->pos, res->pv[i]);
        /* the line to the mate: the check (mate in three), an evasion, the mate in one */
        for (int32_t step = k == 3 ? 0 : k == 2 ? 1 : 2; step < 3 && res->pv_len < MCTS_PV_MAX; step++) {
            move_t m = MOVE_NONE;
            if (step == 0) {
                move_list_t l;
                movegen_legal(&t->pos, &l);
                m = mcts_leaf_mate3(&t->pos, &l, t->p.max_ply);
            } else if (step == 1) {
                move_list_t l;
                m = movegen_legal(&t->pos, &l) > 0 ? l.moves[0] : MOVE_NONE;
            } else {
                m = mate1_find(&t->pos);
            }
            if (m == MOVE_NONE) break;
            res->pv[res->pv_len++] = m;
            pos_do_move(&t->pos, m);
        }
        for (int32_t i = res->pv_len; i > 0; i--) pos_undo_move(&t->pos);
    }
}

/* ---- synchronous search --------------------------------------------------------- */

static void search_run(mcts_tree_t *t, const mcts_limits_t *limits, mcts_eval_fn_t eval, mcts_eval_ml_fn_t eval_ml,
                       void *user, mcts_result_t *res) {
    int32_t b = t->p.search_batch;
    if (!t->reqs) {
        t->reqs = malloc((size_t)b * sizeof(mcts_request_t));
        t->pol = malloc((size_t)b * ENC_LABEL_NB * sizeof(float));
        t->wdl = malloc((size_t)b * 3 * sizeof(float));
        t->ml = malloc((size_t)b * sizeof(float));
        KOMA_ASSERT(t->reqs && t->pol && t->wdl && t->ml);
    }
    mcts_search_begin(t, limits);
    while (!mcts_search_done(t)) {
        int32_t n = mcts_collect(t, b, t->reqs);
        if (n == 0) continue;
        if (eval_ml) {
            for (int32_t i = 0; i < n; i++) t->ml[i] = NAN;
            eval_ml(user, t, t->reqs, n, t->pol, t->wdl, t->ml);
            for (int32_t i = 0; i < n; i++) t->reqs[i].moves_left = t->ml[i];
        } else {
            eval(user, t, t->reqs, n, t->pol, t->wdl);
        }
        for (int32_t i = 0; i < n; i++) mcts_deliver(t, &t->reqs[i], t->pol + (size_t)i * ENC_LABEL_NB, t->wdl + 3 * i);
    }
    mcts_search_result(t, res);
}

void mcts_search(mcts_tree_t *t, const mcts_limits_t *limits, mcts_eval_fn_t eval, void *user, mcts_result_t *res) {
    search_run(t, limits, eval, NULL, user, res);
}

void mcts_search_ml(mcts_tree_t *t, const mcts_limits_t *limits, mcts_eval_ml_fn_t eval, void *user,
                    mcts_result_t *res) {
    search_run(t, limits, NULL, eval, user, res);
}

/* ---- tree reuse ------------------------------------------------------------------- */

/* Keeps the subtree of node keep (which becomes the root), sliding kept
 * nodes and their edge blocks down in index order. */
static void compact(mcts_tree_t *t, int32_t keep) {
    int32_t *fwd = t->fwd;
    int32_t new_n = 0;
    for (int32_t i = keep; i < t->n_nodes; i++) {
        int32_t par = t->nodes[i].parent;
        fwd[i] = (i == keep || (par >= keep && fwd[par] >= 0)) ? new_n++ : -1;
    }
    int64_t new_e = 0;
    for (int32_t i = keep; i < t->n_nodes; i++) {
        if (fwd[i] < 0) continue;
        mcts_node_t x = t->nodes[i];
        if (x.edge_n > 0) {
            KOMA_ASSERT((int64_t)x.edge_begin >= new_e);
            size_t n = x.edge_n, from = x.edge_begin, to = (size_t)new_e;
            memmove(&t->e_move[to], &t->e_move[from], n * sizeof(move_t));
            memmove(&t->e_label[to], &t->e_label[from], n * sizeof(uint16_t));
            memmove(&t->e_prior[to], &t->e_prior[from], n * sizeof(float));
            memmove(&t->e_child[to], &t->e_child[from], n * sizeof(int32_t));
            for (size_t k = to; k < to + n; k++)
                if (t->e_child[k] >= 0) t->e_child[k] = fwd[t->e_child[k]];
        }
        x.edge_begin = (uint32_t)new_e;
        new_e += x.edge_n;
        if (i == keep) {
            x.parent = -1;
            x.parent_edge = 0;
        } else {
            x.parent = fwd[x.parent];
        }
        t->nodes[fwd[i]] = x;
    }
    t->n_nodes = new_n;
    t->n_edges = new_e;
}

bool mcts_tree_advance(mcts_tree_t *t, move_t m) {
    KOMA_ASSERT(t->pending == 0);
    int32_t keep = -1;
    const mcts_node_t *r = &t->nodes[0];
    if (r->state == NODE_EXPANDED) {
        for (int32_t i = 0; i < r->edge_n; i++) {
            uint32_t ei = r->edge_begin + (uint32_t)i;
            if (t->e_move[ei] != m) continue;
            int32_t c = t->e_child[ei];
            if (c >= 0 && t->nodes[c].state == NODE_EXPANDED) keep = c;
            break;
        }
    }
    KOMA_ASSERT(pos_is_valid_move(&t->pos, m));
    pos_do_move(&t->pos, m);
    if (keep < 0) {
        tree_clear(t);
        return false;
    }
    compact(t, keep);
    t->epoch++;
    t->active = false;
    t->root_ready = false;
    return true;
}

/* ---- inspection ------------------------------------------------------------------ */

void mcts_request_position(const mcts_tree_t *t, const mcts_request_t *req, pos_t *out) {
    KOMA_ASSERT(req->epoch_ == t->epoch);
    move_t path[POS_HIST_MAX];
    int32_t depth = 0;
    for (int32_t node = req->node_; node > 0; node = t->nodes[node].parent) {
        const mcts_node_t *x = &t->nodes[node];
        KOMA_ASSERT(depth < POS_HIST_MAX);
        path[depth++] = t->e_move[t->nodes[x->parent].edge_begin + x->parent_edge];
    }
    pos_copy(out, &t->pos);
    while (depth > 0) pos_do_move(out, path[--depth]);
}

const char *mcts_tree_validate(const mcts_tree_t *t) {
    if (t->n_nodes < 1 || t->n_nodes > t->node_cap) return "node count out of range";
    if (t->n_edges < 0 || t->n_edges > t->edge_cap) return "edge count out of range";
    int32_t pending = 0;
    for (int32_t i = 0; i < t->n_nodes; i++) {
        const mcts_node_t *x = &t->nodes[i];
        if (i == 0 && x->parent != -1) return "root has a parent";
        if (i > 0) {
            if (x->parent < 0 || x->parent >= i) return "parent index not below child";
            const mcts_node_t *p = &t->nodes[x->parent];
            if (x->parent_edge >= p->edge_n) return "parent edge out of range";
            if (t->e_child[p->edge_begin + x->parent_edge] != i) return "parent edge does not point back";
        }
        if (x->n < 0 || x->vl < 0) return "negative visits";
        if (fabs(x->w) > x->n + 1e-3 || x->d < -1e-3f || x->d > x->n + 1e-3f) return "value sum out of range";
        if (x->n > 0 && x->m < 0.0f) return "negative moves left"; /* NAN (unknown) passes */
        if (x->state == NODE_TERMINAL && (x->edge_n != 0 || x->vl != 0)) return "terminal node with edges or in flight";
        if (x->state == NODE_PENDING) {
            pending++;
            if (x->n != 0 || x->vl != 1) return "pending node visited or not exactly once in flight";
        }
        if (x->state == NODE_NEW && (i != 0 || x->n != 0)) return "unevaluated node below the root";
        if (x->state == NODE_PENDING || x->state == NODE_EXPANDED) {
            if (x->edge_n == 0) return "expanded node without moves";
            if ((int64_t)x->edge_begin + x->edge_n > t->n_edges) return "edges out of the pool";
        }
        if (x->state != NODE_EXPANDED) continue;
        int64_t sum_n = 0, sum_vl = 0;
        double sum_p = 0.0;
        for (int32_t k = 0; k < x->edge_n; k++) {
            uint32_t ei = x->edge_begin + (uint32_t)k;
            int32_t c = t->e_child[ei];
            if (t->e_prior[ei] < 0.0f || !(t->e_prior[ei] <= 1.0f)) return "prior out of [0, 1]";
            sum_p += t->e_prior[ei];
            if (c == -1) continue;
            if (c <= i || c >= t->n_nodes) return "child index out of range";
            sum_n += t->nodes[c].n;
            sum_vl += t->nodes[c].vl;
        }
        if (fabs(sum_p - 1.0) > 1e-3) return "priors do not sum to 1";
        if (x->n != 1 + sum_n) return "visits != 1 + sum of child visits";
        if (x->vl != sum_vl) return "virtual visits != sum of child virtual visits";
    }
    if (pending != t->pending) return "pending nodes != pending requests";
    if (t->pending == 0 && t->nodes[0].vl != 0) return "virtual loss left at the root";
    return NULL;
}
