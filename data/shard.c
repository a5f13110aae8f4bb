/* shard.c - shard files: builder, durable write and registration, validating
 * reader, batch gather. See shard.h for the layout and the contract.
 *
 * Owns: rows <-> columns, and every check on a shard's values. Does not own:
 * the safetensors format (nn/safetensors.c), SQL (data/db.c), threads
 * (data/writer.c).
 */
#include "data/shard.h"
#include "compat/err.h"

#include "compat/compat.h"
#include "data/fmt_pack.h"
#include "nn/safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHARD_GROW_MIN 256

static int format_ok(const shard_format_t *f) {
    return f && f->planes_bytes >= 1 && f->planes_bytes <= SHARD_MAX_WIDTH && f->hand_n >= 0 &&
           f->hand_n <= SHARD_MAX_WIDTH && f->legal_bytes >= 0 && f->legal_bytes <= SHARD_MAX_WIDTH;
}

static int format_equal(const shard_format_t *a, const shard_format_t *b) {
    return a->features_version == b->features_version && a->planes_bytes == b->planes_bytes &&
           a->hand_n == b->hand_n && a->legal_bytes == b->legal_bytes;
}

/* ---- position column ---------------------------------------------------------- */
static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void shard_position_pack(const shard_position_t *p, uint8_t out[SHARD_POSITION_BYTES]) {
    memset(out, 0, SHARD_POSITION_BYTES);
    memcpy(out + SHARD_POS_BOARD, p->board, 81);
    out[SHARD_POS_SIDE] = p->side;
    put_u16(out + SHARD_POS_PLY, p->ply);
    put_u32(out + SHARD_POS_HAND_BLACK, p->hand[0]);
    put_u32(out + SHARD_POS_HAND_WHITE, p->hand[1]);
}

void shard_position_unpack(const uint8_t in[SHARD_POSITION_BYTES], shard_position_t *p) {
    memcpy(p->board, in + SHARD_POS_BOARD, 81);
    p->side = in[SHARD_POS_SIDE];
    p->ply = get_u16(in + SHARD_POS_PLY);
    p->hand[0] = get_u32(in + SHARD_POS_HAND_BLACK);
    p->hand[1] = get_u32(in + SHARD_POS_HAND_WHITE);
}

const char *shard_position_check(const uint8_t in[SHARD_POSITION_BYTES]) {
    for (int sq = 0; sq < 81; sq++) {
        uint8_t pc = in[SHARD_POS_BOARD + sq];
        uint8_t pt = pc & 15;
        /* empty, or piece type 1..14 plus the colour bit 16 */
        if (pc != 0 && ((pc & ~(16 | 15)) || pt == 0 || pt == 15)) return "bad piece code on the board";
    }
    if (in[SHARD_POS_SIDE] > 1) return "side to move is neither 0 nor 1";
    for (int i = SHARD_POS_HAND_WHITE + 4; i < SHARD_POSITION_BYTES; i++)
        if (in[i]) return "reserved bytes 92..95 are not zero";
    return NULL;
}

char *shard_path_format(char *buf, size_t len, int32_t cycle, int64_t seq) {
    snprintf(buf, len, "shards/c%04" PRId32 "_%06" PRId64 ".safetensors", cycle, seq);
    return buf;
}

/* ==================================================================================== */
/* builder                                                                              */
/* ==================================================================================== */
struct shard_builder {
    shard_format_t fmt;
    int version;       /* SHARD_VERSION_V1 (fmt used) or SHARD_VERSION */
    int set;           /* version 2: a position set (no games) */
    int64_t rows;      /* rows appended: finished games, then the open one */
    int64_t done_rows; /* rows of finished games */
    int64_t cap;       /* row capacity of every per-row array */
    int64_t nnz, nnz_cap;
    int64_t first_game_id;
    uint8_t *planes;   /* (cap, planes_bytes) */
    float *hand;       /* (cap, hand_n) */
    uint8_t *legal;    /* (cap, legal_bytes) */
    uint32_t *offsets; /* (cap) */
    uint16_t *label;   /* (nnz_cap) */
    float *prob;       /* (nnz_cap) */
    int8_t *result;    /* (cap) */
    float *root_q;     /* (cap) */
    uint16_t *ply;     /* (cap) */
    int64_t *game_id;  /* (cap) */
    uint16_t *move;    /* (cap) */
    uint8_t *position; /* (cap, SHARD_POSITION_BYTES) */
    float *surprise;   /* (cap) SHARD_SURPRISE_UNKNOWN where a row has none */
    int16_t *moves_left; /* (cap) set by shard_builder_end_game */
    uint8_t *reason;   /* (cap) a position set's rows: how the record's game ended (db_reason_t) */
    int open_length_unknown; /* shard_builder_length_unknown for the open game */
    db_game_t *games;  /* (games_cap); strings malloc'ed */
    int32_t ngames, games_cap;
};

shard_builder_t *shard_builder_new(const shard_format_t *fmt, char *err, size_t errlen) {
    if (!format_ok(fmt)) {
        set_err(err, errlen, "shard builder: bad format (planes_bytes %d, hand_n %d, legal_bytes %d)",
                fmt ? fmt->planes_bytes : -1, fmt ? fmt->hand_n : -1, fmt ? fmt->legal_bytes : -1);
        return NULL;
    }
    shard_builder_t *b = calloc(1, sizeof *b);
    if (!b) {
        set_err(err, errlen, "shard builder: out of memory");
        return NULL;
    }
    b->fmt = *fmt;
    b->version = SHARD_VERSION_V1;
    return b;
}

shard_builder_t *shard_builder_new_compact(int set, char *err, size_t errlen) {
    shard_builder_t *b = calloc(1, sizeof *b);
    if (!b) {
        set_err(err, errlen, "shard builder: out of memory");
        return NULL;
    }
    b->fmt = (shard_format_t){SHARD_FEATURES_ANY, 0, 0, 0};
    b->version = SHARD_VERSION;
    b->set = set != 0;
    return b;
}

int shard_builder_version(const shard_builder_t *b) { return b->version; }

/* The side to move of a row's position, 0 Black or 1 White. */
static int hcp_side(const uint8_t *hcp) { return hcp[0] & 1; }

static const char *hcp_check(const uint8_t *hcp) {
    fmt_board_t fb;
    return fmt_pack_decode(FMT_PACK_HCP, hcp, &fb);
}

static void free_game_strings(db_game_t *g) {
    free((void *)g->start_sfen);
    free((void *)g->moves);
    free((void *)g->host);
    g->start_sfen = g->moves = g->host = NULL;
}

void shard_builder_free(shard_builder_t *b) {
    if (!b) return;
    for (int32_t i = 0; i < b->ngames; i++) free_game_strings(&b->games[i]);
    free(b->games);
    free(b->planes);
    free(b->hand);
    free(b->legal);
    free(b->offsets);
    free(b->label);
    free(b->prob);
    free(b->result);
    free(b->root_q);
    free(b->ply);
    free(b->game_id);
    free(b->move);
    free(b->position);
    free(b->surprise);
    free(b->moves_left);
    free(b->reason);
    free(b);
}

void shard_builder_reset(shard_builder_t *b) {
    if (!b) return;
    for (int32_t i = 0; i < b->ngames; i++) free_game_strings(&b->games[i]);
    b->ngames = 0;
    b->rows = b->done_rows = b->nnz = 0;
}

int64_t shard_builder_rows(const shard_builder_t *b) { return b->done_rows; }
int32_t shard_builder_games(const shard_builder_t *b) { return b->ngames; }
int64_t shard_builder_nnz(const shard_builder_t *b) {
    return b->done_rows < b->rows ? (int64_t)b->offsets[b->done_rows] : b->nnz;
}
const db_game_t *shard_builder_game(const shard_builder_t *b, int32_t i) {
    return b && i >= 0 && i < b->ngames ? &b->games[i] : NULL;
}

/* realloc of *p to n elements of size sz; 0 or -1 (then *p unchanged). */
static int grow(void **p, size_t sz, int64_t n) {
    if (n <= 0 || sz == 0) return 0;
    if ((uint64_t)n > SIZE_MAX / sz) return -1;
    void *q = realloc(*p, (size_t)n * sz);
    if (!q) return -1;
    *p = q;
    return 0;
}

