/* fuzz_record.c - data/record.h: the CSA, KIF and USI game record readers.
 *
 * Input: a whole record file, read once as each format (CSA, KIF, USI) and
 * once with the format guessed from the content (inputs with NUL bytes, which
 * are refused up front, a second time with the NULs as line ends).
 *
 * Besides "no crash, no read past the end, no endless loop" (ASan, libFuzzer's
 * timeout), the properties checked:
 *   - every game handed over replays: its start SFEN reads, every move is
 *     legal in turn (pos_is_valid_move), there are at most REC_MOVES_MAX;
 *     its moves as USI text read back to the same moves;
 *   - results and reasons are in range; game indices grow;
 *   - every reject has a code in range and a NUL-terminated message that
 *     starts with the input's name;
 *   - the reader always says something: a game or a reject.
 */
#include <string.h>

#include "data/record.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "fuzz.h"

static pos_t g_pos, g_pos2; /* large: keep them off the stack */

typedef struct {
    int64_t games, rejects;
    int32_t last_index;
} seen_t;

static int on_game(void *user, const rec_game_t *g) {
    seen_t *s = user;
    char err[256];
    FUZZ_CHECK(g->index > s->last_index, "game index %d after %d", (int)g->index, (int)s->last_index);
    s->last_index = g->index;
    FUZZ_CHECK(g->n_moves >= 0 && g->n_moves <= REC_MOVES_MAX, "%d moves", (int)g->n_moves);
    FUZZ_CHECK(g->result >= -1 && g->result <= 1, "result %d", (int)g->result);
    FUZZ_CHECK((unsigned)g->reason < DB_REASON_NB, "reason %d", (int)g->reason);
    FUZZ_CHECK(memchr(g->start_sfen, 0, sizeof g->start_sfen) != NULL, "start not terminated");
    FUZZ_CHECK(sfen_parse_cstr(&g_pos, g->start_sfen, err, sizeof err) == SFEN_OK, "start '%s': %s", g->start_sfen, err);
    pos_copy(&g_pos2, &g_pos);
    for (int32_t i = 0; i < g->n_moves; i++) {
        FUZZ_CHECK(pos_is_valid_move(&g_pos, g->moves[i]), "game %d move %d 0x%04x not legal", (int)g->index, (int)i + 1,
                   g->moves[i]);
        pos_do_move(&g_pos, g->moves[i]);
    }
    char *usi = rec_moves_usi(g->moves, g->n_moves);
    FUZZ_CHECK(usi != NULL, "rec_moves_usi: out of memory");
    const char *p = usi;
    for (int32_t i = 0; i < g->n_moves; i++) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, " ");
        move_t m = move_from_usi(&g_pos2, p, len);
        FUZZ_CHECK(m == g->moves[i], "move %d '%.*s' reads back as 0x%04x, not 0x%04x", (int)i + 1, (int)len, p, m,
                   g->moves[i]);
        pos_do_move(&g_pos2, m);
        p += len;
    }
    FUZZ_CHECK(*p == 0, "trailing text in the USI moves");
    free(usi);
    s->games++;
    return 0;
}

static void on_reject(void *user, const rec_reject_t *r) {
    seen_t *s = user;
    FUZZ_CHECK(r->code > REC_ERR_NONE && r->code < REC_ERR_NB, "reject code %d", (int)r->code);
    FUZZ_CHECK(memchr(r->msg, 0, sizeof r->msg) != NULL, "reject message not terminated");
    FUZZ_CHECK(strncmp(r->msg, "fuzz: ", 6) == 0, "reject message '%s' does not name the input", r->msg);
    FUZZ_CHECK(r->game >= 0 && r->move >= 0 && r->line >= 0, "reject at game %d move %d line %d", (int)r->game,
               (int)r->move, (int)r->line);
    s->rejects++;
}

static void parse_all(const uint8_t *data, size_t size) {
    for (int f = 0; f < REC_FORMAT_NB; f++) {
        seen_t s = {0, 0, 0};
        rec_sink_t sink = {on_game, on_reject, &s};
        int rc = rec_parse("fuzz", data, size, (rec_format_t)f, &sink);
        FUZZ_CHECK(rc == 0, "rec_parse returned %d", rc);
        FUZZ_CHECK(s.games + s.rejects > 0, "format %s: neither a game nor a reject", rec_format_name((rec_format_t)f));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse_all(data, size);
    /* An input with NUL bytes is refused up front (UTF-16, binary); read it
     * again with them as line ends, so the readers see what follows. */
    if (memchr(data, 0, size)) {
        uint8_t *copy = malloc(size);
        FUZZ_CHECK(copy != NULL, "out of memory");
        for (size_t i = 0; i < size; i++) copy[i] = data[i] ? data[i] : '\n';
        parse_all(copy, size);
        free(copy);
    }
    return 0;
}
