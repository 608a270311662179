/* alloc/cache_internal.h: the caching allocator's records, shared by
 * cache.c (malloc, free, segments, OOM) and cache_state.c (streams, stats,
 * empty_cache, snapshot state, invariant checker).
 *
 * A device holds segments (one provider allocation each, in the small or
 * the large pool); a segment is tiled by blocks in address order, linked
 * prev/next.  A block is allocated (in the pointer map), pending free
 * (freed while other streams still use it; on the device's pending list)
 * or inactive (cached: in its pool's bins, cache_bins.c, ordered by
 * (stream, size, address)).
 * An expandable segment (alloc/cache_expand.c) is a reserved address range
 * whose blocks tile all of it: mapped ones as above, and unmapped ones
 * (inactive, page-aligned, in their pool's `unmapped` tree keyed
 * (stream, address)) where no physical page is behind the range.
 * Lock: everything here is guarded by the device's lock (lock.h); the
 * pointer-map entries of a device's blocks change only while it is held.
 */
#ifndef TDM_ALLOC_CACHE_INTERNAL_H
#define TDM_ALLOC_CACHE_INTERNAL_H

#include "alloc_internal.h"
#include "lock.h"
#include "meta.h"
#include "tree.h"

#define TDM__MIN_BLOCK ((uint64_t)512)
#define TDM__SMALL_SIZE ((uint64_t)1 << 20)     /* largest small-pool block */
#define TDM__SMALL_BUFFER ((uint64_t)2 << 20)   /* small-pool segment */
#define TDM__LARGE_BUFFER ((uint64_t)20 << 20)  /* large-pool segment */
#define TDM__MIN_LARGE_ALLOC ((uint64_t)10 << 20)
#define TDM__ROUND_LARGE ((uint64_t)2 << 20)

typedef struct cseg cseg;

typedef struct cbin_stream cbin_stream;

/* What only a block that other streams use, or a pending one, needs:
 * apart, so that a block is two cache lines (a split writes every field
 * of its new block, a malloc and a free read both lines). */
typedef struct cblock_cold {
    struct cblock *pend_prev, *pend_next; /* pending list while pending */
    uint64_t *uses;              /* other streams using it: inline or mapped */
    uint64_t uses_inline[4];
    uint32_t uses_cap;           /* room in `uses` */
    uint32_t free_stack;         /* stack of the pending free's events */
} cblock_cold;

typedef struct cblock {
    /* First cache line: what best fit, split and merge read. */
    tdm__tnode node;             /* pool bins link while inactive */
    uint64_t addr;               /* device address */
    uint64_t size;               /* bytes, multiple of 512 */
    struct cblock *prev, *next;  /* address neighbours in the segment */
    uint8_t state;               /* tdm_block_state */
    uint8_t mapped;              /* 0: unmapped range of an expandable segment */
    uint8_t pool;                /* its segment's pool and expandable flag */
    uint8_t expandable;          /* (copied: no trip to the segment) */
    uint8_t wait;                /* TDM__WAIT_*: what a pending block awaits */
    _Atomic uint8_t category;    /* tdm_category; tdm_tag_ptr may set it */
    uint16_t bin;                /* while in its stream's bins: which one */
    /* Second cache line: the rest a malloc and a free touch.  (Its stream
     * is its segment's: tdm__cblock_stream.) */
    struct cbin_stream *bins;    /* the bins of that stream in its pool, once
                                    known (cache_bins.h); NULL: look up */
    tdm__tnode **bin_link;       /* while in a bin: the slot holding `node` */
    cseg *seg;
    uint64_t requested;          /* bytes asked for; 0 while inactive */
    uint64_t alloc_time_ns;      /* 0 unless recorded */
    uint64_t gc_base;            /* pool's call count when it was cached */
    uint32_t stack_id;           /* allocation stack while active */
    uint32_t nuses;              /* entries used in cold->uses */
    cblock_cold *cold;           /* NULL until another stream uses it
                                    (tdm__cache_add_use); back to NULL when
                                    it is cached again */
} cblock;
_Static_assert(sizeof(cblock) == 128, "a block is two cache lines");

/* What a pending-free block waits for.  `uses` holds stream ids, except
 * under TDM__WAIT_MARKERS, where it holds the provider's markers (one per
 * stream, recorded at the free). */