static int reserve_rows(shard_builder_t *b, int64_t need) {
    if (need <= b->cap) return 0;
    int64_t cap = b->cap ? b->cap : SHARD_GROW_MIN;
    while (cap < need) cap *= 2;
    if (cap > SHARD_MAX_ROWS) cap = SHARD_MAX_ROWS;
    const shard_format_t *f = &b->fmt;
    size_t pos_bytes = b->version == SHARD_VERSION ? SHARD_HCP_BYTES : SHARD_POSITION_BYTES;
    /* Each array grows on its own; a failure leaves the old ones valid and cap unchanged. */
    if (grow((void **)&b->planes, (size_t)f->planes_bytes, cap) || grow((void **)&b->hand, sizeof(float) * (size_t)f->hand_n, cap) ||
        grow((void **)&b->legal, (size_t)f->legal_bytes, cap) || grow((void **)&b->offsets, sizeof(uint32_t), cap) ||
        grow((void **)&b->result, 1, cap) || grow((void **)&b->root_q, sizeof(float), cap) ||
        grow((void **)&b->ply, sizeof(uint16_t), cap) || grow((void **)&b->game_id, sizeof(int64_t), cap) ||
        grow((void **)&b->move, sizeof(uint16_t), cap) || grow((void **)&b->position, pos_bytes, cap) ||
        grow((void **)&b->surprise, sizeof(float), cap) || grow((void **)&b->moves_left, sizeof(int16_t), cap) ||
        grow((void **)&b->reason, 1, cap))
        return -1;
    b->cap = cap;
    return 0;
}

static int reserve_nnz(shard_builder_t *b, int64_t need) {
    if (need <= b->nnz_cap) return 0;
    int64_t cap = b->nnz_cap ? b->nnz_cap : 16 * SHARD_GROW_MIN;
    while (cap < need) cap *= 2;
    if (cap > (int64_t)UINT32_MAX) cap = (int64_t)UINT32_MAX;
    if (grow((void **)&b->label, sizeof(uint16_t), cap) || grow((void **)&b->prob, sizeof(float), cap)) return -1;
    b->nnz_cap = cap;
    return 0;
}

int shard_builder_add_row(shard_builder_t *b, const shard_row_t *row, char *err, size_t errlen) {
    if (!b || !row) {
        set_err(err, errlen, "shard builder: no builder or row");
        return -1;
    }
    const shard_format_t *f = &b->fmt;
    int64_t r = b->rows;
    int v2 = b->version == SHARD_VERSION;
    if (v2 && b->set) {
        set_err(err, errlen, "shard builder: a position set takes rows through shard_builder_add_set_row");
        return -1;
    }
    if (v2 ? !row->hcp
           : (!row->planes || (f->hand_n > 0 && !row->hand) || (f->legal_bytes > 0 && !row->legal) || !row->position)) {
        set_err(err, errlen, "shard builder: row %lld: missing %s", (long long)r,
                v2 ? "its hcp position" : "planes, hand, legal or position");
        return -1;
    }
    if (row->policy_n < 0 || row->policy_n > SHARD_LABEL_NB || (row->policy_n > 0 && (!row->policy_label || !row->policy_prob))) {
        set_err(err, errlen, "shard builder: row %lld: %d policy entries (want 0..%d, with labels and probabilities)",
                (long long)r, row->policy_n, SHARD_LABEL_NB);
        return -1;
    }
    for (int32_t i = 0; i < row->policy_n; i++) {
        if (row->policy_label[i] >= SHARD_LABEL_NB) {
            set_err(err, errlen, "shard builder: row %lld: policy label %u is not below %d", (long long)r,
                    (unsigned)row->policy_label[i], SHARD_LABEL_NB);
            return -1;
        }
        if (!isfinite(row->policy_prob[i]) || row->policy_prob[i] < 0) {
            set_err(err, errlen, "shard builder: row %lld: policy probability %g is not finite and >= 0",
                    (long long)r, (double)row->policy_prob[i]);
            return -1;
        }
    }
    if (!isfinite(row->root_q) || row->root_q < -1 || row->root_q > 1) {
        set_err(err, errlen, "shard builder: row %lld: root_q %g is outside [-1, 1]", (long long)r, (double)row->root_q);
        return -1;
    }
    for (int32_t i = 0; !v2 && i < f->hand_n; i++) {
        if (!isfinite(row->hand[i])) {
            set_err(err, errlen, "shard builder: row %lld: hand[%d] is not finite", (long long)r, i);
            return -1;
        }
    }
    const char *why = v2 ? hcp_check(row->hcp) : shard_position_check(row->position);
    if (why) {
        set_err(err, errlen, "shard builder: row %lld: position: %s", (long long)r, why);
        return -1;
    }
    if (row->surprise && !(isfinite(*row->surprise) && *row->surprise >= 0)) {
        set_err(err, errlen, "shard builder: row %lld: surprise %g is not finite and >= 0", (long long)r,
                (double)*row->surprise);
        return -1;
    }
    if (r >= SHARD_MAX_ROWS || b->nnz + row->policy_n > (int64_t)UINT32_MAX) {
        set_err(err, errlen, "shard builder: full (%lld rows, %lld policy entries)", (long long)r, (long long)b->nnz);
        return -1;
    }
    if (reserve_rows(b, r + 1) != 0 || reserve_nnz(b, b->nnz + row->policy_n) != 0) {
        set_err(err, errlen, "shard builder: out of memory at row %lld", (long long)r);
        return -1;
    }
    if (!v2) {
        memcpy(b->planes + r * f->planes_bytes, row->planes, (size_t)f->planes_bytes);
        if (f->hand_n) memcpy(b->hand + r * f->hand_n, row->hand, sizeof(float) * (size_t)f->hand_n);
        if (f->legal_bytes) memcpy(b->legal + r * f->legal_bytes, row->legal, (size_t)f->legal_bytes);
    }
    b->offsets[r] = (uint32_t)b->nnz;
    if (row->policy_n) {
        memcpy(b->label + b->nnz, row->policy_label, sizeof(uint16_t) * (size_t)row->policy_n);
        memcpy(b->prob + b->nnz, row->policy_prob, sizeof(float) * (size_t)row->policy_n);
    }
    b->nnz += row->policy_n;
    b->result[r] = 0; /* set by shard_builder_end_game */
    b->root_q[r] = row->root_q;
    b->ply[r] = row->ply;
    b->game_id[r] = b->first_game_id + b->ngames;
    b->move[r] = row->move;
    if (v2) memcpy(b->position + r * SHARD_HCP_BYTES, row->hcp, SHARD_HCP_BYTES);
    else memcpy(b->position + r * SHARD_POSITION_BYTES, row->position, SHARD_POSITION_BYTES);
    b->surprise[r] = row->surprise ? *row->surprise : SHARD_SURPRISE_UNKNOWN;
    b->rows = r + 1;
    return 0;
}

int shard_builder_add_set_row(shard_builder_t *b, const uint8_t hcp[SHARD_HCP_BYTES], uint16_t move, int8_t result,
                              float root_q, uint16_t ply, uint8_t reason, char *err, size_t errlen) {
    if (!b || !hcp || b->version != SHARD_VERSION || !b->set) {
        set_err(err, errlen, "shard builder: not a position set's builder, or no position");
        return -1;
    }
    int64_t r = b->rows;
    if (result < -1 || result > 1 || !isfinite(root_q) || root_q < -1 || root_q > 1 || reason >= DB_REASON_NB) {
        set_err(err, errlen, "shard builder: row %lld: result %d or root_q %g out of range", (long long)r, (int)result,
                (double)root_q);
        return -1;
    }
    const char *why = hcp_check(hcp);
    if (why) {
        set_err(err, errlen, "shard builder: row %lld: position: %s", (long long)r, why);
        return -1;
    }
    if (r >= SHARD_MAX_ROWS || reserve_rows(b, r + 1) != 0) {
        set_err(err, errlen, "shard builder: full or out of memory at row %lld", (long long)r);
        return -1;
    }
    memcpy(b->position + r * SHARD_HCP_BYTES, hcp, SHARD_HCP_BYTES);
    b->move[r] = move;
    b->result[r] = result;
    b->root_q[r] = root_q;
    b->ply[r] = ply;
    b->offsets[r] = 0;
    b->game_id[r] = 0;
    b->surprise[r] = SHARD_SURPRISE_UNKNOWN;
    b->moves_left[r] = SHARD_MOVES_LEFT_UNKNOWN;
    b->reason[r] = reason;
    b->rows = b->done_rows = r + 1;
    return 0;
}

