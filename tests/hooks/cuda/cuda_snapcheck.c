/* tests/hooks/cuda/cuda_snapcheck.c: prints what a .tdm snapshot holds, in
 * the form the CUDA hook tests compare against their expected texts.
 *
 *   cuda_snapcheck FILE.tdm [PREFIX]   devices, then one line per memory event
 *   cuda_snapcheck FILE.tdm count ACT  the number of events of action ACT
 *   cuda_snapcheck FILE.tdm notes      the header's notes (what the
 *       recording could not see), as written; nothing when none
 *   cuda_snapcheck FILE.tdm state      the state at the dump: per device
 *       "stats dev=D allocated=A reserved=R reserved_peak=P segments=N",
 *       each segment "segment dev=D size=S expandable=E blocks=STATES"
 *       (address order per device; STATES one letter per block: a
 *       allocated, i inactive, p pending free), each imported mapping
 *       "imported dev=D source=S kind=KIND size=N fn=F"
 *
 * Event lines, oldest first, memory actions only:
 *   ACTION dev=D size=S stream=X fn=F          (+ " free=N" for oom)
 * Streams 0, 1 (legacy) and 2 (per-thread: tidemark records each thread's
 * as its own id, 2 in the low 32 bits) print as numbers; any other
 * handle as s1, s2, ... by first appearance, so the expected texts do not
 * depend on handle values.  fn is the innermost frame of the event's stack
 * whose function starts with PREFIX (default "app_"), without a compiler
 * clone suffix: the test program's own function that made the call,
 * however many CUDA library frames lie between it and the hook (a
 * statically linked runtime leaves its own frames in the program).  "-"
 * when the event has no stack, "?" when no frame matches.
 * Device lines: device D VENDOR "NAME" CAPACITY.
 *
 * Exit status: 0, or 2 when the file cannot be read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "snap_model.h"

/* Writes the function's name without a compiler clone suffix
 * (".constprop.0", ".isra.0"), which depends on the optimizer. */
static const char *app_frame(const tdm_snap *s, uint32_t stack_id, const char *prefix,
                             char *buf, size_t len)
{
    if (stack_id == 0 || stack_id >= s->stack_count || s->stacks[stack_id].depth == 0)
        return "-";
    const tdm_snap_stack *st = &s->stacks[stack_id];
    for (uint32_t i = 0; i < st->depth; i++) {
        uint32_t f = st->frames[i];
        const char *fn = f < s->frame_count ? s->frames[f].function : NULL;
        if (fn && strncmp(fn, prefix, strlen(prefix)) == 0) {
            snprintf(buf, len, "%.*s", (int)strcspn(fn, "."), fn);
            return buf;
        }
    }
    return "?";
}

static int is_memory_action(unsigned a)
{
    return a == TDM_ACTION_ALLOC || a == TDM_ACTION_FREE_REQUESTED ||
           a == TDM_ACTION_FREE_COMPLETED || a == TDM_ACTION_SEGMENT_ALLOC ||
           a == TDM_ACTION_SEGMENT_FREE || a == TDM_ACTION_SEGMENT_MAP ||
           a == TDM_ACTION_SEGMENT_UNMAP || a == TDM_ACTION_OOM;
}

/* Streams by first appearance. */
static uint64_t seen[256];
static size_t nseen;

static void stream_name(uint64_t s, char *buf, size_t len)
{
    if (s <= 2) {
        snprintf(buf, len, "%" PRIu64, s);
        return;
    }
    if ((s & 0xffffffffu) == 2) { /* one thread's per-thread default stream */
        snprintf(buf, len, "2");
        return;
    }
    size_t i = 0;
    while (i < nseen && seen[i] != s)
        i++;
    if (i == nseen && nseen < sizeof seen / sizeof seen[0])
        seen[nseen++] = s;
    snprintf(buf, len, "s%zu", i + 1);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: cuda_snapcheck FILE.tdm [PREFIX | count ACTION]\n");
        return 2;
    }
    tdm_snap *s = NULL;
    tdm_read_error err;
    if (tdm__snap_read_file(argv[1], 0, &s, &err) != TDM_OK) {
        fprintf(stderr, "cuda_snapcheck: %s: %s\n", argv[1], err.message);
        return 2;
    }
    if (argc == 4 && strcmp(argv[2], "count") == 0) {
        int want = tdm__action_from_name(argv[3]);
        size_t n = 0;
        for (size_t i = 0; i < s->event_count; i++)
            n += (int)s->events[i].action == want;
        printf("%zu\n", n);
        tdm__snap_free(s);
        return 0;
    }
    if (argc == 3 && strcmp(argv[2], "notes") == 0) {
        if (s->header.notes && s->header.notes[0])
            printf("%s\n", s->header.notes);
        tdm__snap_free(s);
        return 0;
    }
    if (argc == 3 && strcmp(argv[2], "state") == 0) {
        for (size_t i = 0; i < s->stats_count; i++) {
            const tdm_snap_device_stats *d = &s->stats[i];
            if (d->pool != 0)
                continue;
            printf("stats dev=%d allocated=%" PRId64 " reserved=%" PRId64
                   " reserved_peak=%" PRId64 " segments=%" PRId64 "\n",
                   d->device, d->stats.allocated_bytes.current, d->stats.reserved_bytes.current,
                   d->stats.reserved_bytes.peak, d->stats.segment.current);
        }
        for (size_t i = 0; i < s->segment_count; i++) {
            const tdm_snap_segment *g = &s->segments[i];
            char states[64] = "";
            for (uint32_t k = 0; k < g->block_count && k + 1 < sizeof states; k++)
                states[k] = "aip"[s->blocks[g->first_block + k].state % 3 == 0 ? 1
                                  : s->blocks[g->first_block + k].state == 1 ? 0 : 2];
            printf("segment dev=%d size=%" PRIu64 " expandable=%d blocks=%s\n", g->device,
                   g->total_size, g->is_expandable, states);
        }
        static const char *const kinds[] = {"ipc", "shareable", "peer_mapping", "multicast"};
        for (size_t i = 0; i < s->imported_count; i++) {
            const tdm_snap_imported *m = &s->imported[i];
            char fn[128];
            printf("imported dev=%d source=%d kind=%s size=%" PRIu64 " fn=%s\n", m->device,
                   m->source_device, kinds[m->kind], m->size,
                   app_frame(s, m->stack_id, "app_", fn, sizeof fn));
        }
        tdm__snap_free(s);
        return 0;
    }
    const char *prefix = argc > 2 ? argv[2] : "app_";
    for (size_t i = 0; i < s->device_count; i++)
        printf("device %d %s \"%s\" %" PRIu64 "\n", s->devices[i].index, s->devices[i].vendor,
               s->devices[i].name, s->devices[i].capacity);
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (!is_memory_action(e->action))
            continue;
        char st[32], fn[128];
        stream_name(e->stream, st, sizeof st);
        printf("%s dev=%d size=%" PRIu64 " stream=%s fn=%s", tdm__action_name(e->action),
               e->device, e->action == TDM_ACTION_OOM ? e->requested : e->size, st,
               app_frame(s, e->stack_id, prefix, fn, sizeof fn));
        if (e->action == TDM_ACTION_OOM)
            printf(" free=%" PRIu64, e->addr);
        printf("\n");
    }
    tdm__snap_free(s);
    return 0;
}
