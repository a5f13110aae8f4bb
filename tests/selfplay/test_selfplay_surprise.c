/* test_selfplay_surprise.c - the policy surprise self-play records for
 * surprise-weighted training (issue 33 item 3): every row of a full search
 * (PUCT and Gumbel) carries KL(policy target || the net's prior at the root),
 * recomputed here from the hash net's logits of the replayed position
 * (within the search's logit quantization); fast searches carry "unknown";
 * the rows' surprises reach the shard's surprise column, and a shard of fast
 * searches only has no such column. The same shards' move labels as the
 * training window derives them (train_move_labels: from the move and
 * position columns, no replay) are encode_move_label of the move played in
 * the replayed game, on every row, so every row but a game's last has an
 * opponent-reply target (a one-hot where the next row is a fast search). */
#include "sp_test.h"
#include "compat/bits.h"

#include "mcts/cache.h"
#include "selfplay/game.h"
#include "sp_hash_net.h"
#include "train/window.h"

/* call returned 0; else its status and err are printed */
#define CHECK_OK(call, err)                                                                  \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        CHECKF(rc_ == 0, "%s -> %d: %s", #call, rc_, (err));                                 \
    } while (0)

/* KL(target || prior) of row w of r: the prior is the hash net's softmax at
 * the row's position (replayed from the start), at temperature temp. */
static double kl_by_hand(const sp_record_t *r, const sp_row_t *w, double temp, pos_t *pos) {
    pos_set_startpos(pos);
    for (int32_t i = 0; i < w->ply; i++) pos_do_move(pos, r->moves[i]);
    move_list_t l;
    movegen_legal(pos, &l);
    static double logit[ENC_LABEL_NB];
    double mx = -1e300, z = 0;
    for (int32_t i = 0; i < l.n; i++) {
        int32_t lab = encode_move_label(pos, l.moves[i]);
        logit[lab] = (double)(compat_mix64_fin(pos_key(pos) + (uint64_t)lab) >> 40) * (3.0 / 16777216.0) / temp;
        mx = logit[lab] > mx ? logit[lab] : mx;
    }
    for (int32_t i = 0; i < l.n; i++) z += exp(logit[encode_move_label(pos, l.moves[i])] - mx);
    double kl = 0;
    for (uint32_t k = 0; k < w->pol_n; k++) {
        double p = r->pol_prob[w->pol_begin + k], q = exp(logit[r->pol_label[w->pol_begin + k]] - mx) / z;
        kl += p * log(p / q);
    }
    return kl;
}