int shard_builder_end_game(shard_builder_t *b, const db_game_t *game, char *err, size_t errlen) {
    if (!b || !game) {
        set_err(err, errlen, "shard builder: no builder or game");
        return -1;
    }
    if (game->result < -1 || game->result > 1) {
        set_err(err, errlen, "shard builder: game %d: result %d (want -1, 0 or 1)", b->ngames, game->result);
        return -1;
    }
    if ((unsigned)game->reason >= DB_REASON_NB || !game->start_sfen || !game->moves || game->plies < 0) {
        set_err(err, errlen, "shard builder: game %d: bad reason, start position, moves or plies", b->ngames);
        return -1;
    }
    if (b->ngames == b->games_cap) {
        int32_t cap = b->games_cap ? 2 * b->games_cap : 64;
        if (grow((void **)&b->games, sizeof *b->games, cap) != 0) {
            set_err(err, errlen, "shard builder: out of memory");
            return -1;
        }
        b->games_cap = cap;
    }
    db_game_t g = *game;
    g.start_sfen = strdup(game->start_sfen);
    g.moves = strdup(game->moves);
    g.host = game->host ? strdup(game->host) : NULL;
    if (!g.start_sfen || !g.moves || (game->host && !g.host)) {
        free_game_strings(&g);
        set_err(err, errlen, "shard builder: out of memory");
        return -1;
    }
    g.id = b->first_game_id + b->ngames;
    g.shard_id = 0;
    g.first_row = b->done_rows;
    g.row_count = b->rows - b->done_rows;
    g.created[0] = 0;
    if (b->set) {
        set_err(err, errlen, "shard builder: a position set has no games");
        return -1;
    }
    for (int64_t r = b->done_rows; r < b->rows; r++) {
        int side = b->version == SHARD_VERSION ? hcp_side(b->position + r * SHARD_HCP_BYTES)
                                               : b->position[r * SHARD_POSITION_BYTES + SHARD_POS_SIDE];
        b->result[r] = (int8_t)(side == 0 ? game->result : -game->result);
        int64_t left = (int64_t)game->plies - b->ply[r];
        b->moves_left[r] = (int16_t)(b->open_length_unknown || left < 0 ? SHARD_MOVES_LEFT_UNKNOWN
                                     : left > INT16_MAX                 ? INT16_MAX
                                                                        : left);
    }
    b->open_length_unknown = 0;
    b->games[b->ngames++] = g;
    b->done_rows = b->rows;
    return 0;
}

void shard_builder_length_unknown(shard_builder_t *b) {
    if (b) b->open_length_unknown = 1;
}

void shard_builder_abort_game(shard_builder_t *b) {
    if (!b) return;
    b->open_length_unknown = 0;
    if (b->done_rows == b->rows) return;
    b->nnz = b->offsets[b->done_rows];
    b->rows = b->done_rows;
}

void shard_builder_set_first_game_id(shard_builder_t *b, int64_t first_id) {
    if (!b) return;
    b->first_game_id = first_id;
    for (int32_t i = 0; i < b->ngames; i++) {
        db_game_t *g = &b->games[i];
        g->id = first_id + i;
        for (int64_t r = g->first_row; r < g->first_row + g->row_count; r++) b->game_id[r] = g->id;
    }
    for (int64_t r = b->done_rows; r < b->rows; r++) b->game_id[r] = first_id + b->ngames;
}

/* Row probabilities back from 16-bit counts: count / sum as one float division (exact inputs below 2^24). */
static float q16_prob(uint32_t q, uint64_t sum) {
    return sum < (1u << 24) ? (float)q / (float)sum : (float)((double)q / (double)sum);
}

/* The smallest 16-bit counts (the smallest count 1, 2, .. 1024) whose q16_prob quotients are p exactly: a
 * target made from visits (a search's, an hcpe3 record's) is stored as those visits and reads back bit for
 * bit. 0, or -1 when there are none. */
static int policy_counts(const float *p, int64_t n, uint16_t *q) {
    float pmin = 0;
    for (int64_t i = 0; i < n; i++)
        if (p[i] > 0 && (pmin == 0 || p[i] < pmin)) pmin = p[i];
    if (pmin <= 0) return -1;
    for (int32_t k = 1; k <= 1024; k++) {
        double total = (double)k / pmin;
        if (total > 65535.0 * (double)n) break;
        uint64_t sum = 0;
        int64_t i = 0;
        for (; i < n; i++) {
            double x = (double)p[i] * total, v = floor(x + 0.5);
            if (v > 65535 || (p[i] > 0 && v < 1) || fabs(x - v) > 0.01) break; /* not this k (a fast filter) */
            q[i] = (uint16_t)v, sum += (uint64_t)v;
        }
        if (i < n) continue;
        for (i = 0; i < n && q16_prob(q[i], sum) == p[i]; i++) {}
        if (i == n) return 0;
    }
    return -1;
}

/* A row's n probabilities as 16-bit counts: the visits they were made from where policy_counts finds them,
 * else shares of the largest (65535), an entry > 0 at least 1 (its move stays in the target), 0 stays 0. */
static void policy_to_q16(const float *p, int64_t n, uint16_t *q) {
    if (policy_counts(p, n, q) == 0) return;
    float mx = 0;
    for (int64_t i = 0; i < n; i++) mx = p[i] > mx ? p[i] : mx;
    for (int64_t i = 0; i < n; i++) {
        long v = mx > 0 ? lround((double)p[i] / mx * 65535.0) : 0;
        q[i] = (uint16_t)(p[i] > 0 && v < 1 ? 1 : v > 65535 ? 65535 : v);
    }
}

int shard_write(const shard_builder_t *b, const char *path, char *err, size_t errlen) {
    if (!b || !path) {
        set_err(err, errlen, "%s: shard_write: no builder", path ? path : "(null)");
        return -1;
    }
    if (b->rows != b->done_rows) {
        set_err(err, errlen, "%s: a game is still open (%lld rows): end or abort it before writing", path,
                (long long)(b->rows - b->done_rows));
        return -1;
    }
    const shard_format_t *f = &b->fmt;
    int64_t R = b->done_rows, nnz = b->nnz;
    st_writer_t *w = st_writer_new();
    if (!w) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    /* The optional surprise column only when a row has a surprise. */
    int surprise = 0;
    for (int64_t r = 0; r < R && !surprise; r++) surprise = b->surprise[r] >= 0;
    /* The optional moves_left column only when a row's game length is known. */
    int moves_left = 0;
    for (int64_t r = 0; r < R && !moves_left; r++) moves_left = b->moves_left[r] >= 0;
    int v2 = b->version == SHARD_VERSION, set = v2 && b->set;
    /* Version 2 keeps the policy targets as 16-bit counts (policy_to_q16), and its games' ids and row counts
     * once a game. */
    uint16_t *q16 = NULL;
    int64_t *gids = NULL;
    uint32_t *grows = NULL;
    if (v2 && !set) {
        q16 = malloc(sizeof(uint16_t) * (size_t)(nnz > 0 ? nnz : 1));
        gids = malloc(sizeof(int64_t) * (size_t)(b->ngames > 0 ? b->ngames : 1));
        grows = malloc(sizeof(uint32_t) * (size_t)(b->ngames > 0 ? b->ngames : 1));
        if (!q16 || !gids || !grows) {
            free(q16), free(gids), free(grows);
            st_writer_free(w);
            set_err(err, errlen, "%s: out of memory", path);
            return -1;
        }
        for (int64_t r = 0; r < R; r++) {
            int64_t pb = b->offsets[r], pe = r + 1 < R ? (int64_t)b->offsets[r + 1] : nnz;
            policy_to_q16(b->prob + pb, pe - pb, q16 + pb);
        }
        for (int32_t g = 0; g < b->ngames; g++) gids[g] = b->games[g].id, grows[g] = (uint32_t)b->games[g].row_count;
    }
    /* Widest dtype first: every column stays aligned in a reader's mapping. */
    const struct {
        const char *name;
        st_dtype_t dt;
        int32_t ndim;
        int64_t d0, d1;
        const void *data;
        int skip;
    } cols[] = {
        {"game_id", ST_DTYPE_I64, 1, v2 ? b->ngames : R, 0, v2 ? (const void *)gids : b->game_id, set},
        {"hand", ST_DTYPE_F32, 2, R, f->hand_n, b->hand, v2},
        {"policy_prob", ST_DTYPE_F32, 1, nnz, 0, b->prob, v2},
        {"root_q", ST_DTYPE_F32, 1, R, 0, b->root_q, 0},
        {"surprise", ST_DTYPE_F32, 1, R, 0, b->surprise, !surprise},
        {"policy_offsets", ST_DTYPE_U32, 1, R, 0, b->offsets, set},
        {"game_rows", ST_DTYPE_U32, 1, b->ngames, 0, grows, !grows},
        {"policy_label", ST_DTYPE_U16, 1, nnz, 0, b->label, set},
        {"policy_q16", ST_DTYPE_U16, 1, nnz, 0, q16, !q16},
        {"ply", ST_DTYPE_U16, 1, R, 0, b->ply, 0},
        {"move", ST_DTYPE_U16, 1, R, 0, b->move, 0},
        {"moves_left", ST_DTYPE_I16, 1, R, 0, b->moves_left, !moves_left},
        {"planes", ST_DTYPE_U8, 2, R, f->planes_bytes, b->planes, v2},
        {"legal", ST_DTYPE_U8, 2, R, f->legal_bytes, b->legal, v2},
        {"position", ST_DTYPE_U8, 2, R, v2 ? SHARD_HCP_BYTES : SHARD_POSITION_BYTES, b->position, 0},
        {"result", ST_DTYPE_I8, 1, R, 0, b->result, 0},
        {"reason", ST_DTYPE_U8, 1, R, 0, b->reason, !set},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof cols / sizeof cols[0]; i++) {
        if (cols[i].skip) continue;
        int64_t shape[2] = {cols[i].d0, cols[i].d1};
        rc = st_writer_add(w, cols[i].name, cols[i].dt, cols[i].ndim, shape, cols[i].data);
        if (rc != 0) set_err(err, errlen, "%s: cannot add column '%s'", path, cols[i].name);
    }
    const struct {
        const char *key;
        int64_t v;
    } meta[] = {
        {"koma.version", b->version},           {"koma.rows", R},
        {"koma.games", b->ngames},              {"koma.nnz", nnz},
        {"koma.features_version", f->features_version}, {"koma.planes_bytes", f->planes_bytes},
        {"koma.hand_n", f->hand_n},             {"koma.legal_bytes", f->legal_bytes},
    };
    /* Version 2: no widths (nothing derived is stored), and the position's layout by name. */
    size_t nmeta = v2 ? 4 : 8;
    if (rc == 0 && (rc = st_writer_meta(w, "koma.kind", SHARD_KIND)) != 0) set_err(err, errlen, "%s: out of memory", path);
    if (rc == 0 && v2 && ((rc = st_writer_meta(w, "koma.position", "hcp")) != 0 ||
                          (rc = st_writer_meta(w, "koma.set", set ? "1" : "0")) != 0))
        set_err(err, errlen, "%s: out of memory", path);
    for (size_t i = 0; rc == 0 && i < nmeta; i++) {
        char v[32];
        snprintf(v, sizeof v, "%" PRId64, meta[i].v);
        if ((rc = st_writer_meta(w, meta[i].key, v)) != 0) set_err(err, errlen, "%s: out of memory", path);
    }
    if (rc == 0) rc = st_writer_write(w, path, err, errlen);
    st_writer_free(w);
    free(q16), free(gids), free(grows);
    return rc == 0 ? 0 : -1;
}