enum {
    TDM__WAIT_SYNC = 0,     /* tdm_stream_synchronize of each stream (sim) */
    TDM__WAIT_MARKERS = 1,  /* the markers to be done */
    TDM__WAIT_DEFERRED = 2, /* freed during a graph capture: markers are
                               recorded once no capture is underway */
};

struct cseg {
    cseg *prev, *next;           /* the device's segment list */
    cblock *first;               /* lowest block */
    uint64_t addr, size;         /* device address, bytes */
    uint64_t stream;
    uint32_t stack_id;           /* stack that made it */
    uint8_t pool;                /* TDM_POOL_SMALL / TDM_POOL_LARGE */
    uint8_t expandable;          /* addr/size: the reserved range */
    uint64_t page;               /* expandable: bytes per physical page */
    uint64_t mapped;             /* expandable: bytes mapped (reserved stat) */
    uint64_t *handles;           /* expandable: page i's handle, 0 = unmapped */
};

/* A block's stream: its segment's (blocks never cross streams). */
static inline uint64_t tdm__cblock_stream(const cblock *b)
{
    return b->seg->stream;
}

/* A pool's cached blocks by (stream, size, address): per stream, size
 * bins with a bitmap (cache_bins.c). */
typedef struct cbins {
    cbin_stream **streams;       /* sorted by stream id */
    uint32_t nstreams, cap;
    cbin_stream *last;           /* the stream looked up last */
    size_t count;                /* blocks held */
    int reference;               /* the tree below holds them instead */
    tdm__tree ref;
} cbins;

typedef struct cmap_slot {
    uint64_t addr; /* TDM__CMAP_EMPTY, TDM__CMAP_GONE or a block's address */
    cblock *block;
} cmap_slot;

/* A device's allocated blocks by address (cache_map.c). */
typedef struct cmap {
    cmap_slot *slots;            /* [cap], a power of two; NULL when empty */
    size_t cap, count;
    size_t used;                 /* slots not empty: count + those gone */
    unsigned shift;              /* 64 - log2(cap): the hash's top bits */
} cmap;

typedef struct cpool {
    cbins bins;                  /* inactive mapped blocks */
    tdm__tree unmapped;          /* unmapped blocks, (stream, addr) */
    uint64_t calls;              /* get_free_block calls: the GC's clock */
    uint8_t kind;                /* TDM_POOL_SMALL / TDM_POOL_LARGE */
} cpool;

/* A device's caching allocator is one shard or more (cache_shard.c):
 * each is a tdm__cache_device of its own, with its own lock, segments,
 * pools, pointer map and stats, and serves the streams given to it.
 * Blocks never cross streams (best fit, split and merge stay within a
 * stream, as in PyTorch), so two threads on streams of different shards
 * share no lock and write no common cache line.  Shard 0 is the device
 * (tdm__alloc_g.cache[device]); more shards come when a second stream
 * allocates.  While a device has one shard (`solo`) its stats are kept
 * exactly as before; with more, each shard's stat `peak` is a ceiling
 * (its share of the device's peak, below which it may grow without the
 * others), and the device's peaks live in the group (cache_shard.c). */
#define TDM__SHARDS_MAX 8

typedef struct tdm__cache_group tdm__cache_group;

enum {
    TDM__SOLO_SHARDS = 0, /* the device has shards */
    TDM__SOLO_NEW = 1,    /* one shard, no stream served yet */
    TDM__SOLO_STREAM = 2, /* one shard, serving solo_stream (and maybe more) */
};

