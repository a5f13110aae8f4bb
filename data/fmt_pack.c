/* fmt_pack.c - HuffmanCodedPos and PackedSfen, move16, eval <-> value
 * (data/fmt_pack.h). The code tables are cshogi's (src/position.cpp),
 * indexed by engine piece code (cshogi's Piece enum numbers pieces the same
 * way: type + 16 * colour) and, in hand, by cshogi's HandPiece order. */
#include "data/fmt_pack.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef struct {
    uint8_t code; /* bits, LSB first */
    uint8_t bits; /* 0 = no code (kings, unused piece numbers) */
} code_t;

/* clang-format off */
static const code_t HCP_BOARD[32] = {{0x00, 1}, {0x01, 4}, {0x03, 6}, {0x07, 6}, {0x0b, 6}, {0x1f, 8}, {0x3f, 8}, {0x0f, 6}, {0x00, 0}, {0x09, 4}, {0x23, 6}, {0x27, 6}, {0x2b, 6}, {0x9f, 8}, {0xbf, 8}, {0x00, 0}, {0x00, 0}, {0x05, 4}, {0x13, 6}, {0x17, 6}, {0x1b, 6}, {0x5f, 8}, {0x7f, 8}, {0x2f, 6}, {0x00, 0}, {0x0d, 4}, {0x33, 6}, {0x37, 6}, {0x3b, 6}, {0xdf, 8}, {0xff, 8}, {0, 0}};
static const code_t HCP_HAND[7][2] = {{{0x00, 3}, {0x04, 3}}, {{0x01, 5}, {0x11, 5}}, {{0x03, 5}, {0x13, 5}}, {{0x05, 5}, {0x15, 5}}, {{0x07, 5}, {0x17, 5}}, {{0x1f, 7}, {0x5f, 7}}, {{0x3f, 7}, {0x7f, 7}}};
static const code_t HCP_BOX[7] = {{0x02, 3}, {0x09, 5}, {0x0b, 5}, {0x0d, 5}, {0x1d, 5}, {0x0f, 7}, {0x2f, 7}};
static const code_t PSFEN_BOARD[32] = {{0x00, 1}, {0x01, 4}, {0x03, 6}, {0x0b, 6}, {0x07, 6}, {0x1f, 8}, {0x3f, 8}, {0x0f, 6}, {0x00, 0}, {0x05, 4}, {0x13, 6}, {0x1b, 6}, {0x17, 6}, {0x5f, 8}, {0x7f, 8}, {0x00, 0}, {0x00, 0}, {0x09, 4}, {0x23, 6}, {0x2b, 6}, {0x27, 6}, {0x9f, 8}, {0xbf, 8}, {0x2f, 6}, {0x00, 0}, {0x0d, 4}, {0x33, 6}, {0x3b, 6}, {0x37, 6}, {0xdf, 8}, {0xff, 8}, {0, 0}};
static const code_t PSFEN_HAND[7][2] = {{{0x00, 3}, {0x04, 3}}, {{0x01, 5}, {0x11, 5}}, {{0x05, 5}, {0x15, 5}}, {{0x03, 5}, {0x13, 5}}, {{0x07, 5}, {0x17, 5}}, {{0x0f, 7}, {0x4f, 7}}, {{0x1f, 7}, {0x5f, 7}}};
static const code_t PSFEN_BOX[7] = {{0x02, 3}, {0x09, 5}, {0x0d, 5}, {0x0b, 5}, {0x1b, 5}, {0x2f, 7}, {0x3f, 7}};
/* clang-format on */

/* cshogi's HandPiece order -> engine piece type. */
static const piece_type_t HAND_PT[7] = {PT_PAWN, PT_LANCE, PT_KNIGHT, PT_SILVER, PT_GOLD, PT_BISHOP, PT_ROOK};

typedef struct {
    const code_t *board, (*hand)[2], *box;
} tables_t;

static tables_t tables(fmt_pack_t k) {
    if (k == FMT_PACK_PSFEN) return (tables_t){PSFEN_BOARD, PSFEN_HAND, PSFEN_BOX};
    return (tables_t){HCP_BOARD, HCP_HAND, HCP_BOX};
}

/* ---- bits ------------------------------------------------------------------------------- */
/* Appends n <= 8 bits of code (LSB first) at bit *pos of the 256 in w (zeroed; w[4] a spare). */
static inline void put(uint64_t w[5], int32_t *pos, uint32_t code, int32_t n) {
    if (*pos + n > FMT_PACK_BYTES * 8) { /* past the 256 bits: counted, not written (the caller refuses it) */
        *pos += n;
        return;
    }
    int32_t i = *pos >> 6, sh = *pos & 63;
    uint64_t v = code & ((1u << n) - 1);
    w[i] |= v << sh;
    if (sh + n > 64) w[i + 1] |= v >> (64 - sh);
    *pos += n;
}

static inline int matches(uint32_t w, code_t c) { return c.bits && (w & ((1u << c.bits) - 1)) == c.code; }