/* ==================================================================================== */
/* registration                                                                         */
/* ==================================================================================== */
db_status_t shard_next_game_id(db_t *db, int64_t *id, char *err, size_t errlen) {
    int64_t games = 0;
    db_status_t st = db_count(db, -1, &games, NULL);
    if (st != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(db));
        return st;
    }
    *id = games + 1;
    return DB_OK;
}

/* The builder's games with their row ranges, for db_shard_insert (which sets
 * the ids). Strings stay the builder's. */
static db_game_t *games_copy(const shard_builder_t *b) {
    db_game_t *g = malloc((size_t)(b->ngames ? b->ngames : 1) * sizeof *g);
    if (g && b->ngames) memcpy(g, b->games, (size_t)b->ngames * sizeof *g);
    return g;
}

/* -1 if the assigned ids are what the file says; else the first game that differs. */
static int32_t ids_differ(const shard_builder_t *b, const db_game_t *g) {
    for (int32_t i = 0; i < b->ngames; i++)
        if (g[i].id != b->games[i].id) return i;
    return -1;
}

static int fill_shard_row(db_shard_t *sh, const shard_builder_t *b, const char *rel_path, int32_t cycle) {
    memset(sh, 0, sizeof *sh);
    if (!rel_path || strlen(rel_path) >= sizeof sh->path) return -1;
    snprintf(sh->path, sizeof sh->path, "%s", rel_path);
    sh->cycle = cycle;
    sh->features_version = b->fmt.features_version;
    sh->rows = b->done_rows;
    return 0;
}

static void join_path(char *out, size_t len, const char *dir, const char *rel) {
    if (!dir || !dir[0]) snprintf(out, len, "%s", rel);
    else snprintf(out, len, "%s/%s", dir, rel);
}

db_status_t shard_register(db_t *db, const char *run_dir, const char *rel_path, int32_t cycle,
                           const shard_builder_t *b, db_shard_t *out, char *err, size_t errlen) {
    db_shard_t sh;
    if (!db || !b || fill_shard_row(&sh, b, rel_path, cycle) != 0) {
        set_err(err, errlen, "register shard '%.64s': no database, no builder, or a path that is empty or too long",
                rel_path ? rel_path : "(null)");
        return DB_INVALID;
    }
    if (b->rows != b->done_rows) {
        set_err(err, errlen, "register shard '%s': a game is still open", rel_path);
        return DB_INVALID;
    }
    char abs[DB_PATH_MAX + 1100];
    join_path(abs, sizeof abs, run_dir, rel_path);
    uint64_t h = 0;
    if (db_file_xxh3(abs, &h, &sh.bytes, err, errlen) != 0) return DB_ERROR;
    snprintf(sh.xxh3, sizeof sh.xxh3, "%016llx", (unsigned long long)h);
    db_game_t *g = games_copy(b);
    if (!g) {
        set_err(err, errlen, "register shard '%s': out of memory", rel_path);
        return DB_ERROR;
    }
    db_status_t st = db_begin(db);
    if (st == DB_OK) {
        st = db_shard_insert(db, &sh, g, b->ngames);
        if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
        int32_t bad = st == DB_OK ? ids_differ(b, g) : -1;
        if (bad >= 0) {
            set_err(err, errlen, "register shard '%s': game %d gets id %lld but the file's game_id column says %lld "
                    "(set the first game id from shard_next_game_id before writing)",
                    rel_path, bad, (long long)g[bad].id, (long long)b->games[bad].id);
            st = DB_CONSTRAINT;
        }
        if (st == DB_OK) {
            st = db_commit(db);
            if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
        }
        if (st != DB_OK) db_rollback(db);
    } else {
        set_err(err, errlen, "%s", db_errmsg(db));
    }
    free(g);
    if (st == DB_OK && out) *out = sh;
    return st;
}

typedef struct {
    const shard_builder_t *b;
} commit_ctx_t;

/* db_shard_write_fn: creates the file's folder, then shard_write. */
static int commit_write(const char *path, void *arg, char *err, size_t errlen) {
    const commit_ctx_t *c = arg;
    char dir[DB_PATH_MAX + 1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (compat_mkdir_p(dir, err, errlen) != 0) return DB_ERROR;
    }
    errno = 0;
    if (shard_write(c->b, path, err, errlen) != 0) return errno == ENOSPC ? DB_FULL : DB_ERROR;
    return 0;
}

db_status_t shard_commit(db_t *db, const char *run_dir, const char *rel_path, int32_t cycle,
                         shard_builder_t *b, db_shard_t *out, char *err, size_t errlen) {
    db_shard_t sh;
    if (!db || !b || fill_shard_row(&sh, b, rel_path, cycle) != 0) {
        set_err(err, errlen, "commit shard '%.64s': no database, no builder, or a path that is empty or too long",
                rel_path ? rel_path : "(null)");
        return DB_INVALID;
    }
    if (b->rows != b->done_rows) {
        set_err(err, errlen, "commit shard '%s': a game is still open", rel_path);
        return DB_INVALID;
    }
    int64_t first = 0;
    db_status_t st = shard_next_game_id(db, &first, err, errlen);
    if (st != DB_OK) return st;
    shard_builder_set_first_game_id(b, first);
    db_game_t *g = games_copy(b);
    if (!g) {
        set_err(err, errlen, "commit shard '%s': out of memory", rel_path);
        return DB_ERROR;
    }
    commit_ctx_t ctx = {b};
    st = db_shard_commit(db, run_dir, &sh, g, b->ngames, commit_write, &ctx);
    if (st != DB_OK) {
        set_err(err, errlen, "%s", db_errmsg(db));
    } else {
        int32_t bad = ids_differ(b, g);
        if (bad >= 0) {
            /* Committed, so it cannot be undone here; only inspection reads game_id. */
            set_err(err, errlen, "commit shard '%s': registered, but game %d got id %lld while the file's game_id "
                    "column says %lld: were games inserted or deleted outside shard_commit?",
                    rel_path, bad, (long long)g[bad].id, (long long)b->games[bad].id);
            st = DB_ERROR;
        }
        if (out) *out = sh;
    }
    free(g);
    return st;
}