struct tdm__cache_device {
    /* The addresses its segments have ever covered, [span_lo, span_hi):
     * widened under the lock as segments come, read without it to find
     * which devices a freed pointer can be on (tdm__cache_free_any), so
     * by every device's frees.  With `index` (set once) they have this
     * cache line to themselves: beside the lock and the pools, which the
     * device's own calls write every time, each free on another device
     * pulled the line away from this device's thread (two threads on
     * devices of their own took 2.4x one thread's time per pair).
     * Shard 0's span covers all the device's shards. */
    _Atomic uint64_t span_lo, span_hi;
    int index;
    uint8_t shard;               /* its number in the group */
    /* Shard 0: TDM__SOLO_* (while the device has this one shard, the
     * calls for `solo_stream` go straight to it; others go the sharded
     * way). */
    _Atomic uint8_t solo;
    _Atomic uint64_t solo_stream;
    tdm__cache_group *group;     /* the device's shards */
    tdm__lock lock __attribute__((aligned(64)));
    cpool small, large;
    cmap map;                    /* allocated blocks by address */
    cseg *segs;                  /* all segments, newest first */
    size_t nsegs;
    cblock *pending;             /* pending-free blocks */
    uint32_t nwaiting;           /* of them, TDM__WAIT_MARKERS / _DEFERRED */
    uint32_t nspare;             /* markers kept for reuse */
    void *spare[16];
    tdm__stats_acc stats;
    tdm__objpool block_pool, seg_pool;
    tdm__objpool cold_pool;      /* blocks' cold parts (cblock_cold) */
    /* Expandable segments' page sizes per pool (small, large); 0 when
     * segments are normal ones. */
    uint64_t page[2];
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct tdm__cache_device, span_hi) + sizeof(uint64_t) <= 64 &&
                   offsetof(struct tdm__cache_device, index) + sizeof(int) <= 64 &&
                   offsetof(struct tdm__cache_device, group) + sizeof(void *) <= 64 &&
                   offsetof(struct tdm__cache_device, lock) == 64,
               "the spans and index share no cache line with what the device's calls write");

/* The stream table: which shard serves a stream (set once per stream,
 * under every shard's lock; read without a lock). */
#define TDM__STREAM_SLOTS 64

struct tdm__cache_group {
    /* Read by the sharded calls, written only when a shard or a stream
     * comes. */
    _Atomic(tdm__cache_device *) shard[TDM__SHARDS_MAX];
    _Atomic int nshards;
    int max_shards;              /* 1 when a setting needs one device-wide pool */
    _Atomic uint64_t stream_key[TDM__STREAM_SLOTS];
    _Atomic uint8_t stream_shard[TDM__STREAM_SLOTS]; /* shard + 1; 0: empty */
    int nstreams;                /* streams given a shard (under all locks) */
    /* Pending frees waiting on markers in all shards: a malloc completes
     * those of every shard (PyTorch's process_events), so while some
     * wait the sharded malloc takes every lock.  Changes rarely. */
    _Atomic uint32_t waiting __attribute__((aligned(64)));
    /* The device's peaks while it has shards (under all their locks):
     * each stat's shard ceilings sum to it.  From here on, what only the
     * calls under every lock write: off the line of `waiting`, which every
     * sharded malloc reads. */
    int64_t peak[3][TDM__ST_COUNT] __attribute__((aligned(64)));
    /* During a call under every lock: the shares of the room below the
     * peaks that the other shards had not used (tdm__cache_peaks_rebase). */
    int64_t unused[TDM__SHARDS_MAX][3][TDM__ST_COUNT];
    /* ... and the ceilings of the shard that made it (at its start), and
     * which stats it rebases (tdm__cache_peaks_rebase's `pool`). */
    int64_t mine_had[3][TDM__ST_COUNT];
    int8_t rebase_pool;
    /* Each shard's highest values that rebases saw: what it may need;
     * and how many of the others' rebases ran since it last ran short
     * (up to TDM__IDLE_REBASES: it has gone quiet). */
    int64_t most[TDM__SHARDS_MAX][3][TDM__ST_COUNT];
    uint8_t idle[TDM__SHARDS_MAX];
};

#define TDM__IDLE_REBASES 8

/* The moments of a call under every lock, for tdm__cache_peaks_rebase. */
enum { TDM__REBASE_BEGIN, TDM__REBASE_MID, TDM__REBASE_END };

static inline cpool *tdm__cache_pool(tdm__cache_device *d, int kind)
{
    return kind == TDM_POOL_SMALL ? &d->small : &d->large;
}

static inline int tdm__cache_expandable(const tdm__cache_device *d, int kind)
{
    return d->page[kind == TDM_POOL_LARGE] != 0;
}

/* cache_bins.c: the (stream, size, address) order of cached blocks */
void tdm__bins_init(cbins *bs, int reference);
void tdm__bins_destroy(cbins *bs);
/* Makes room for the stream's blocks; 0 without host memory.  Must
 * precede the first insert of a block of that stream. */
