/* test_train_overfit.c - the trainer learns: one small fixed shard of real
 * positions (random playouts from the start position, encoded, legal masks,
 * a one-hot target on the move played, results +-1 with root_q = result)
 * is memorised by train_trainer_run_cycle: the policy, value and legal losses
 * on the whole shard fall by >= 90% and top-1 policy accuracy reaches >= 0.9,
 * measured in inference mode (folded batch norm) on every row. Under
 * KOMA_TEST_SCALE (the sanitizer jobs) the cycle runs that share of its 150
 * steps and the learning bounds are not asserted; the step count and the
 * saved net still are. */
#include "train_test.h"

/* Losses of the trainer's net on every row of the shard, inference mode. */
static nn_metrics_t eval_all(train_trainer_t *tr, const char *shard_path, int32_t rows) {
    char err[1024];
    shard_t *s = shard_open(shard_path, &T_FMT, 0, err, sizeof err);
    KOMA_ASSERT(s);
    shard_batch_t *b = shard_batch_new(&T_FMT, rows, 0, err, sizeof err);
    KOMA_ASSERT(b);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)rows);
    for (int32_t i = 0; i < rows; i++) idx[i] = i;
    KOMA_ASSERT(shard_row_batch(s, idx, rows, b, err, sizeof err) == 0);
    nn_batch_t bt = shard_batch_view(b);
    nn_metrics_t m;
    if (nn_eval_batch(train_trainer_nn(tr), &bt, &m, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        KOMA_ASSERT(0);
    }
    free(idx);
    shard_batch_free(b);
    shard_close(s);
    return m;
}

int main(void) {
    t_scratch("train_overfit");
    char err[2048];
    t_run_t R;
    t_run_open(&R, t_path("run"));
    /* 4 games, rows from ply 6 to 13: 32 distinct middle-game-ish positions */
    t_rng = 4242;
    const char *rel = t_add_shard_from(&R, 1, 4, 14, 6);
    char path[1000];
    snprintf(path, sizeof path, "%s/%s", R.dir, rel);
    shard_t *s = shard_open(path, &T_FMT, 0, err, sizeof err);
    KOMA_ASSERT(s);
    int32_t rows = (int32_t)shard_rows(s);
    /* the positions must be distinct, or the targets could contradict each other */
    const shard_columns_t *c = shard_columns(s);
    int dup = 0;
    for (int32_t i = 0; i < rows; i++)
        for (int32_t j = 0; j < i; j++)
            dup += !memcmp(c->position + (size_t)i * SHARD_POSITION_BYTES, c->position + (size_t)j * SHARD_POSITION_BYTES, 92);
    shard_close(s);
    fprintf(stderr, "shard %s: %d rows, %d duplicate positions\n", rel, rows, dup);
    CHECK(rows == 32 && dup == 0);

    train_config_t cfg = train_config_default();
    snprintf(cfg.net, sizeof cfg.net, "2x32");
    cfg.threads = 1;
    cfg.batch = 32;
    int steps = t_scaled(150, 10);
    cfg.min_steps_per_cycle = cfg.max_steps_per_cycle = steps;
    cfg.opt.lr = 0.05f;
    cfg.opt.warmup_steps = 10;
    cfg.opt.schedule = NN_SCHED_CONSTANT;
    cfg.opt.q_mix = 0.0f;
    cfg.opt.bn_momentum = 0.1f;
    cfg.opt.weight_decay = 1e-5f;
    cfg.opt.w_legal = 100.0f; /* the legal BCE is a mean over 2187 labels: weigh it up to memorise the masks */
    cfg.seed = 3;
    train_trainer_t *tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    if (!tr) fprintf(stderr, "%s\n", err);
    KOMA_ASSERT(tr);
    nn_metrics_t m0 = eval_all(tr, path, rows);
    train_cycle_report_t rep;
    CHECK_OK(train_trainer_run_cycle(tr, 1, &rep, err, sizeof err), err);
    nn_metrics_t m1 = eval_all(tr, path, rows);
    double fp = m1.policy_loss / m0.policy_loss, fv = m1.value_loss / m0.value_loss, fl = m1.legal_loss / m0.legal_loss;
    fprintf(stderr, "overfit, %" PRId64 " steps: policy %.4f -> %.4f (x%.3f), value %.4f -> %.4f (x%.3f), "
            "legal %.5f -> %.5f (x%.3f), acc %.3f -> %.3f, f1 %.3f -> %.3f\n",
            rep.steps, m0.policy_loss, m1.policy_loss, fp, m0.value_loss, m1.value_loss, fv, m0.legal_loss,
            m1.legal_loss, fl, m0.policy_acc, m1.policy_acc, m0.legal_f1, m1.legal_f1);
    CHECK(rep.steps == steps);
    if (t_full()) {
        CHECK(fp <= 0.1 && fv <= 0.1 && fl <= 0.1);
        CHECK(m1.policy_acc >= 0.9);
        CHECK(m1.legal_f1 >= 0.9);
    }
    /* the saved model is the trained net */
    train_trainer_free(tr);
    tr = train_trainer_new(&cfg, R.dir, R.w, NULL, err, sizeof err);
    KOMA_ASSERT(tr && train_trainer_latest_cycle(tr) == 1);
    nn_metrics_t m2 = eval_all(tr, path, rows);
    CHECK(fabs(m2.policy_loss - m1.policy_loss) < 1e-5 && fabs(m2.legal_loss - m1.legal_loss) < 1e-6);
    train_trainer_free(tr);
    t_run_close(&R);
    if (!g_fail) t_rm_rf(t_dir);
    return t_done("test_train_overfit");
}