db_status_t shard_commit_set(db_t *db, const char *run_dir, const char *rel_path, int32_t cycle,
                             const shard_builder_t *b, const db_set_t *set, db_shard_t *out, char *err,
                             size_t errlen) {
    db_shard_t sh;
    if (!db || !b || !set || b->version != SHARD_VERSION || !b->set || fill_shard_row(&sh, b, rel_path, cycle) != 0) {
        set_err(err, errlen, "commit shard '%.64s': no database, not a position set's builder, or a bad path",
                rel_path ? rel_path : "(null)");
        return DB_INVALID;
    }
    commit_ctx_t ctx = {b};
    db_status_t st = db_shard_commit_set(db, run_dir, &sh, set, commit_write, &ctx);
    if (st != DB_OK) set_err(err, errlen, "%s", db_errmsg(db));
    else if (out) *out = sh;
    return st;
}

/* ---- writer-thread job -------------------------------------------------------------- */
typedef struct {
    shard_builder_t *b;
    char *run_dir;
    char *rel_path;
    int32_t cycle;
    shard_done_fn done;
    void *user;
    db_shard_t shard;
    int ok;
} shard_job_t;

static int job_run(db_t *db, void *arg, char *err, size_t errlen) {
    shard_job_t *j = arg;
    db_status_t st = shard_commit(db, j->run_dir, j->rel_path, j->cycle, j->b, &j->shard, err, errlen);
    j->ok = st == DB_OK;
    return st;
}

static void job_free(shard_job_t *j) {
    free(j->run_dir);
    free(j->rel_path);
    free(j);
}

static void job_done(void *arg, int status, const char *err) {
    shard_job_t *j = arg;
    if (j->done) j->done(j->user, status, err, status == DB_OK && j->ok ? &j->shard : NULL);
    shard_builder_free(j->b);
    job_free(j);
}

int shard_submit(db_writer_t *w, const char *run_dir, const char *rel_path, int32_t cycle,
                 shard_builder_t *b, shard_done_fn done, void *user, int64_t timeout_ms) {
    if (!w || !b || !rel_path || !rel_path[0]) return DB_INVALID;
    shard_job_t *j = calloc(1, sizeof *j);
    if (!j) return DB_ERROR;
    j->run_dir = strdup(run_dir ? run_dir : "");
    j->rel_path = strdup(rel_path);
    if (!j->run_dir || !j->rel_path) {
        job_free(j);
        return DB_ERROR;
    }
    j->b = b;
    j->cycle = cycle;
    j->done = done;
    j->user = user;
    db_job_t job = {job_run, job_done, j};
    int st = db_writer_submit(w, &job, timeout_ms);
    if (st != DB_OK) job_free(j); /* not queued: b stays the caller's */
    return st;
}

/* ==================================================================================== */
/* reader                                                                               */
/* ==================================================================================== */
struct shard {
    st_file_t *f;
    int version; /* SHARD_VERSION_V1 or SHARD_VERSION */
    int set;     /* version 2: a position set */
    int verified; /* every column's XXH3 checked at open */
    shard_format_t fmt;
    int64_t rows, games, nnz;
    shard_columns_t c;
    int64_t *game_end; /* version 2's game shards: (games) the row after each game's last (game_rows summed) */
};

const char *shard_path(const shard_t *s) { return s ? st_path(s->f) : NULL; }
const shard_format_t *shard_format(const shard_t *s) { return &s->fmt; }
int shard_version(const shard_t *s) { return s->version; }
int shard_is_set(const shard_t *s) { return s->set; }
int64_t shard_rows(const shard_t *s) { return s->rows; }
int64_t shard_games(const shard_t *s) { return s->games; }
int64_t shard_nnz(const shard_t *s) { return s->nnz; }
const shard_columns_t *shard_columns(const shard_t *s) { return &s->c; }

int64_t shard_row_game(const shard_t *s, int64_t r) {
    if (s->c.game_id) return s->c.game_id[r];
    if (!s->game_end) return -1;
    int64_t lo = 0, hi = s->games; /* the first game that ends after row r */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (s->game_end[mid] <= r) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->games ? s->c.game_ids[lo] : -1;
}

/* Rows r and r + 1 belong to one game. */
static int same_game(const shard_t *s, int64_t r) {
    if (r + 1 >= s->rows || shard_is_set(s)) return 0;
    return shard_row_game(s, r + 1) == shard_row_game(s, r);
}

void shard_q_lambda(const shard_t *s, float lambda, float *out) {
    const shard_columns_t *c = &s->c;
    /* Backwards: G(last row of a game) = (1-l) q + l z; G(r) = (1-l) q(r) + l * sign * G(r+1). */
    for (int64_t r = s->rows - 1; r >= 0; r--) {
        double q = c->root_q[r], g;
        if (same_game(s, r)) {
            double next = out[r + 1];
            if ((c->ply[r + 1] - c->ply[r]) & 1) next = -next;
            g = (1.0 - lambda) * q + lambda * next;
        } else {
            g = (1.0 - lambda) * q + lambda * (double)c->result[r];
        }
        out[r] = (float)(g > 1 ? 1 : g < -1 ? -1 : g);
    }
}

int32_t shard_row_moves_left(const shard_t *s, int64_t r) {
    return s->c.moves_left ? s->c.moves_left[r] : SHARD_MOVES_LEFT_UNKNOWN;
}

int64_t shard_row_reply(const shard_t *s, const uint16_t *move_label, int64_t r) {
    const shard_columns_t *c = &s->c;
    if (!same_game(s, r) || c->ply[r + 1] != c->ply[r] + 1) return -1;
    int64_t b, e;
    shard_row_policy(s, r + 1, &b, &e);
    return e > b || (move_label && move_label[r + 1] < SHARD_LABEL_NB) ? r + 1 : -1;
}

float shard_row_surprise(const shard_t *s, int64_t r) {
    return s->c.surprise ? s->c.surprise[r] : SHARD_SURPRISE_UNKNOWN;
}

void shard_row_probs(const shard_t *s, int64_t r, float *out) {
    int64_t b, e;
    shard_row_policy(s, r, &b, &e);
    if (e <= b) return;
    if (s->c.policy_prob) {
        memcpy(out, s->c.policy_prob + b, sizeof(float) * (size_t)(e - b));
        return;
    }
    const uint16_t *q = s->c.policy_q16 + b;
    uint64_t sum = 0;
    for (int64_t i = 0; i < e - b; i++) sum += q[i];
    for (int64_t i = 0; i < e - b; i++) out[i] = sum ? q16_prob(q[i], sum) : 0.0f;
}

void shard_row_policy(const shard_t *s, int64_t r, int64_t *begin, int64_t *end) {
    if (!s->c.policy_offsets) {
        *begin = *end = 0;
        return;
    }
    *begin = s->c.policy_offsets[r];
    *end = r + 1 < s->rows ? (int64_t)s->c.policy_offsets[r + 1] : s->nnz;
}

void shard_close(shard_t *s) {
    if (!s) return;
    free(s->game_end);
    st_close(s->f);
    free(s);
}

