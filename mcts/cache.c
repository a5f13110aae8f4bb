/* cache.c - sharded ring cache of network results (see cache.h). */
#include "mcts/cache.h"

#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

typedef struct {
    uint64_t key;
    uint64_t pos; /* absolute ring offset + 1 of the entry; 0 = empty */
} cache_slot_t;

/* Entry header in the ring, followed by n uint16 logits, padded to 8 bytes. */
typedef struct {
    uint64_t key;
    uint32_t check;
    uint16_t n;
    uint16_t reserved;
    float wdl[3];
    float moves_left; /* NAN: none */
} cache_entry_header_t;

typedef struct {
    compat_mutex_t lock;
    cache_slot_t *slots;         /* (slots) */
    uint8_t *ring;       /* (ring_bytes) */
    uint64_t head;       /* absolute offset of the next write */
    mcts_cache_stats_t stats;
    char pad[64];        /* keeps shards' locks on separate cache lines */
} cache_shard_t;

struct mcts_cache {
    int32_t n_shards;
    int32_t slots;        /* per shard, power of two */
    int64_t ring_bytes;   /* per shard */
    cache_shard_t *shards;        /* (n_shards) */
    void *mem;            /* one allocation for every shard's slots and ring */
};

static inline int64_t entry_len(int32_t n) { return (int64_t)sizeof(cache_entry_header_t) + (((int64_t)n * 2 + 7) & ~7); }

mcts_cache_t *mcts_cache_new_geometry(int32_t shards, int32_t slots, int64_t ring_bytes) {
    if (shards < 1 || slots < 1 || (slots & (slots - 1)) != 0 || ring_bytes < 4096) return NULL;
    ring_bytes &= ~(int64_t)7;
    mcts_cache_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_shards = shards;
    c->slots = slots;
    c->ring_bytes = ring_bytes;
    c->shards = calloc((size_t)shards, sizeof(cache_shard_t));
    size_t per = (size_t)slots * sizeof(cache_slot_t) + (size_t)ring_bytes;
    c->mem = malloc(per * (size_t)shards);
    if (!c->shards || !c->mem) {
        free(c->shards);
        free(c->mem);
        free(c);
        return NULL;
    }
    for (int32_t i = 0; i < shards; i++) {
        cache_shard_t *s = &c->shards[i];
        uint8_t *base = (uint8_t *)c->mem + per * (size_t)i;
        s->slots = (cache_slot_t *)base;
        s->ring = base + (size_t)slots * sizeof(cache_slot_t);
        compat_mutex_init(&s->lock);
        memset(s->slots, 0, (size_t)slots * sizeof(cache_slot_t));
    }
    return c;
}

mcts_cache_t *mcts_cache_new(int64_t bytes) {
    if (bytes < 65536) bytes = 65536;
    int32_t shards = bytes >= (16 << 20) ? 16 : 1;
    int64_t per = bytes / shards;
    /* About one slot per 256 ring bytes (a typical entry is ~200-250 bytes). */
    int64_t want = per / (256 + (int64_t)sizeof(cache_slot_t));
    int32_t slots = 1;
    while ((int64_t)slots * 2 <= want && slots < (1 << 30)) slots *= 2;
    int64_t ring = per - (int64_t)slots * (int64_t)sizeof(cache_slot_t);
    if (ring < 4096) ring = 4096;
    return mcts_cache_new_geometry(shards, slots, ring);
}

void mcts_cache_free(mcts_cache_t *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_shards; i++) compat_mutex_destroy(&c->shards[i].lock);
    free(c->mem);
    free(c->shards);
    free(c);
}

void mcts_cache_clear(mcts_cache_t *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_shards; i++) {
        cache_shard_t *s = &c->shards[i];
        compat_mutex_lock(&s->lock);
        memset(s->slots, 0, (size_t)c->slots * sizeof(cache_slot_t));
        s->head = 0;
        compat_mutex_unlock(&s->lock);
    }
}

