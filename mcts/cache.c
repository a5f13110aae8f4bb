/* cache.c - sharded ring cache of network results (see cache.h). */
#include "mcts/cache.h"

#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"

typedef struct {
    uint64_t key;
    uint64_t pos; /* absolute ring offset + 1 of the entry; 0 = empty */
} Slot;

/* Entry header in the ring, followed by n uint16 logits, padded to 8 bytes. */
typedef struct {
    uint64_t key;
    uint32_t check;
    uint16_t n;
    uint16_t reserved;
    float wdl[3];
    uint32_t pad;
} EntryHeader;

typedef struct {
    compat_mutex_t lock;
    Slot *slots;         /* (slots) */
    uint8_t *ring;       /* (ring_bytes) */
    uint64_t head;       /* absolute offset of the next write */
    MctsCacheStats stats;
    char pad[64];        /* keeps shards' locks on separate cache lines */
} Shard;

struct MctsCache {
    int32_t n_shards;
    int32_t slots;        /* per shard, power of two */
    int64_t ring_bytes;   /* per shard */
    Shard *shards;        /* (n_shards) */
    void *mem;            /* one allocation for every shard's slots and ring */
};

static inline int64_t entry_len(int32_t n) { return (int64_t)sizeof(EntryHeader) + (((int64_t)n * 2 + 7) & ~7); }

MctsCache *mcts_cache_new_geometry(int32_t shards, int32_t slots, int64_t ring_bytes) {
    if (shards < 1 || slots < 1 || (slots & (slots - 1)) != 0 || ring_bytes < 4096) return NULL;
    ring_bytes &= ~(int64_t)7;
    MctsCache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_shards = shards;
    c->slots = slots;
    c->ring_bytes = ring_bytes;
    c->shards = calloc((size_t)shards, sizeof(Shard));
    size_t per = (size_t)slots * sizeof(Slot) + (size_t)ring_bytes;
    c->mem = malloc(per * (size_t)shards);
    if (!c->shards || !c->mem) {
        free(c->shards);
        free(c->mem);
        free(c);
        return NULL;
    }
    for (int32_t i = 0; i < shards; i++) {
        Shard *s = &c->shards[i];
        uint8_t *base = (uint8_t *)c->mem + per * (size_t)i;
        s->slots = (Slot *)base;
        s->ring = base + (size_t)slots * sizeof(Slot);
        compat_mutex_init(&s->lock);
        memset(s->slots, 0, (size_t)slots * sizeof(Slot));
    }
    return c;
}

MctsCache *mcts_cache_new(int64_t bytes) {
    if (bytes < 65536) bytes = 65536;
    int32_t shards = bytes >= (16 << 20) ? 16 : 1;
    int64_t per = bytes / shards;
    /* About one slot per 256 ring bytes (a typical entry is ~200-250 bytes). */
    int64_t want = per / (256 + (int64_t)sizeof(Slot));
    int32_t slots = 1;
    while ((int64_t)slots * 2 <= want && slots < (1 << 30)) slots *= 2;
    int64_t ring = per - (int64_t)slots * (int64_t)sizeof(Slot);
    if (ring < 4096) ring = 4096;
    return mcts_cache_new_geometry(shards, slots, ring);
}

void mcts_cache_free(MctsCache *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_shards; i++) compat_mutex_destroy(&c->shards[i].lock);
    free(c->mem);
    free(c->shards);
    free(c);
}

void mcts_cache_clear(MctsCache *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_shards; i++) {
        Shard *s = &c->shards[i];
        compat_mutex_lock(&s->lock);
        memset(s->slots, 0, (size_t)c->slots * sizeof(Slot));
        s->head = 0;
        compat_mutex_unlock(&s->lock);
    }
}

/* Shard from the high bits, slot from the low bits: independent for Zobrist keys. */
static inline Shard *shard_of(MctsCache *c, uint64_t key) {
    return &c->shards[(uint32_t)((key >> 40) % (uint64_t)c->n_shards)];
}

/* The index is 2-way set associative (1-way with a single slot). */
static inline int32_t ways(const MctsCache *c) { return c->slots >= 2 ? 2 : 1; }
static inline Slot *bucket_of(const MctsCache *c, Shard *s, uint64_t key) {
    return &s->slots[key & (uint64_t)(c->slots - 1) & ~(uint64_t)(ways(c) - 1)];
}

bool mcts_cache_get(MctsCache *c, uint64_t key, uint32_t check, int32_t n, uint16_t *q, float wdl[3]) {
    if (!c || n < 1 || n > MCTS_CACHE_MOVES_MAX) return false;
    Shard *s = shard_of(c, key);
    bool hit = false;
    compat_mutex_lock(&s->lock);
    s->stats.lookups++;
    Slot *set = bucket_of(c, s, key);
    for (int32_t w = 0; w < ways(c) && !hit; w++) {
        const Slot *sl = &set[w];
        if (sl->pos == 0 || sl->key != key) continue;
        uint64_t p = sl->pos - 1;
        int64_t len = entry_len(n);
        /* Live: inside the last ring_bytes written, so not yet overwritten. */
        bool live = p + (uint64_t)len <= s->head && s->head - p <= (uint64_t)c->ring_bytes;
        if (!live) continue;
        const uint8_t *e = s->ring + p % (uint64_t)c->ring_bytes;
        EntryHeader h;
        memcpy(&h, e, sizeof h);
        if (h.key == key && h.check == check && h.n == (uint16_t)n) {
            memcpy(q, e + sizeof h, (size_t)n * 2);
            memcpy(wdl, h.wdl, sizeof h.wdl);
            hit = true;
            s->stats.hits++;
        }
    }
    compat_mutex_unlock(&s->lock);
    return hit;
}

void mcts_cache_put(MctsCache *c, uint64_t key, uint32_t check, int32_t n, const uint16_t *q, const float wdl[3]) {
    if (!c || n < 1 || n > MCTS_CACHE_MOVES_MAX) return;
    Shard *s = shard_of(c, key);
    int64_t len = entry_len(n);
    uint64_t R = (uint64_t)c->ring_bytes;
    EntryHeader h = {.key = key, .check = check, .n = (uint16_t)n};
    memcpy(h.wdl, wdl, sizeof h.wdl);
    compat_mutex_lock(&s->lock);
    if (s->head % R + (uint64_t)len > R) s->head += R - s->head % R; /* never straddle the end */
    uint8_t *e = s->ring + s->head % R;
    memcpy(e, &h, sizeof h);
    memcpy(e + sizeof h, q, (size_t)n * 2);
    /* The way holding this key, else the one written longest ago (or empty). */
    Slot *set = bucket_of(c, s, key), *sl = &set[0];
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

void mcts_cache_stats(MctsCache *c, MctsCacheStats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    for (int32_t i = 0; i < c->n_shards; i++) {
        Shard *s = &c->shards[i];
        compat_mutex_lock(&s->lock);
        out->lookups += s->stats.lookups;
        out->hits += s->stats.hits;
        out->inserts += s->stats.inserts;
        compat_mutex_unlock(&s->lock);
    }
}
