/* viewer-export/model/replay_ops.c: the request stream of a recording for
 * `tidemark replay` (replay_ops.h).  Addresses are mapped to dense ids
 * with an open-addressing table, since a device address is reused as soon
 * as its block is freed.  No state, no locks. */
#include "replay_ops.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

typedef struct addr_map {
    uint64_t *keys; /* address + 1; 0 empty, UINT64_MAX a removed entry */
    uint64_t *vals;
    size_t cap, used; /* used counts removed entries too */
} addr_map;

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static int map_grow(addr_map *m)
{
    addr_map g = {.cap = m->cap ? m->cap * 2 : 1024};
    g.keys = calloc(g.cap, sizeof *g.keys);
    g.vals = calloc(g.cap, sizeof *g.vals);
    if (!g.keys || !g.vals) {
        free(g.keys);
        free(g.vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == 0 || m->keys[i] == UINT64_MAX)
            continue;
        size_t j = slot_of(m->keys[i], g.cap);
        while (g.keys[j])
            j = (j + 1) & (g.cap - 1);
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
        g.used++;
    }
    free(m->keys);
    free(m->vals);
    *m = g;
    return 0;
}

static int map_put(addr_map *m, uint64_t addr, uint64_t val)
{
    if ((m->used + 1) * 2 > m->cap && map_grow(m) != 0)
        return -1;
    uint64_t key = addr + 1;
    size_t j = slot_of(key, m->cap);
    while (m->keys[j] && m->keys[j] != UINT64_MAX && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    if (m->keys[j] == 0)
        m->used++;
    m->keys[j] = key;
    m->vals[j] = val;
    return 0;
}

/* The slot holding addr, or -1 when absent. */
static long map_find(const addr_map *m, uint64_t addr)
{
    if (!m->cap)
        return -1;
    uint64_t key = addr + 1;
    for (size_t j = slot_of(key, m->cap);; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] == 0)
            return -1;
        if (m->keys[j] == key)
            return (long)j;
    }
}

/* addr's value in *val, or -1 when absent. */
static int map_get(const addr_map *m, uint64_t addr, uint64_t *val)
{
    long j = map_find(m, addr);
    if (j < 0)
        return -1;
    *val = m->vals[j];
    return 0;
}

/* Removes addr; its value in *val, or -1 when absent. */
static int map_take(addr_map *m, uint64_t addr, uint64_t *val)
{
    long j = map_find(m, addr);
    if (j < 0)
        return -1;
    *val = m->vals[j];
    m->keys[j] = UINT64_MAX;
    return 0;
}

static int busiest_device(const tdm_snap *snap)
{
    size_t best = 0;
    int dev = snap->device_count ? snap->devices[0].index : 0;
    for (size_t d = 0; d < snap->device_count; d++) {
        size_t n = 0;
        for (size_t i = 0; i < snap->event_count; i++)
            n += snap->events[i].action == TDM_ACTION_ALLOC &&
                 snap->events[i].device == snap->devices[d].index;
        if (n > best) {
            best = n;
            dev = snap->devices[d].index;
        }
    }
    return dev;
}

int tdm__replay_key_allowed(const char *key, size_t len)
{
    static const char *const keys[] = {"max_split_size", "roundup_power2_divisions",
                                       "garbage_collection_threshold", "expandable_segments"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strlen(keys[i]) == len && memcmp(keys[i], key, len) == 0)
            return 1;
    return 0;
}

const char *tdm__replay_conf_item(const char **p, const char **end)
{
    if (!**p)
        return NULL;
    /* An item ends at a comma outside [...] (roundup lists hold commas). */
    const char *b = *p, *q = *p;
    int depth = 0;
    while (*q && (*q != ',' || depth > 0)) {
        depth += *q == '[' ? 1 : *q == ']' ? -1 : 0;
        q++;
    }
    *end = q;
    *p = *q ? q + 1 : q;
    while (b < q && (*b == ' ' || *b == '\t'))
        b++;
    return b;
}

/* One PYTORCH_CUDA_ALLOC_CONF item (KEY:VALUE, as a snapshot imported
 * from PyTorch records its settings) in tidemark's words into buf; 0 when
 * it is none replay can apply.  PyTorch's roundup lists use the same
 * [MiB:N,...,>:N] form as tidemark's. */