/* ---- decoding tables: what the next 8 bits start with (every code is at most 8 bits, and prefix-free) ---- */
typedef struct {
    uint8_t what; /* board: the piece code; after the board: hand piece i (0..6) + 7 * colour, or 14 + i: box */
    uint8_t bits; /* 0: no code starts so */
    uint8_t kind; /* board: the piece's unpromoted type (PT_NONE for an empty square), counted without a branch */
} lut_t;

static lut_t g_board_lut[2][256], g_hand_lut[2][256];
static atomic_int g_lut_state; /* 0 none, 1 being made, 2 made */

static void make_luts(void) {
    int s = atomic_load_explicit(&g_lut_state, memory_order_acquire);
    if (s == 2) return;
    int zero = 0;
    if (s == 0 && atomic_compare_exchange_strong(&g_lut_state, &zero, 1)) {
        for (int k = 0; k < 2; k++) {
            tables_t t = tables(k ? FMT_PACK_PSFEN : FMT_PACK_HCP);
            for (uint32_t w = 0; w < 256; w++) {
                for (int p = 0; p < 32; p++)
                    if (matches(w, t.board[p]))
                        g_board_lut[k][w] = (lut_t){(uint8_t)p, t.board[p].bits, (uint8_t)(p ? pt_demote(piece_type(p)) : PT_NONE)};
                for (int i = 0; i < 7; i++) {
                    for (int c = 0; c < 2; c++)
                        if (matches(w, t.hand[i][c])) g_hand_lut[k][w] = (lut_t){(uint8_t)(i + 7 * c), t.hand[i][c].bits, 0};
                    if (matches(w, t.box[i])) g_hand_lut[k][w] = (lut_t){(uint8_t)(14 + i), t.box[i].bits, 0};
                }
            }
        }
        atomic_store_explicit(&g_lut_state, 2, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&g_lut_state, memory_order_acquire) != 2) {} /* another thread makes them */
}

/* ---- decode -------------------------------------------------------------------------- */
/* 64 bits from bit pos of the 256 in w (w[4] = 0: zeros past the end). */
static inline uint64_t bits_at(const uint64_t w[5], int32_t pos) {
    int32_t i = pos >> 6, sh = pos & 63;
    return sh ? (w[i] >> sh) | (w[i + 1] << (64 - sh)) : w[i];
}

const char *fmt_pack_decode(fmt_pack_t k, const uint8_t in[FMT_PACK_BYTES], fmt_board_t *out) {
    make_luts();
    const lut_t *blut = g_board_lut[k == FMT_PACK_PSFEN], *hlut = g_hand_lut[k == FMT_PACK_PSFEN];
    uint64_t w[5] = {0};
    for (int32_t i = 0; i < FMT_PACK_BYTES; i++) w[i >> 3] |= (uint64_t)in[i] << ((i & 7) * 8);
    memset(out, 0, sizeof *out);
    out->side = (uint8_t)(w[0] & 1);
    sq_t ksq[2] = {(sq_t)((w[0] >> 1) & 0x7f), (sq_t)((w[0] >> 8) & 0x7f)};
    if (ksq[0] >= SQ_NB || ksq[1] >= SQ_NB) return "a king's square is past 80";
    if (ksq[0] == ksq[1]) return "both kings on one square";
    out->board[ksq[0]] = (uint8_t)piece_make(COLOR_BLACK, PT_KING);
    out->board[ksq[1]] = (uint8_t)piece_make(COLOR_WHITE, PT_KING);
    int32_t count[PT_HAND_NB] = {0};
    int32_t pos = 15;
    /* The board: codes of at most 8 bits, read from a 64-bit window that moves every 7 codes or so. */
    for (sq_t sq = 0; sq < SQ_NB;) {
        uint64_t b = bits_at(w, pos);
        int32_t used = 0;
        for (; sq < SQ_NB && used <= 56; sq++) {
            if (sq == ksq[0] || sq == ksq[1]) continue;
            lut_t e = blut[(b >> used) & 0xff];
            if (!e.bits) return "no piece code fits the bits of a square";
            used += e.bits;
            out->board[sq] = e.what;
            count[e.kind]++; /* count[PT_NONE]: the empty squares, not looked at */
        }
        pos += used;
        if (pos > 256) return "no piece code fits the bits of a square";
    }
    int32_t held[2][PT_HAND_NB] = {{0}};
    while (pos < 256) {
        uint64_t b = bits_at(w, pos);
        int32_t used = 0;
        for (; pos + used < 256 && used <= 56;) {
            lut_t e = hlut[(b >> used) & 0xff];
            if (!e.bits || pos + used + e.bits > 256) return "no hand or piece-box code fits the bits after the board";
            used += e.bits;
            if (e.what < 14) { /* in a hand; else in the piece box */
                int32_t i = e.what % 7, c = e.what / 7;
                held[c][HAND_PT[i]]++;
                count[HAND_PT[i]]++;
            }
        }
        pos += used;
    }
    for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++) {
        if (count[pt] > PIECE_TOTAL[pt]) return "more pieces of a kind than a game has";
        for (color_t c = 0; c < COLOR_NB; c++)
            for (int32_t n = 0; n < held[c][pt]; n++) out->hand[c] = hand_add(out->hand[c], pt);
    }
    return NULL;
}