static void test_rows(const char *search) {
    sp_config_t cfg;
    sp_config_default(&cfg);
    snprintf(cfg.search, sizeof cfg.search, "%s", search);
    cfg.visits = 24;
    cfg.visits_fast = 8;
    cfg.full_prob = 0.5;
    cfg.max_ply = 80;
    cfg.resign_threshold = 0.0;
    mcts_params_t mp;
    sp_config_mcts(&cfg, 1, &mp);
    sp_game_t *g = sp_game_new(&cfg, 3, NULL);
    KOMA_ASSERT(g);
    pos_t *pos = malloc(sizeof *pos);
    KOMA_ASSERT(pos);
    int full = 0, fast = 0, right = 0, unknown = 0, positive = 0;
    static uint16_t replayed[3 * 128]; /* every row's label: encode_move_label of its move in the replayed game */
    int32_t nrep = 0;
    double worst = 0;
    char err[1024] = "";
    shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    shard_builder_t *b = shard_builder_new(&fmt, err, sizeof err);
    KOMA_ASSERT(b);
    for (int k = 0; k < 3; k++) {
        sp_record_t *r = sp_hash_play_game(g, 1 + k);
        KOMA_ASSERT(r && nrep + r->n_rows <= 3 * 128);
        pos_set_startpos(pos);
        for (int32_t i = 0, played = 0; i < r->n_rows; i++) {
            while (played < r->rows[i].ply) pos_do_move(pos, r->moves[played++]);
            replayed[nrep++] = (uint16_t)encode_move_label(pos, r->rows[i].move);
        }
        for (int32_t i = 0; i < r->n_rows; i++) {
            const sp_row_t *w = &r->rows[i];
            if (w->pol_n == 0) {
                fast++;
                unknown += w->surprise == SHARD_SURPRISE_UNKNOWN;
                continue;
            }
            full++;
            double want = kl_by_hand(r, w, mp.policy_temp, pos), d = fabs((double)w->surprise - want);
            worst = d > worst ? d : worst;
            /* the search keeps logits to 1/1024: priors within ~0.1%, and the KL within as much of its terms */
            right += d <= 2e-3 + 2e-3 * want;
            positive += w->surprise > 0;
        }
        CHECK_OK(sp_record_add_to_shard(r, b, 1, 0, NULL, err, sizeof err), err);
        sp_record_free(r);
    }
    fprintf(stderr, "%s: %d full rows (%d with a surprise above 0, worst difference from the hand's KL %.2g), "
            "%d fast rows\n", search, full, positive, worst, fast);
    CHECKF(full > 10 && fast > 10, "%s: %d full and %d fast rows: both kinds are needed", search, full, fast);
    CHECKF(right == full && positive > full / 2, "%s: %d of %d full rows carry the KL of their target from the prior "
           "(worst difference %.3g), %d above 0", search, right, full, worst, positive);
    CHECKF(unknown == fast, "%s: %d of %d fast rows carry no surprise", search, unknown, fast);

    /* into a shard: the column holds each row's surprise, fast rows unknown */
    const char *path = t_path("sp.safetensors");
    CHECK_OK(shard_write(b, path, err, sizeof err), err);
    shard_t *sh = shard_open(path, &fmt, 0, err, sizeof err);
    CHECKF(sh && shard_columns(sh)->surprise, "%s", err);
    if (sh) {
        int match = 0;
        for (int64_t r = 0; r < shard_rows(sh); r++) {
            int64_t pb, pe;
            shard_row_policy(sh, r, &pb, &pe);
            float s = shard_row_surprise(sh, r);
            match += pe > pb ? s >= 0 : s == SHARD_SURPRISE_UNKNOWN;
        }
        CHECKF(match == shard_rows(sh) && shard_rows(sh) == full + fast, "%d of %lld shard rows have the surprise "
               "their policy target says", match, (long long)shard_rows(sh));
        /* the window's move labels: the replay's, every row; replies on every row but a game's last */
        uint16_t *lab = malloc(sizeof(uint16_t) * (size_t)shard_rows(sh));
        KOMA_ASSERT(lab && shard_rows(sh) == nrep && train_move_labels(sh, lab) == 0);
        int same = 0, replies = 0, onehots = 0;
        for (int64_t r = 0; r < shard_rows(sh); r++) {
            same += lab[r] == replayed[r] && lab[r] < SHARD_LABEL_NB;
            int64_t rr = shard_row_reply(sh, lab, r), pb = 0, pe = 0;
            if (rr >= 0) shard_row_policy(sh, rr, &pb, &pe);
            replies += rr == r + 1;
            onehots += rr == r + 1 && pe == pb;
        }
        fprintf(stderr, "%s: %d of %d rows labelled as the replay's moves; %d replies, %d of them one-hots\n", search,
                same, nrep, replies, onehots);
        CHECKF(same == nrep, "%s: %d of %d rows: the window's label is the replayed move's", search, same, nrep);
        CHECKF(replies == nrep - 3 && onehots > 5, "%s: %d of %d rows have a reply (want all but the 3 games' last), "
               "%d one-hots", search, replies, nrep, onehots);
        free(lab);
    }
    shard_close(sh);
    shard_builder_free(b);
    sp_game_free(g);
    free(pos);
}

/* Fast searches only: no policy targets, no surprise column. */
static void test_fast_only(void) {
    sp_config_t cfg;
    sp_config_default(&cfg);
    cfg.visits = 8;
    cfg.visits_fast = 8;
    cfg.full_prob = 0.0;
    cfg.max_ply = 40;
    cfg.resign_threshold = 0.0;
    sp_game_t *g = sp_game_new(&cfg, 5, NULL);
    KOMA_ASSERT(g);
    char err[1024] = "";
    shard_format_t fmt = {ENC_FEATURES_VERSION, ENC_PACKED_BYTES, ENC_HAND, ENC_LEGAL_BYTES};
    shard_builder_t *b = shard_builder_new(&fmt, err, sizeof err);
    sp_record_t *r = sp_hash_play_game(g, 1);
    KOMA_ASSERT(b && r && r->n_rows > 0);
    CHECK_OK(sp_record_add_to_shard(r, b, 1, 0, NULL, err, sizeof err), err);
    const char *path = t_path("fast.safetensors");
    CHECK_OK(shard_write(b, path, err, sizeof err), err);
    shard_t *sh = shard_open(path, &fmt, 0, err, sizeof err);
    CHECKF(sh && !shard_columns(sh)->surprise && shard_row_surprise(sh, 0) == SHARD_SURPRISE_UNKNOWN, "%s", err);
    shard_close(sh);
    sp_record_free(r);
    shard_builder_free(b);
    sp_game_free(g);
}

int main(void) {
    t_scratch("test_selfplay_surprise");
    engine_init();
    test_rows("puct");
    test_rows("gumbel");
    test_fast_only();
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_selfplay_surprise");
}