int tdm__bins_prepare(cbins *bs, uint64_t stream);
/* The stream's last block before (size, address 0). */
cblock *tdm__bins_find_lt(cbins *bs, uint64_t stream, uint64_t size);
/* The neighbours of b (which may have left the bins) in its stream. */
cblock *tdm__bins_next_in_stream(cbins *bs, const cblock *b);
cblock *tdm__bins_prev_in_stream(cbins *bs, const cblock *b);
/* Every block, streams in ascending order. */
cblock *tdm__bins_first(cbins *bs);
cblock *tdm__bins_next(cbins *bs, const cblock *b);
/* Whether b is in the bins, where its key says. */
int tdm__bins_holds(cbins *bs, const cblock *b);
/* Whether each bin's bit says whether it holds blocks (and the summary
 * bit over it is set when it does), each list bin's length is its
 * blocks' count (its ordered list and those set aside), within the
 * bound, with its flag set while blocks are set aside; every block of a
 * list is of the bin's size class, none has a left link, the ordered
 * list is in order; and each treap bin holds blocks, none set aside;
 * *bad gets the first bin that fails. */
int tdm__bins_shape_ok(const cbins *bs, unsigned *bad);

/* cache_map.c: allocated blocks by address.
 *
 * Open addressing, linear probing; a taken entry's slot is marked gone
 * (or emptied, when the run ends after it), and a put reuses the first
 * free or gone slot on its way: block addresses are unique in the map, so
 * it never needs to look further.  The table is rebuilt (purging what is
 * gone, doubling when a fair share is live) once a quarter of it is not
 * empty.  Put and take are inline: each runs once per call of the
 * allocator, and the call cost a third of their instructions. */
#define TDM__CMAP_EMPTY 0u
#define TDM__CMAP_GONE 1u /* never an address: blocks are 512-byte aligned */

/* Rebuilds the table for one more entry; 0 without host memory. */
int tdm__cmap_rebuild(cmap *m);

static inline size_t tdm__cmap_slot_of(const cmap *m, uint64_t addr)
{
    /* Blocks are 512-byte aligned: the low bits carry nothing. */
    return (size_t)(((addr >> 9) * 0x9e3779b97f4a7c15ULL) >> m->shift);
}

/* 0 without host memory for a larger table. */
static inline int tdm__cmap_put(cmap *m, cblock *b)
{
    if (__builtin_expect((m->used + 1) * 4 > m->cap, 0) && !tdm__cmap_rebuild(m))
        return 0;
    size_t i = tdm__cmap_slot_of(m, b->addr);
    while (__builtin_expect(m->slots[i].addr > TDM__CMAP_GONE, 0))
        i = (i + 1) & (m->cap - 1);
    m->used += m->slots[i].addr == TDM__CMAP_EMPTY;
    m->slots[i] = (cmap_slot){b->addr, b};
    m->count++;
    return 1;
}

/* The slot holding addr; SIZE_MAX if none. */
static inline size_t tdm__cmap_find(const cmap *m, uint64_t addr)
{
    if (m->count == 0 || addr <= TDM__CMAP_GONE)
        return SIZE_MAX;
    size_t i = tdm__cmap_slot_of(m, addr);
    while (__builtin_expect(m->slots[i].addr != addr, 0)) {
        if (m->slots[i].addr == TDM__CMAP_EMPTY)
            return SIZE_MAX;
        i = (i + 1) & (m->cap - 1);
    }
    return i;
}

cblock *tdm__cmap_get(const cmap *m, uint64_t addr);

/* Removes and returns the block at addr; NULL if none. */
static inline cblock *tdm__cmap_take(cmap *m, uint64_t addr)
{
    size_t i = tdm__cmap_find(m, addr);
    if (i == SIZE_MAX)
        return NULL;
    size_t mask = m->cap - 1;
    cblock *b = m->slots[i].block;
    /* The last of its run: no probe passes it, so it can be empty again. */
    if (__builtin_expect(m->slots[(i + 1) & mask].addr == TDM__CMAP_EMPTY, 1)) {
        m->slots[i].addr = TDM__CMAP_EMPTY;
        m->used--;
    } else {
        m->slots[i].addr = TDM__CMAP_GONE;
    }
    m->count--;
    return b;
}

void tdm__cmap_destroy(cmap *m);

