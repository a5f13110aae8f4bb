/* fuzz_sfen.c - engine/sfen.h: the SFEN reader and the USI move reader
 * against a position.
 *
 * Input: the first line is SFEN text (the bytes up to the first '\n', read
 * with their length: no NUL needed, embedded NULs allowed); the rest is USI
 * move text, split at spaces/newlines. When the SFEN is refused the moves
 * are read against the start position.
 *
 * Besides "no crash, no read past the end" (ASan), the properties checked:
 *   - a refused SFEN comes with a NUL-terminated message;
 *   - an accepted SFEN gives a consistent position (pos_validate) that
 *     sfen_write prints, and that text reads back to the same position and
 *     prints identically (a fixed point);
 *   - move_from_usi returns MOVE_NONE or a move that movegen_legal lists;
 *     move_to_usi of it reads back to the same move; playing it keeps the
 *     position consistent; taking all moves back restores the SFEN;
 *   - every 16-bit value taken from a move token: pos_is_valid_move agrees
 *     with the legal move list.
 */
#include <string.h>

#include "engine/movegen.h"
#include "engine/position.h"
#include "engine/sfen.h"
#include "fuzz.h"

static pos_t g_pos, g_pos2; /* large: keep them off the stack */
static move_list_t g_list;

static void check_position(const pos_t *pos, const char *what) {
    const char *bad = pos_validate(pos);
    FUZZ_CHECK(bad == NULL, "%s: inconsistent position: %s", what, bad);
}

static int is_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    size_t line = 0;
    while (line < size && data[line] != '\n') line++;

    char err[256], sfen[SFEN_MAX_LEN], sfen2[SFEN_MAX_LEN];
    memset(err, 0x55, sizeof err);
    sfen_error_t e = sfen_parse(&g_pos, text, line, err, sizeof err);
    if (e != SFEN_OK) {
        FUZZ_CHECK(e > SFEN_OK && e < SFEN_ERR_NB, "error code %d out of range", (int)e);
        FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL, "error message not terminated");
        FUZZ_CHECK(sfen_error_name(e) != NULL, "no name for error %d", (int)e);
        pos_set_startpos(&g_pos);
    } else {
        check_position(&g_pos, "after sfen_parse");
        int32_t n = sfen_write(&g_pos, sfen, sizeof sfen);
        FUZZ_CHECK(n > 0 && n < SFEN_MAX_LEN && (size_t)n == strlen(sfen), "sfen_write returned %d", (int)n);
        sfen_error_t e2 = sfen_parse_cstr(&g_pos2, sfen, err, sizeof err);
        FUZZ_CHECK(e2 == SFEN_OK, "written SFEN '%s' is refused: %s", sfen, err);
        sfen_write(&g_pos2, sfen2, sizeof sfen2);
        FUZZ_CHECK(strcmp(sfen, sfen2) == 0, "SFEN round trip '%s' -> '%s'", sfen, sfen2);
        FUZZ_CHECK(pos_key(&g_pos) == pos_key(&g_pos2), "keys differ after round trip of '%s'", sfen);
    }
    sfen_write(&g_pos, sfen, sizeof sfen);

    /* Moves. */
    int played = 0;
    size_t i = line < size ? line + 1 : size;
    while (i < size && played < 256) {
        while (i < size && is_space(data[i])) i++;
        size_t start = i;
        while (i < size && !is_space(data[i])) i++;
        size_t len = i - start;
        if (len == 0) break;
        movegen_legal(&g_pos, &g_list);
        /* Raw 16-bit values from the token's bytes. */
        for (size_t k = 0; k + 1 < len && k < 8; k += 2) {
            move_t raw = (move_t)(data[start + k] | (data[start + k + 1] << 8));
            bool valid = pos_is_valid_move(&g_pos, raw);
            bool listed = movegen_list_contains(&g_list, raw);
            FUZZ_CHECK(valid == listed, "move 0x%04x: pos_is_valid_move %d, in legal list %d (%s)", raw, valid,
                       listed, sfen);
        }
        move_t m = move_from_usi(&g_pos, text + start, len);
        if (m == MOVE_NONE) continue;
        FUZZ_CHECK(movegen_list_contains(&g_list, m), "move_from_usi gave 0x%04x, not legal in %s", m, sfen);
        char usi[MOVE_USI_MAX];
        int32_t ul = move_to_usi(m, usi);
        FUZZ_CHECK(ul > 0 && ul < MOVE_USI_MAX && (size_t)ul == strlen(usi), "move_to_usi length %d", (int)ul);
        FUZZ_CHECK(move_from_usi(&g_pos, usi, (size_t)ul) == m, "'%s' does not read back as 0x%04x", usi, m);
        if (pos_hist_len(&g_pos) >= POS_HIST_MAX - 1) break;
        pos_do_move(&g_pos, m);
        check_position(&g_pos, "after pos_do_move");
        played++;
    }
    for (int k = 0; k < played; k++) pos_undo_move(&g_pos);
    if (played) {
        check_position(&g_pos, "after pos_undo_move");
        sfen_write(&g_pos, sfen2, sizeof sfen2);
        FUZZ_CHECK(strcmp(sfen, sfen2) == 0, "undo of %d moves: '%s' -> '%s'", played, sfen, sfen2);
    }
    return 0;
}