/* A metadata entry that is a decimal integer in [lo, hi]. */
static int meta_int(const st_file_t *f, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err,
                    size_t errlen) {
    const char *v = st_meta(f, key);
    if (!v) {
        set_err(err, errlen, "%s: metadata '%s' is missing (not a Koma shard?)", st_path(f), key);
        return -1;
    }
    const char *p = v;
    int neg = *p == '-';
    if (neg) p++;
    int64_t x = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (x > (INT64_MAX - 9) / 10) break;
        x = x * 10 + (*p - '0');
    }
    if (neg) x = -x;
    if (!digits || *p || x < lo || x > hi) {
        set_err(err, errlen, "%s: metadata '%s' = '%.32s' is not an integer in [%lld, %lld]", st_path(f), key, v,
                (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Row r's side to move, 0 Black or 1 White, in either version. */
static int row_side(const shard_columns_t *c, int64_t r) {
    return c->hcp ? hcp_side(c->hcp + r * SHARD_HCP_BYTES) : c->position[r * SHARD_POSITION_BYTES + SHARD_POS_SIDE];
}

/* Checks every value a trainer or inspector could trip over. */
static int check_values(const shard_t *s, char *err, size_t errlen) {
    const char *path = st_path(s->f);
    const shard_columns_t *c = &s->c;
    int64_t R = s->rows, nnz = s->nnz;
    if (R > 0 && c->policy_offsets && c->policy_offsets[0] != 0) {
        set_err(err, errlen, "%s: policy_offsets[0] = %u, must be 0", path, (unsigned)c->policy_offsets[0]);
        return -1;
    }
    for (int64_t r = 0; c->policy_offsets && r < R; r++) {
        int64_t b = c->policy_offsets[r], e = r + 1 < R ? (int64_t)c->policy_offsets[r + 1] : nnz;
        if (e < b || e > nnz) {
            if (e > nnz)
                set_err(err, errlen, "%s: policy_offsets: row %lld ends at %lld, beyond nnz %lld", path, (long long)r,
                        (long long)e, (long long)nnz);
            else
                set_err(err, errlen, "%s: policy_offsets decrease at row %lld (%lld then %lld)", path,
                        (long long)r + 1, (long long)b, (long long)e);
            return -1;
        }
        if (e - b > SHARD_LABEL_NB) {
            set_err(err, errlen, "%s: policy_offsets: row %lld has %lld entries, more than %d labels", path,
                    (long long)r, (long long)(e - b), SHARD_LABEL_NB);
            return -1;
        }
    }
    for (int64_t i = 0; i < nnz; i++) {
        if (c->policy_label[i] >= SHARD_LABEL_NB) {
            set_err(err, errlen, "%s: policy_label[%lld] = %u is not below %d", path, (long long)i,
                    (unsigned)c->policy_label[i], SHARD_LABEL_NB);
            return -1;
        }
        float p = c->policy_prob ? c->policy_prob[i] : 0;
        if (!isfinite(p) || p < 0) {
            set_err(err, errlen, "%s: policy_prob[%lld] = %g is not finite and >= 0", path, (long long)i, (double)p);
            return -1;
        }
    }
    int64_t games = 0;
    for (int64_t r = 0; r < R; r++) {
        int8_t res = c->result[r];
        if (res < -1 || res > 1) {
            set_err(err, errlen, "%s: result[%lld] = %d, want -1, 0 or 1", path, (long long)r, res);
            return -1;
        }
        float q = c->root_q[r];
        if (!isfinite(q) || q < -1 || q > 1) {
            set_err(err, errlen, "%s: root_q[%lld] = %g is outside [-1, 1]", path, (long long)r, (double)q);
            return -1;
        }
        if (c->surprise && !(c->surprise[r] == SHARD_SURPRISE_UNKNOWN || (isfinite(c->surprise[r]) && c->surprise[r] >= 0))) {
            set_err(err, errlen, "%s: surprise[%lld] = %g is neither >= 0 nor %g (unknown)", path, (long long)r,
                    (double)c->surprise[r], (double)SHARD_SURPRISE_UNKNOWN);
            return -1;
        }
        if (c->moves_left && c->moves_left[r] < SHARD_MOVES_LEFT_UNKNOWN) {
            set_err(err, errlen, "%s: moves_left[%lld] = %d is neither >= 0 nor %d (unknown)", path, (long long)r,
                    (int)c->moves_left[r], SHARD_MOVES_LEFT_UNKNOWN);
            return -1;
        }
        for (int32_t k = 0; c->hand && k < s->fmt.hand_n; k++) {
            if (!isfinite(c->hand[r * s->fmt.hand_n + k])) {
                set_err(err, errlen, "%s: hand[%lld][%d] is not finite", path, (long long)r, k);
                return -1;
            }
        }
        /* A version-2 position is decoded here only when the checksums were not verified: a verified column
         * is the bytes its writer checked row by row (shard_builder_add_row / _add_set_row decode every
         * position), and decoding 100,000 positions a shard would be most of a first read's cost. */
        const char *why = c->hcp ? (s->verified ? NULL : hcp_check(c->hcp + r * SHARD_HCP_BYTES))
                                 : shard_position_check(c->position + r * SHARD_POSITION_BYTES);
        if (why) {
            set_err(err, errlen, "%s: position[%lld]: %s", path, (long long)r, why);
            return -1;
        }
        if (s->set) continue; /* a position set: rows stand alone */
        int black_res = row_side(c, r) == 0 ? res : -res;
        int64_t gid = shard_row_game(s, r), prev = r > 0 ? shard_row_game(s, r - 1) : 0;
        if (r == 0 || gid != prev) {
            if (r > 0 && gid < prev) {
                set_err(err, errlen, "%s: game_id decreases at row %lld (%lld then %lld): a game's rows must be contiguous",
                        path, (long long)r, (long long)prev, (long long)gid);
                return -1;
            }
            games++;
        } else {
            int prev_black = row_side(c, r - 1) == 0 ? c->result[r - 1] : -c->result[r - 1];
            if (prev_black != black_res) {
                set_err(err, errlen, "%s: result[%lld] = %d contradicts row %lld of the same game (game_id %lld)", path,
                        (long long)r, res, (long long)r - 1, (long long)gid);
                return -1;
            }
        }
    }
    /* Games without rows are legal, so rows can show fewer games than koma.games, never more. */
    if (games > s->games) {
        set_err(err, errlen, "%s: rows belong to %lld games, but koma.games says %lld", path, (long long)games,
                (long long)s->games);
        return -1;
    }
    return 0;
}

/* Column name of s as dtype with shape (d0[, d1]): its tensor, or NULL with err (naming the count, d0_key, when
 * only dimension 0 is off). */
static const st_tensor_t *column(const shard_t *s, const char *name, st_dtype_t dt, int32_t ndim, int64_t d0,
                                 int64_t d1, const char *d0_key, char *err, size_t errlen) {
    int64_t shape[2] = {d0, d1};
    const st_tensor_t *t = st_expect(s->f, name, dt, ndim, shape, err, errlen);
    if (t) return t;
    const st_tensor_t *u = st_find(s->f, name);
    if (u && u->dtype == dt && u->ndim == ndim && u->shape[0] != d0 && (ndim == 1 || u->shape[1] == d1))
        set_err(err, errlen, "%s: column '%s' has %lld rows, koma.%s says %lld", st_path(s->f), name,
                (long long)u->shape[0], d0_key, (long long)d0);
    return NULL;
}

/* The optional columns of either version. */
static int open_optional(shard_t *s, char *err, size_t errlen) {
    int64_t shape[1] = {s->rows};
    if (st_find(s->f, "surprise")) { /* optional: older shards have none */
        const st_tensor_t *t = st_expect(s->f, "surprise", ST_DTYPE_F32, 1, shape, err, errlen);
        if (!t) return -1;
        s->c.surprise = t->data;
    }
    if (st_find(s->f, "moves_left")) { /* optional: older shards and imported positions have none */
        const st_tensor_t *t = st_expect(s->f, "moves_left", ST_DTYPE_I16, 1, shape, err, errlen);
        if (!t) return -1;
        s->c.moves_left = t->data;
    }
    if (s->set && st_find(s->f, "reason")) { /* a position set's: how each record's game ended */
        const st_tensor_t *t = st_expect(s->f, "reason", ST_DTYPE_U8, 1, shape, err, errlen);
        if (!t) return -1;
        s->c.reason = t->data;
        for (int64_t r = 0; r < s->rows; r++)
            if (s->c.reason[r] >= DB_REASON_NB) {
                set_err(err, errlen, "%s: reason[%lld] = %u is no end reason", st_path(s->f), (long long)r,
                        (unsigned)s->c.reason[r]);
                return -1;
            }
    }
    return 0;
}

/* A version-2 shard's metadata and columns (the counts are read). */
static int open_v2(shard_t *s, const shard_format_t *expect, char *err, size_t errlen) {
    const char *path = st_path(s->f);
    const char *layout = st_meta(s->f, "koma.position");
    if (!layout || strcmp(layout, "hcp") != 0) {
        set_err(err, errlen, "%s: koma.position is '%.32s', this build reads 'hcp'", path, layout ? layout : "(missing)");
        return -1;
    }
    int64_t set = 0;
    if (meta_int(s->f, "koma.set", 0, 1, &set, err, errlen) != 0) return -1;
    s->set = (int)set;
    if (set && (s->games != 0 || s->nnz != 0)) {
        set_err(err, errlen, "%s: a position set with koma.games %lld and koma.nnz %lld (both must be 0)", path,
                (long long)s->games, (long long)s->nnz);
        return -1;
    }
    s->fmt = expect ? *expect : (shard_format_t){SHARD_FEATURES_ANY, 0, 0, 0};
    int64_t R = s->rows, nnz = s->nnz;
    const struct {
        const char *name;
        st_dtype_t dt;
        int32_t ndim;
        int64_t d0, d1;
        const char *d0_key;
        int games_only; /* absent from a position set */
    } cols[] = {
        {"position", ST_DTYPE_U8, 2, R, SHARD_HCP_BYTES, "rows", 0},
        {"move", ST_DTYPE_U16, 1, R, 0, "rows", 0},
        {"result", ST_DTYPE_I8, 1, R, 0, "rows", 0},
        {"root_q", ST_DTYPE_F32, 1, R, 0, "rows", 0},
        {"ply", ST_DTYPE_U16, 1, R, 0, "rows", 0},
        {"game_id", ST_DTYPE_I64, 1, s->games, 0, "games", 1},
        {"policy_offsets", ST_DTYPE_U32, 1, R, 0, "rows", 1},
        {"policy_label", ST_DTYPE_U16, 1, nnz, 0, "nnz", 1},
        {"policy_q16", ST_DTYPE_U16, 1, nnz, 0, "nnz", 1},
        {"game_rows", ST_DTYPE_U32, 1, s->games, 0, "games", 1},
    };
    enum { NCOLS = sizeof cols / sizeof cols[0] };
    const void *data[NCOLS] = {0};
    for (int i = 0; i < NCOLS; i++) {
        if (cols[i].games_only && set) {
            if (st_find(s->f, cols[i].name)) {
                set_err(err, errlen, "%s: a position set with a '%s' column", path, cols[i].name);
                return -1;
            }
            continue;
        }
        const st_tensor_t *t =
            column(s, cols[i].name, cols[i].dt, cols[i].ndim, cols[i].d0, cols[i].d1, cols[i].d0_key, err, errlen);
        if (!t) return -1;
        data[i] = t->data;
    }
    s->c = (shard_columns_t){
        .hcp = data[0],
        .move = data[1],
        .result = data[2],
        .root_q = data[3],
        .ply = data[4],
        .game_ids = data[5],
        .policy_offsets = data[6],
        .policy_label = data[7],
        .policy_q16 = data[8],
        .game_rows = data[9],
    };
    if (!set) { /* the games: ids increasing, row counts that add up to the rows */
        s->game_end = malloc(sizeof(int64_t) * (size_t)(s->games > 0 ? s->games : 1));
        if (!s->game_end) {
            set_err(err, errlen, "%s: out of memory", path);
            return -1;
        }
        int64_t end = 0;
        for (int64_t g = 0; g < s->games; g++) {
            if (g > 0 && s->c.game_ids[g] <= s->c.game_ids[g - 1]) {
                set_err(err, errlen, "%s: game_id[%lld] = %lld does not increase (game_id[%lld] = %lld)", path,
                        (long long)g, (long long)s->c.game_ids[g], (long long)g - 1, (long long)s->c.game_ids[g - 1]);
                return -1;
            }
            end += s->c.game_rows[g];
            s->game_end[g] = end;
        }
        if (end != R) {
            set_err(err, errlen, "%s: game_rows add up to %lld rows, koma.rows says %lld", path, (long long)end,
                    (long long)R);
            return -1;
        }
    }
    if (open_optional(s, err, errlen) != 0) return -1;
    return check_values(s, err, errlen);
}

shard_t *shard_open(const char *path, const shard_format_t *expect, uint32_t flags, char *err, size_t errlen) {
    if (!path) {
        set_err(err, errlen, "(null): no path");
        return NULL;
    }
    shard_t *s = calloc(1, sizeof *s);
    if (!s) {
        set_err(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    s->f = st_open(path, (flags & SHARD_OPEN_NO_CHECKSUM) ? 0 : ST_OPEN_VERIFY, err, errlen);
    if (!s->f) goto fail;
    s->verified = !(flags & SHARD_OPEN_NO_CHECKSUM);
    const char *kind = st_meta(s->f, "koma.kind");
    if (!kind || strcmp(kind, SHARD_KIND) != 0) {
        set_err(err, errlen, "%s: koma.kind is '%.32s', not '" SHARD_KIND "'", path, kind ? kind : "(missing)");
        goto fail;
    }
    int64_t version, fv, pb, hn, lb;
    if (meta_int(s->f, "koma.version", 0, INT32_MAX, &version, err, errlen) != 0) goto fail;
    if (version != SHARD_VERSION && version != SHARD_VERSION_V1) {
        set_err(err, errlen, "%s: shard version %lld, this build reads versions %d and %d", path, (long long)version,
                SHARD_VERSION_V1, SHARD_VERSION);
        goto fail;
    }
    s->version = (int)version;
    if (meta_int(s->f, "koma.rows", 0, SHARD_MAX_ROWS, &s->rows, err, errlen) != 0 ||
        meta_int(s->f, "koma.games", 0, SHARD_MAX_ROWS, &s->games, err, errlen) != 0 ||
        meta_int(s->f, "koma.nnz", 0, UINT32_MAX, &s->nnz, err, errlen) != 0)
        goto fail;
    if (version == SHARD_VERSION) {
        if (open_v2(s, expect, err, errlen) != 0) goto fail;
        return s;
    }
    if (meta_int(s->f, "koma.features_version", INT32_MIN, INT32_MAX, &fv, err, errlen) != 0 ||
        meta_int(s->f, "koma.planes_bytes", 1, SHARD_MAX_WIDTH, &pb, err, errlen) != 0 ||
        meta_int(s->f, "koma.hand_n", 0, SHARD_MAX_WIDTH, &hn, err, errlen) != 0 ||
        meta_int(s->f, "koma.legal_bytes", 0, SHARD_MAX_WIDTH, &lb, err, errlen) != 0)
        goto fail;
    s->fmt = (shard_format_t){(int32_t)fv, (int32_t)pb, (int32_t)hn, (int32_t)lb};
    if (expect) {
        const struct {
            const char *what;
            int32_t have, want;
        } cmp[] = {
            {"features_version", s->fmt.features_version, expect->features_version},
            {"planes_bytes", s->fmt.planes_bytes, expect->planes_bytes},
            {"hand_n", s->fmt.hand_n, expect->hand_n},
            {"legal_bytes", s->fmt.legal_bytes, expect->legal_bytes},
        };
        for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
            if (cmp[i].have != cmp[i].want) {
                set_err(err, errlen, "%s: %s is %d, expected %d (a shard of another feature set or build)", path,
                        cmp[i].what, cmp[i].have, cmp[i].want);
                goto fail;
            }
        }
    }
    int64_t R = s->rows, nnz = s->nnz;
    const struct {
        const char *name;
        st_dtype_t dt;
        int32_t ndim;
        int64_t d0, d1;
        const char *d0_key; /* the metadata dimension 0 must equal */
    } cols[] = {
        {"planes", ST_DTYPE_U8, 2, R, pb, "rows"},
        {"hand", ST_DTYPE_F32, 2, R, hn, "rows"},
        {"legal", ST_DTYPE_U8, 2, R, lb, "rows"},
        {"policy_offsets", ST_DTYPE_U32, 1, R, 0, "rows"},
        {"policy_label", ST_DTYPE_U16, 1, nnz, 0, "nnz"},
        {"policy_prob", ST_DTYPE_F32, 1, nnz, 0, "nnz"},
        {"result", ST_DTYPE_I8, 1, R, 0, "rows"},
        {"root_q", ST_DTYPE_F32, 1, R, 0, "rows"},
        {"ply", ST_DTYPE_U16, 1, R, 0, "rows"},
        {"game_id", ST_DTYPE_I64, 1, R, 0, "rows"},
        {"move", ST_DTYPE_U16, 1, R, 0, "rows"},
        {"position", ST_DTYPE_U8, 2, R, SHARD_POSITION_BYTES, "rows"},
    };
    enum { NCOLS = sizeof cols / sizeof cols[0] };
    const void *data[NCOLS];
    for (int i = 0; i < NCOLS; i++) {
        const st_tensor_t *t =
            column(s, cols[i].name, cols[i].dt, cols[i].ndim, cols[i].d0, cols[i].d1, cols[i].d0_key, err, errlen);
        if (!t) goto fail;
        data[i] = t->data;
    }
    s->c = (shard_columns_t){
        .planes = data[0],
        .hand = data[1],
        .legal = data[2],
        .policy_offsets = data[3],
        .policy_label = data[4],
        .policy_prob = data[5],
        .result = data[6],
        .root_q = data[7],
        .ply = data[8],
        .game_id = data[9],
        .move = data[10],
        .position = data[11],
    };
    if (open_optional(s, err, errlen) != 0) goto fail;
    if (check_values(s, err, errlen) != 0) goto fail;
    return s;
fail:
    shard_close(s);
    return NULL;
}

/* ==================================================================================== */
/* batches                                                                              */
/* ==================================================================================== */
#define BATCH_ALIGN 64
static size_t align_up(size_t x) { return (x + BATCH_ALIGN - 1) & ~(size_t)(BATCH_ALIGN - 1); }

shard_batch_t *shard_batch_new(const shard_format_t *fmt, int32_t cap, int64_t nnz_cap, char *err, size_t errlen) {
    if (!format_ok(fmt) || cap < 1 || cap > (1 << 24)) {
        set_err(err, errlen, "shard batch: bad format or capacity %d", cap);
        return NULL;
    }
    if (nnz_cap <= 0) nnz_cap = (int64_t)cap * SHARD_LABEL_NB;
    if (nnz_cap > (int64_t)UINT32_MAX) {
        set_err(err, errlen, "shard batch: %lld policy entries, more than 2^32 - 1", (long long)nnz_cap);
        return NULL;
    }
    size_t n = (size_t)cap;
    enum { NBUF = 14 };
    size_t sz[NBUF] = {
        n * (size_t)fmt->planes_bytes, n * (size_t)fmt->hand_n * sizeof(float), n * (size_t)fmt->legal_bytes,
        (n + 1) * sizeof(uint32_t),    (size_t)nnz_cap * sizeof(uint16_t),       (size_t)nnz_cap * sizeof(float),
        n,                             n * sizeof(float),                        n * sizeof(float),
        (n + 1) * sizeof(uint32_t),    (size_t)nnz_cap * sizeof(uint16_t),       (size_t)nnz_cap * sizeof(float),
        n * SHARD_HCP_BYTES,           n,
    };
    size_t total = 0;
    for (int i = 0; i < NBUF; i++) total += align_up(sz[i]);
    shard_batch_t *b = calloc(1, sizeof *b);
    uint8_t *mem = b ? malloc(total) : NULL;
    if (!mem) {
        free(b);
        set_err(err, errlen, "shard batch: out of memory for %llu bytes", (unsigned long long)total);
        return NULL;
    }
    void *p[NBUF];
    size_t at = 0;
    for (int i = 0; i < NBUF; i++) {
        p[i] = mem + at;
        at += align_up(sz[i]);
    }
    b->fmt = *fmt;
    b->cap = cap;
    b->nnz_cap = nnz_cap;
    b->planes = p[0];
    b->hand = p[1];
    b->legal = p[2];
    b->policy_offsets = p[3];
    b->policy_label = p[4];
    b->policy_prob = p[5];
    b->result = p[6];
    b->root_q = p[7];
    b->moves_left = p[8];
    b->opp_offsets = p[9];
    b->opp_label = p[10];
    b->opp_prob = p[11];
    b->position = p[12];
    b->expand = p[13];
    b->mem_ = mem;
    shard_batch_clear(b);
    return b;
}

void shard_batch_free(shard_batch_t *b) {
    if (!b) return;
    free(b->mem_);
    free(b);
}

void shard_batch_clear(shard_batch_t *b) {
    if (!b) return;
    b->B = 0;
    b->pending = 0;
    b->policy_offsets[0] = 0;
    b->opp_offsets[0] = 0;
}

int shard_row_batch(const shard_t *s, const int64_t *rows, int32_t n, shard_batch_t *out, char *err, size_t errlen) {
    return shard_row_batch_labels(s, NULL, rows, n, out, err, errlen);
}

int shard_row_batch_labels(const shard_t *s, const uint16_t *move_label, const int64_t *rows, int32_t n,
                           shard_batch_t *out, char *err, size_t errlen) {
    if (!s || !out || n < 0 || (n > 0 && !rows)) {
        set_err(err, errlen, "%s: shard_row_batch: bad arguments", s ? shard_path(s) : "(null)");
        return -1;
    }
    const char *path = shard_path(s);
    if (s->version == SHARD_VERSION_V1 && !format_equal(&s->fmt, &out->fmt)) {
        set_err(err, errlen, "%s: format (features_version %d, widths %d/%d/%d) differs from the batch's (%d, %d/%d/%d)",
                path, s->fmt.features_version, s->fmt.planes_bytes, s->fmt.hand_n, s->fmt.legal_bytes,
                out->fmt.features_version, out->fmt.planes_bytes, out->fmt.hand_n, out->fmt.legal_bytes);
        return -1;
    }
    if (n > out->cap - out->B) {
        set_err(err, errlen, "%s: batch full: %d rows do not fit after %d of %d", path, n, out->B, out->cap);
        return -1;
    }
    /* Check everything first, so that a failure appends nothing. */
    int64_t have = out->policy_offsets[out->B], need = 0, ohave = out->opp_offsets[out->B], oneed = 0;
    for (int32_t i = 0; i < n; i++) {
        if (rows[i] < 0 || rows[i] >= s->rows) {
            set_err(err, errlen, "%s: row %lld out of range (the shard has %lld rows)", path, (long long)rows[i],
                    (long long)s->rows);
            return -1;
        }
        int64_t b, e, rr = shard_row_reply(s, move_label, rows[i]);
        shard_row_policy(s, rows[i], &b, &e);
        need += e - b;
        if (s->set && move_label && move_label[rows[i]] < SHARD_LABEL_NB) need += 1; /* its move, one-hot */
        if (rr >= 0) shard_row_policy(s, rr, &b, &e), oneed += e > b ? e - b : 1; /* entries, or a one-hot */
    }
    if (have + need > out->nnz_cap) {
        set_err(err, errlen, "%s: batch full: %lld policy entries do not fit after %lld of %lld", path,
                (long long)need, (long long)have, (long long)out->nnz_cap);
        return -1;
    }
    if (ohave + oneed > out->nnz_cap) {
        set_err(err, errlen, "%s: batch full: %lld opponent-reply policy entries do not fit after %lld of %lld", path,
                (long long)oneed, (long long)ohave, (long long)out->nnz_cap);
        return -1;
    }
    const shard_format_t *f = &s->fmt;
    const shard_columns_t *c = &s->c;
    for (int32_t i = 0; i < n; i++) {
        int64_t r = rows[i], j = out->B + i;
        if (c->hcp) {
            memcpy(out->position + j * SHARD_HCP_BYTES, c->hcp + r * SHARD_HCP_BYTES, SHARD_HCP_BYTES);
            out->expand[j] = 1;
            out->pending++;
        } else {
            memcpy(out->planes + j * f->planes_bytes, c->planes + r * f->planes_bytes, (size_t)f->planes_bytes);
            if (f->hand_n)
                memcpy(out->hand + j * f->hand_n, c->hand + r * f->hand_n, sizeof(float) * (size_t)f->hand_n);
            if (f->legal_bytes)
                memcpy(out->legal + j * f->legal_bytes, c->legal + r * f->legal_bytes, (size_t)f->legal_bytes);
            out->expand[j] = 0;
        }
        int64_t b, e;
        shard_row_policy(s, r, &b, &e);
        if (e > b) {
            memcpy(out->policy_label + have, c->policy_label + b, sizeof(uint16_t) * (size_t)(e - b));
            shard_row_probs(s, r, out->policy_prob + have);
        }
        have += e - b;
        if (s->set && move_label && move_label[r] < SHARD_LABEL_NB) { /* a position's target: its move */
            out->policy_label[have] = move_label[r];
            out->policy_prob[have] = 1.0f;
            have += 1;
        }
        out->policy_offsets[j + 1] = (uint32_t)have;
        out->result[j] = c->result[r];
        out->root_q[j] = c->root_q[r];
        out->moves_left[j] = (float)shard_row_moves_left(s, r);
        int64_t rr = shard_row_reply(s, move_label, r);
        if (rr >= 0) {
            shard_row_policy(s, rr, &b, &e);
            if (e > b) {
                memcpy(out->opp_label + ohave, c->policy_label + b, sizeof(uint16_t) * (size_t)(e - b));
                shard_row_probs(s, rr, out->opp_prob + ohave);
                ohave += e - b;
            } else { /* no policy target at the reply: the move played, one-hot */
                out->opp_label[ohave] = move_label[rr];
                out->opp_prob[ohave] = 1.0f;
                ohave += 1;
            }
        }
        out->opp_offsets[j + 1] = (uint32_t)ohave;
    }
    out->B += n;
    return 0;
}

nn_batch_t shard_batch_view(const shard_batch_t *b) {
    nn_batch_t v = {0};
    v.B = b->B;
    v.planes = b->planes;
    v.hand = b->fmt.hand_n ? b->hand : NULL;
    v.legal = b->legal;
    v.policy_offsets = b->policy_offsets;
    v.policy_label = b->policy_label;
    v.policy_prob = b->policy_prob;
    v.result = b->result;
    v.root_q = b->root_q;
    v.moves_left = b->moves_left;
    v.opp_offsets = b->opp_offsets;
    v.opp_label = b->opp_label;
    v.opp_prob = b->opp_prob;
    return v;
}