/* cache.c */
void tdm__cache_free_block(tdm__cache_device *d, cblock *b, uint32_t es);
/* Puts inactive mapped block b (in no tree) into its pool's tree. */
void tdm__cache_block(tdm__cache_device *d, cblock *b);
/* Merges inactive neighbour `n` (in its tree) into `b` (in none). */
void tdm__cache_merge_into(tdm__cache_device *d, cblock *b, cblock *n);
uint32_t tdm__cache_event_stack(uint32_t sid);
/* Keeps b's first `size` bytes in b and makes r (a fresh record, in no
 * tree) the inactive block of the rest, linked after b, mapped or not as
 * b is. */
void tdm__cache_split_after(cblock *b, cblock *r, uint64_t size);

/* The configuration's max_split_size as the rules use it. */
uint64_t tdm__cache_max_split(void);

/* cache_miss.c: a malloc that no cached block served (shard d's lock
 * held, or `all`: every shard's) */
/* A block of at least `size` (rounded, in pool p of kind `kind`): new
 * memory, after garbage collection, and with the releases PyTorch tries
 * before it reports out of memory.  NULL with *st set and the lock(s)
 * given back when nothing came. */
cblock *tdm__cache_miss(tdm__cache_device *d, cpool *p, int kind, uint64_t size,
                        const tdm__alloc_req *req, tdm_status *st, int all);
/* The out-of-memory event and report for req (`rounded`: its rounded
 * size); gives the lock(s) back; TDM_OUT_OF_MEMORY. */
tdm_status tdm__cache_oom(tdm__cache_device *d, const tdm__alloc_req *req, uint64_t rounded,
                          int all);

/* cache_segment.c: segments from and back to the provider (one shard, its
 * lock held) */
/* Makes s (at addr, bytes) the device's newest segment, held whole by the
 * inactive block b (in no tree), for req's stream in pool `kind`, and
 * counts it. */
void tdm__cache_seg_link(tdm__cache_device *d, cseg *s, cblock *b, uint64_t addr,
                         uint64_t bytes, int kind, const tdm__alloc_req *req);
/* Takes s out of the device's list and uncounts it. */
void tdm__cache_seg_unlink(tdm__cache_device *d, cseg *s);
/* A new segment of `bytes` from the provider, as one inactive block that
 * is in no tree yet.  NULL with *st set when the provider refuses. */
cblock *tdm__cache_alloc_segment(tdm__cache_device *d, int kind, uint64_t bytes,
                                 const tdm__alloc_req *req, int is_retry, tdm_status *st);
/* PyTorch's release_available_cached_blocks: with max_split_size set,
 * frees oversize cached segments of this stream; 1 when enough did. */
int tdm__cache_release_oversize(tdm__cache_device *d, cpool *p, uint64_t size,
                                uint64_t stream);
/* PyTorch's garbage_collect_cached_blocks. */
void tdm__cache_garbage_collect(tdm__cache_device *d);

/* cache_shard.c: a device's shards (see struct tdm__cache_group) */
static inline tdm__cache_device *tdm__cache_shard(tdm__cache_group *grp, int i)
{
    return atomic_load_explicit(&grp->shard[i], memory_order_acquire);
}

static inline int tdm__cache_nshards(tdm__cache_group *grp)
{
    return atomic_load_explicit(&grp->nshards, memory_order_acquire);
}

/* The shard serving `stream`; NULL while none is given it. */
tdm__cache_device *tdm__cache_shard_for(tdm__cache_group *grp, uint64_t stream);
/* Every shard's lock, in order; how many. */
int tdm__cache_lock_all(tdm__cache_group *grp);
void tdm__cache_unlock_all(tdm__cache_group *grp);
/* With `mine`'s lock held: every other shard's lock if each is free now
 * (1), else none (0). */
int tdm__cache_try_lock_others(tdm__cache_group *grp, const tdm__cache_device *mine);
/* Every lock held: the shard serving `stream`, given one (a new shard
 * while there are fewer than the most) if it has none; NULL without host
 * memory for a shard. */