/* Shard from the high bits, slot from the low bits: independent for Zobrist keys. */
static inline cache_shard_t *shard_of(mcts_cache_t *c, uint64_t key) {
    return &c->shards[(uint32_t)((key >> 40) % (uint64_t)c->n_shards)];
}

/* The index is 2-way set associative (1-way with a single slot). */
static inline int32_t ways(const mcts_cache_t *c) { return c->slots >= 2 ? 2 : 1; }
static inline cache_slot_t *bucket_of(const mcts_cache_t *c, cache_shard_t *s, uint64_t key) {
    return &s->slots[key & (uint64_t)(c->slots - 1) & ~(uint64_t)(ways(c) - 1)];
}

bool mcts_cache_get(mcts_cache_t *c, uint64_t key, uint32_t check, int32_t n, uint16_t *q, float wdl[3],
                    float *moves_left) {
    if (!c || n < 1 || n > MCTS_CACHE_MOVES_MAX) return false;
    cache_shard_t *s = shard_of(c, key);
    bool hit = false;
    compat_mutex_lock(&s->lock);
    s->stats.lookups++;
    cache_slot_t *set = bucket_of(c, s, key);
    for (int32_t w = 0; w < ways(c) && !hit; w++) {
        const cache_slot_t *sl = &set[w];
        if (sl->pos == 0 || sl->key != key) continue;
        uint64_t p = sl->pos - 1;
        int64_t len = entry_len(n);
        /* Live: inside the last ring_bytes written, so not yet overwritten. */
        bool live = p + (uint64_t)len <= s->head && s->head - p <= (uint64_t)c->ring_bytes;
        if (!live) continue;
        const uint8_t *e = s->ring + p % (uint64_t)c->ring_bytes;
        cache_entry_header_t h;
        memcpy(&h, e, sizeof h);
        if (h.key == key && h.check == check && h.n == (uint16_t)n) {
            memcpy(q, e + sizeof h, (size_t)n * 2);
            memcpy(wdl, h.wdl, sizeof h.wdl);
            if (moves_left) *moves_left = h.moves_left;
            hit = true;
            s->stats.hits++;
        }
    }
    compat_mutex_unlock(&s->lock);
    return hit;
}

void mcts_cache_put(mcts_cache_t *c, uint64_t key, uint32_t check, int32_t n, const uint16_t *q, const float wdl[3],
                    float moves_left) {
    if (!c || n < 1 || n > MCTS_CACHE_MOVES_MAX) return;
    cache_shard_t *s = shard_of(c, key);
    int64_t len = entry_len(n);
    uint64_t R = (uint64_t)c->ring_bytes;
    cache_entry_header_t h = {.key = key, .check = check, .n = (uint16_t)n, .moves_left = moves_left};
    memcpy(h.wdl, wdl, sizeof h.wdl);
    compat_mutex_lock(&s->lock);
    if (s->head % R + (uint64_t)len > R) s->head += R - s->head % R; /* never straddle the end */
    uint8_t *e = s->ring + s->head % R;
    memcpy(e, &h, sizeof h);
    memcpy(e + sizeof h, q, (size_t)n * 2);
    /* The way holding this key, else the one written longest ago (or empty). */
    cache_slot_t *set = bucket_of(c, s, key), *sl = &set[0];
    for (int32_t w = 0; w < ways(c); w++) {
        if (set[w].key == key || set[w].pos == 0) {
            sl = &set[w];
            break;
        }
        if (set[w].pos < sl->pos) sl = &set[w];
    }
    sl->key = key;
    sl->pos = s->head + 1;
    s->head += (uint64_t)len;
    s->stats.inserts++;
    compat_mutex_unlock(&s->lock);
}

void mcts_cache_stats(mcts_cache_t *c, mcts_cache_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    for (int32_t i = 0; i < c->n_shards; i++) {
        cache_shard_t *s = &c->shards[i];
        compat_mutex_lock(&s->lock);
        out->lookups += s->stats.lookups;
        out->hits += s->stats.hits;
        out->inserts += s->stats.inserts;
        compat_mutex_unlock(&s->lock);
    }
}
