/* wire.h - what `selfplay` ranks say to each other: the bytes of each
 * message kind, encoded and decoded here, carried by dist/'s mailbox.
 *
 * Owns: the message kinds (tags) of the self-play job and their byte
 * layouts, version 2, little-endian: a finished game (the record's moves,
 * searched plies, search values, policy surprises, sparse visit
 * distributions, result, end,
 * nets that played it; not the planes, which rank 0 rebuilds by replaying
 * the moves), a net (the model file's bytes with the XXH3 koma.db holds for
 * it), a rank's hello and rates, stop / pause orders, an error text, a
 * training plan (rank 0 -> the training ranks of --train-ranks) and a
 * training rank's report on it.
 * Does not own: sending them (dist/dist.h), what rank 0 does with them
 * (selfplay/ranks.c), the game itself (game.c).
 *
 * Decoding never trusts the bytes: every length is bounded by what is left
 * of the message and by the format's own limits, the trailing XXH3 must
 * match, every move must be legal where it is played (the game is replayed
 * from the start position), labels lie in 0..2186, probabilities and values
 * are finite and in range. A message that fails is refused with a message
 * naming the first thing wrong ("game message: move 31 (7g7f) is not legal
 * here"); nothing of it is used.
 * Threads: any (no state).
 */
#ifndef KOMA_SELFPLAY_WIRE_H
#define KOMA_SELFPLAY_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "selfplay/game.h"
#include "train/trainer.h"

#define SP_WIRE_VERSION 2 /* 2: a game's rows carry their policy surprise */

/* Message tags (dist_mail_send's tag). */
enum {
    SP_TAG_HELLO = 1, /* rank r -> 0: host, pid, backend, device (sp_wire_hello_t) */
    SP_TAG_GAME = 2,  /* rank r -> 0: one finished game */
    SP_TAG_STATS = 3, /* rank r -> 0: its counters (sp_wire_stats_t) */
    SP_TAG_ERROR = 4, /* rank r -> 0: why it cannot go on (text); then it waits for STOP */
    SP_TAG_BYE = 5,   /* rank r -> 0: its last message; it sends nothing after */
    SP_TAG_NET = 6,   /* 0 -> rank r: a net to play with (cycle, XXH3, file bytes) */
    SP_TAG_PAUSE = 7, /* 0 -> rank r: stop / resume starting moves (the run is ahead of its nets) */
    SP_TAG_STOP = 8,  /* 0 -> rank r: finish now (exit code inside) */
    SP_TAG_PLAN = 9,  /* 0 -> training rank r (selfplay --train-ranks): take a cycle's steps with rank 0 */
    SP_TAG_TRAINED = 10, /* training rank r -> 0: how its part of a cycle ended (sp_wire_trained_t) */
};

/* A game as a message (malloc'ed, *len bytes). NULL when out of memory. */
uint8_t *sp_wire_game_encode(const sp_record_t *r, int64_t *len);
/* The record a game message holds, rows rebuilt by replay (sp_record_free
 * it), or NULL with err. */
sp_record_t *sp_wire_game_decode(const uint8_t *buf, int64_t len, char *err, size_t errlen);

/* A net message: model cycle, rank 0's session seed (each rank mixes its
 * own from it), the file's XXH3-64 and its bytes (malloc'ed). */
uint8_t *sp_wire_net_encode(int64_t cycle, uint64_t seed, uint64_t xxh3, const uint8_t *file, int64_t file_len,
                            int64_t *len);
/* Points *file into buf; 0, or -1 with err when the header is malformed or
 * the bytes' XXH3 is not the one announced. */
int sp_wire_net_decode(const uint8_t *buf, int64_t len, int64_t *cycle, uint64_t *seed, uint64_t *xxh3,
                       const uint8_t **file, int64_t *file_len, char *err, size_t errlen);

typedef struct {
    int64_t pid;
    int32_t device;     /* CUDA device, -1 on the CPU */
    char host[128];
    char backend[32];
} sp_wire_hello_t;
typedef struct {
    int64_t searches;   /* moves searched (sp_pool_stats) */
    int64_t evaluated;  /* positions its server evaluated */
    int64_t batches;    /* its server's batches */
    int64_t games;      /* games sent */
    int64_t generation; /* the net generation its server runs */
    int32_t active;     /* games in progress */
} sp_wire_stats_t;

/* A training plan (train_plan_t: cycle, steps, seed, the starting model's
 * path and XXH3, the shard listing: id, cycle, features_version, rows and
 * run-relative path of each) as a message (malloc'ed). NULL when out of
 * memory or a path is too long for the format (255 bytes). */
uint8_t *sp_wire_plan_encode(const train_plan_t *p, int64_t *len);
/* The decoded plan: plan.shards points into shards (sp_wire_plan_free).
 * Paths are refused when absolute or with a ".." part (they are opened
 * under the run directory). */
typedef struct {
    train_plan_t plan;
    db_shard_t *shards;
} sp_wire_plan_t;
int sp_wire_plan_decode(const uint8_t *buf, int64_t len, sp_wire_plan_t *out, char *err, size_t errlen);
void sp_wire_plan_free(sp_wire_plan_t *p); /* its shards; NULL ok */

/* A training rank's report on a cycle. */
enum { SP_TRAINED_OK = 0, SP_TRAINED_STOPPED = 1, SP_TRAINED_FAILED = 2 };
typedef struct {
    int64_t cycle, steps, positions;
    uint64_t weights;    /* hash of its weights after the cycle (0: none) */
    int64_t ms;          /* time of its part */
    int32_t status;      /* SP_TRAINED_* */
    int32_t loaded;      /* 1: it loaded the plan's model file */
    char text[1024];     /* the error, or the route of the sums */
} sp_wire_trained_t;
#define SP_WIRE_TRAINED_MAX 1200
int64_t sp_wire_trained_encode(const sp_wire_trained_t *t, uint8_t *out); /* room for SP_WIRE_TRAINED_MAX */
int sp_wire_trained_decode(const uint8_t *buf, int64_t len, sp_wire_trained_t *t, char *err, size_t errlen);

/* Small fixed messages: encode into out (room for SP_WIRE_SMALL_MAX bytes),
 * returning the length; decode returns 0, or -1 with err. */
#define SP_WIRE_SMALL_MAX 512
int64_t sp_wire_hello_encode(const sp_wire_hello_t *h, uint8_t *out);
int sp_wire_hello_decode(const uint8_t *buf, int64_t len, sp_wire_hello_t *h, char *err, size_t errlen);
int64_t sp_wire_stats_encode(const sp_wire_stats_t *s, uint8_t *out);
int sp_wire_stats_decode(const uint8_t *buf, int64_t len, sp_wire_stats_t *s, char *err, size_t errlen);
/* One integer (STOP's exit code, PAUSE's flag). */
int64_t sp_wire_int_encode(int32_t v, uint8_t *out);
int sp_wire_int_decode(const uint8_t *buf, int64_t len, int32_t *v, char *err, size_t errlen);

#endif