tdm__cache_device *tdm__cache_shard_assign(tdm__cache_group *grp, uint64_t stream);
/* Every lock held, with shards: folds what `mine` pushed its ceilings to
 * into the device's peaks and sets every shard's ceilings again: the
 * others' at their values while `mine` goes on under every lock (`when`
 * TDM__REBASE_BEGIN, then _MID after the others' values went down), or
 * with their shares of the room below the peaks (_END).  `pool` (at
 * _BEGIN; the others repeat it): -1, every stat, or a pool whose cached
 * block the call hands out: the stats that moves. */
void tdm__cache_peaks_rebase(tdm__cache_group *grp, const tdm__cache_device *mine, int when,
                             int pool);
/* Every lock held: peaks reset to the current values (each shard's and
 * the device's). */
void tdm__cache_peaks_reset(tdm__cache_group *grp);
/* Every lock held: the device's stats, the shards' summed. */
void tdm__cache_stats_of(tdm__cache_group *grp, tdm__stats_acc *out);
/* Makes d (zeroed) shard `shard` of device `index` in group grp. */
void tdm__cache_init_shard(tdm__cache_device *d, int index, int shard, tdm__cache_group *grp);

/* Gives back what a malloc holds: shard d's lock, or (`all`) every
 * shard's, the device's peaks settled first. */
static inline void tdm__cache_give_held(tdm__cache_device *d, int all)
{
    if (!all) {
        tdm__lock_give(&d->lock);
        return;
    }
    tdm__cache_peaks_rebase(d->group, d, TDM__REBASE_END, -1);
    tdm__cache_unlock_all(d->group);
}

/* cache_expand.c: expandable segments */
/* Sets d->page from the provider; 0 when it lacks virtual memory
 * management for the device. */
int tdm__cache_expand_init(tdm__cache_device *d);
/* A mapped inactive block of at least `size` bytes (in no tree), from
 * the stream's expandable segments with pages mapped as needed, or a new
 * segment; NULL with *st set when the device is full. */
cblock *tdm__cache_expand_alloc(tdm__cache_device *d, int kind, uint64_t size,
                                const tdm__alloc_req *req, int is_retry, tdm_status *st);
/* Unmaps every whole free page of the pool's expandable segments and
 * releases the segments left with none mapped. */
void tdm__cache_expand_release(tdm__cache_device *d, cpool *p);
/* Gives segment s back whatever its blocks (the allocator's end). */
void tdm__cache_expand_destroy(tdm__cache_device *d, cseg *s);
/* Segments the snapshot shows for s: one per run of mapped blocks. */
size_t tdm__cache_expand_runs(const cseg *s);
/* Completes pending frees (waiting on markers), then releases every cached
 * whole segment; nothing while a graph capture is underway. */
void tdm__cache_release_all(tdm__cache_device *d, tdm_stream stream);
/* tdm__cache_release_all of every shard of a device (every lock held). */
void tdm__cache_release_every_shard(tdm__cache_group *grp, tdm_stream stream);
void tdm__cache_complete_pending(tdm__cache_device *d, int all, uint64_t stream);

/* cache_stream.c: frees ordered after other streams' work */
/* Adds `stream` to the streams using b (record_stream); 0 when out of
 * host memory. */
int tdm__cache_add_use(tdm__cache_device *d, cblock *b, uint64_t stream);
/* Frees b's list of streams or markers (markers back to the spares) and
 * its cold part. */
void tdm__cache_drop_uses(tdm__cache_device *d, cblock *b);
/* Puts b (freed, with uses) on the pending list: with the provider's
 * markers recorded on each stream, or deferred during a capture, or
 * waiting for tdm_stream_synchronize on a device without markers. */
void tdm__cache_pend(tdm__cache_device *d, cblock *b);
/* Takes b off the pending list (its wait done): the counterpart of
 * tdm__cache_pend. */
void tdm__cache_unpend(tdm__cache_device *d, cblock *b);
/* Malloc's first step while frees wait on markers: completes those whose
 * markers are done (never blocks). */
void tdm__cache_poll(tdm__cache_device *d, tdm_stream stream);
/* Waits for every marker of b; 0 (nothing done) during a capture. */
int tdm__cache_wait_markers(tdm__cache_device *d, cblock *b);
/* Whether a graph capture forbids freeing memory or touching markers now
 * (the provider's answer; 0 without stream ops). */
int tdm__cache_capturing(const tdm__cache_device *d, tdm_stream stream);

#include "cache_bins.h"

#endif