static size_t torch_item(const char *b, const char *e, char *buf, size_t cap)
{
    const char *colon = memchr(b, ':', (size_t)(e - b));
    if (!colon)
        return 0;
    size_t kn = (size_t)(colon - b);
    const char *v = colon + 1;
    int vn = (int)(e - v);
    int n = 0;
    if (kn == 19 && memcmp(b, "expandable_segments", kn) == 0)
        n = snprintf(buf, cap, "expandable_segments=%d",
                     vn == 4 && (memcmp(v, "True", 4) == 0 || memcmp(v, "true", 4) == 0));
    else if (kn == 17 && memcmp(b, "max_split_size_mb", kn) == 0)
        n = snprintf(buf, cap, "max_split_size=%.*sMiB", vn, v);
    else if ((kn == 24 && memcmp(b, "roundup_power2_divisions", kn) == 0) ||
             (kn == 28 && memcmp(b, "garbage_collection_threshold", kn) == 0))
        n = snprintf(buf, cap, "%.*s=%.*s", (int)kn, b, vn, v);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void tdm__replay_conf_pick(const char *conf, char *out, size_t cap)
{
    size_t len = strlen(out);
    const char *p = conf ? conf : "", *b, *e;
    char item[160];
    while ((b = tdm__replay_conf_item(&p, &e))) {
        const char *eq = memchr(b, '=', (size_t)(e - b));
        size_t tn;
        if (!eq && (tn = torch_item(b, e, item, sizeof item)) != 0) {
            b = item;
            e = item + tn;
            eq = memchr(b, '=', tn);
        }
        if (!eq)
            continue;
        const char *k = eq;
        while (k > b && (k[-1] == ' ' || k[-1] == '\t'))
            k--;
        if (!tdm__replay_key_allowed(b, (size_t)(k - b)))
            continue;
        size_t n = (size_t)(e - b);
        if (len + (len ? 1 : 0) + n + 1 > cap) /* a comma, the item, its NUL */
            break;
        if (len)
            out[len++] = ',';
        memcpy(out + len, b, n);
        len += n;
        out[len] = '\0';
    }
}

/* Whether e is something the allocator did to memory on `device` (not a
 * phase, step, tag or snapshot mark, which may come between). */
static int memory_event(const tdm_event *e, int device)
{
    return e->device == device && e->action <= TDM_ACTION_OOM;
}

static size_t next_memory_event(const tdm_snap *snap, size_t i, int device)
{
    for (i++; i < snap->event_count; i++)
        if (memory_event(&snap->events[i], device))
            break;
    return i;
}

/* Whether the completions of waiting frees that start at event i happened
 * inside an allocation: the allocator completes every waiting free when
 * the device is out of memory, before it gives its cached segments back
 * and tries again.  The run of completions is then followed by segments
 * freed or unmapped and the retried allocation, with no request between.
 * *end gets the index where the run and what follows it end. */
static int completed_in_alloc(const tdm_snap *snap, size_t i, int device, size_t *end)
{
    int released = 0;
    for (; i < snap->event_count; i = next_memory_event(snap, i, device)) {
        unsigned a = snap->events[i].action;
        if (!memory_event(&snap->events[i], device))
            continue;
        if (a == TDM_ACTION_SEGMENT_FREE || a == TDM_ACTION_SEGMENT_UNMAP)
            released = 1;
        else if (a != TDM_ACTION_FREE_COMPLETED)
            break;
    }
    *end = i;
    if (i >= snap->event_count)
        return 0;
    unsigned a = snap->events[i].action;
    return released && (a == TDM_ACTION_ALLOC || a == TDM_ACTION_SEGMENT_ALLOC ||
                        a == TDM_ACTION_SEGMENT_MAP);
}

int tdm__replay_input_build(const tdm_snap *snap, int device, tdm_replay_input *in)
{
    memset(in, 0, sizeof *in);
    in->device = device >= 0 ? device : busiest_device(snap);
    for (size_t d = 0; d < snap->device_count; d++)
        if (snap->devices[d].index == in->device)
            in->capacity = snap->devices[d].capacity;
    /* Without a retry in the recording, no free completed inside an
     * allocation's out-of-memory path: completions followed by segments
     * freed are a sync's, then garbage collection's or empty_cache's. */
    int retried = 1; /* unknown without stats */
    for (size_t i = 0; i < snap->stats_count; i++)
        if (snap->stats[i].device == in->device && snap->stats[i].pool == 0) {
            in->recorded_peak_reserved = (uint64_t)snap->stats[i].stats.reserved_bytes.peak;
            retried = snap->stats[i].stats.num_alloc_retries > 0;
        }
    /* PyTorch's items come out a few bytes longer in tidemark's words. */
    size_t cap = 2 * strlen(snap->header.config ? snap->header.config : "") + 64;
    in->recorded_conf = calloc(1, cap);
    size_t n = 0, nseg = 0;
    for (size_t i = 0; i < snap->event_count; i++) {
        const tdm_event *e = &snap->events[i];
        if (e->device != in->device)
            continue;
        n += e->action == TDM_ACTION_ALLOC || e->action == TDM_ACTION_FREE_COMPLETED;
        nseg += e->action == TDM_ACTION_SEGMENT_ALLOC || e->action == TDM_ACTION_SEGMENT_FREE ||
                e->action == TDM_ACTION_SEGMENT_MAP || e->action == TDM_ACTION_SEGMENT_UNMAP;
    }
    /* A free whose block waited (on another stream) is two requests. */
    in->ops = malloc((n ? 2 * n : 1) * sizeof *in->ops);
    in->op_times = malloc((n ? 2 * n : 1) * sizeof *in->op_times);
    in->op_event = malloc((n ? 2 * n : 1) * sizeof *in->op_event);
    in->segs = malloc((nseg ? nseg : 1) * sizeof *in->segs);
    uint8_t *deferred = calloc(n ? n : 1, 1); /* per id: its free waits */
    if (!in->recorded_conf || !in->ops || !in->op_times || !in->op_event || !in->segs ||
        !deferred) {
        free(deferred);
        tdm__replay_input_free(in);
        return -1;
    }
    tdm__replay_conf_pick(snap->header.config, in->recorded_conf, cap);
    addr_map live = {0};
    size_t run_end = 0; /* the run of completions judged last, and how */
    int run_in_alloc = 0;
    for (size_t i = 0; i < snap->event_count; i++) {
        const tdm_event *e = &snap->events[i];
        if (e->device != in->device)
            continue;
        if (e->action == TDM_ACTION_SEGMENT_ALLOC || e->action == TDM_ACTION_SEGMENT_FREE ||
            e->action == TDM_ACTION_SEGMENT_MAP || e->action == TDM_ACTION_SEGMENT_UNMAP) {
            /* Expandable segments grow and shrink by mapping. */
            in->segs[in->seg_count++] = (tdm_replay_seg_event){
                .size = e->size, .freed = e->action == TDM_ACTION_SEGMENT_FREE ||
                                          e->action == TDM_ACTION_SEGMENT_UNMAP};
        } else if (e->action == TDM_ACTION_ALLOC) {
            uint64_t id = in->ids++;
            if (map_put(&live, e->addr, id) != 0)
                goto oom;
            in->op_times[in->op_count] = e->time_ns;
            in->op_event[in->op_count] = i;
            in->ops[in->op_count++] = (tdm_replay_op){
                .id = id, .size = e->requested ? e->requested : e->size, .stream = e->stream};
            in->allocs++;
        } else if (e->action == TDM_ACTION_FREE_REQUESTED) {
            /* A free completes at once (the next event of the device) or
             * waits for another stream's work: then the block is held,
             * unusable, until its completion. */
            size_t j = next_memory_event(snap, i, in->device);
            uint64_t id;
            if ((j < snap->event_count && snap->events[j].action == TDM_ACTION_FREE_COMPLETED &&
                 snap->events[j].addr == e->addr) ||
                map_get(&live, e->addr, &id) != 0 || deferred[id])
                continue;
            deferred[id] = 1;
            in->op_times[in->op_count] = e->time_ns;
            in->op_event[in->op_count] = i;
            in->ops[in->op_count++] =
                (tdm_replay_op){.id = id, .kind = TDM_REPLAY_FREE_DEFERRED};
        } else if (e->action == TDM_ACTION_FREE_COMPLETED) {
            uint64_t id;
            if (map_take(&live, e->addr, &id) != 0) {
                in->unmatched_frees++;
                continue;
            }
            uint32_t kind = TDM_REPLAY_FREE;
            if (deferred[id]) {
                if (i >= run_end)
                    run_in_alloc = retried && completed_in_alloc(snap, i, in->device, &run_end);
                kind = run_in_alloc ? TDM_REPLAY_COMPLETE_IN_ALLOC : TDM_REPLAY_COMPLETE;
            }
            in->op_times[in->op_count] = e->time_ns;
            in->op_event[in->op_count] = i;
            in->ops[in->op_count++] = (tdm_replay_op){.id = id, .kind = kind};
        }
    }
    free(deferred);
    free(live.keys);
    free(live.vals);
    return 0;
oom:
    free(deferred);
    free(live.keys);
    free(live.vals);
    tdm__replay_input_free(in);
    return -1;
}

void tdm__replay_input_free(tdm_replay_input *in)
{
    free(in->ops);
    free(in->op_times);
    free(in->op_event);
    free(in->segs);
    free(in->recorded_conf);
    memset(in, 0, sizeof *in);
}