/* ---- encode ----------------------------------------------------------------------------- */
int fmt_pack_encode(fmt_pack_t k, const fmt_board_t *b, uint8_t out[FMT_PACK_BYTES]) {
    tables_t t = tables(k);
    memset(out, 0, FMT_PACK_BYTES);
    sq_t ksq[2] = {SQ_NONE, SQ_NONE};
    int32_t left[PT_HAND_NB];
    for (piece_type_t pt = PT_PAWN; pt < PT_HAND_NB; pt++) left[pt] = PIECE_TOTAL[pt];
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        piece_t pc = b->board[sq];
        if (pc == PIECE_NONE) continue;
        piece_type_t pt = piece_type(pc);
        if (pc >= 32 || t.board[pc].bits == 0) {
            if (pt != PT_KING || (pc & ~(PIECE_WHITE_BIT | 15)) || ksq[piece_color(pc)] != SQ_NONE) return -1;
            ksq[piece_color(pc)] = sq;
            continue;
        }
        if (--left[pt_demote(pt)] < 0) return -1;
    }
    if (ksq[0] == SQ_NONE || ksq[1] == SQ_NONE) return -1;
    for (color_t c = 0; c < COLOR_NB; c++)
        for (int32_t i = 0; i < 7; i++)
            if ((left[HAND_PT[i]] -= hand_count(b->hand[c], HAND_PT[i])) < 0) return -1;
    int32_t pos = 0;
    uint64_t w[5] = {0};
    put(w, &pos, b->side & 1u, 1);
    put(w, &pos, (uint32_t)ksq[0], 7);
    put(w, &pos, (uint32_t)ksq[1], 7);
    for (sq_t sq = 0; sq < SQ_NB; sq++) {
        if (sq == ksq[0] || sq == ksq[1]) continue;
        code_t c = t.board[b->board[sq]];
        put(w, &pos, c.code, c.bits);
    }
    for (color_t c = 0; c < COLOR_NB; c++)
        for (int32_t i = 0; i < 7; i++)
            for (int32_t n = hand_count(b->hand[c], HAND_PT[i]); n > 0; n--) put(w, &pos, t.hand[i][c].code, t.hand[i][c].bits);
    for (int32_t i = 0; i < 7; i++)
        for (int32_t n = left[HAND_PT[i]]; n > 0; n--) put(w, &pos, t.box[i].code, t.box[i].bits);
    for (int32_t i = 0; i < FMT_PACK_BYTES; i++) out[i] = (uint8_t)(w[i >> 3] >> ((i & 7) * 8));
    return pos == 256 ? 0 : -1;
}

/* ---- moves ------------------------------------------------------------------------------ */
move_t fmt_move_from_cshogi(uint16_t m16) {
    sq_t to = m16 & 0x7f, from = (m16 >> 7) & 0x7f;
    int promote = (m16 >> 14) & 1;
    if (to >= SQ_NB || (m16 >> 15)) return MOVE_NONE;
    if (from >= SQ_NB) {
        piece_type_t pt = from - (SQ_NB - 1);
        if (pt < PT_PAWN || pt > PT_GOLD || promote) return MOVE_NONE;
        return move_make_drop(pt, to);
    }
    if (from == to) return MOVE_NONE;
    return move_make(from, to, promote != 0);
}

uint16_t fmt_move_to_cshogi(move_t m) {
    uint32_t to = (uint32_t)move_to(m);
    if (move_is_drop(m)) return (uint16_t)(to | ((uint32_t)(SQ_NB - 1 + move_drop_pt(m)) << 7));
    return (uint16_t)(to | ((uint32_t)move_from(m) << 7) | (move_is_promote(m) ? 1u << 14 : 0u));
}

/* ---- values -------------------------------------------------------------------------------- */
float fmt_eval_to_value(int32_t eval, double scale, int32_t max) {
    if (eval >= max) return 1.0f;
    if (eval <= -max) return -1.0f;
    return (float)tanh((double)eval / (2.0 * scale));
}

static int32_t eval_of(double q, double scale, int32_t max) {
    if (!(q > -1.0)) return -max;
    if (!(q < 1.0)) return max;
    double e = 2.0 * scale * atanh(q);
    if (e >= max) return max;
    if (e <= -max) return -max;
    return (int32_t)lround(e);
}

int32_t fmt_value_to_eval(float q, double scale, int32_t max) {
    if (isnan(q)) return 0;
    int32_t e = eval_of(q, scale, max);
    for (int i = 0; i < 16; i++) { /* to the fixed point: e reads back as a float that exports as e */
        int32_t e2 = eval_of(fmt_eval_to_value(e, scale, max), scale, max);
        if (e2 == e) break;
        e = e2;
    }
    return e;
}
