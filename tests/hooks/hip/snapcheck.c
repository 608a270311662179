/* tests/hooks/hip/snapcheck.c: prints what a .tdm snapshot holds in a form
 * the hook tests compare against an expected text (HIP and Level Zero).
 *
 *   snapcheck FILE.tdm            devices, then one line per memory event
 *   snapcheck FILE.tdm count ACT  the number of events of action ACT
 *   snapcheck FILE.tdm notes      the header's notes, as written
 *   snapcheck FILE.tdm state      the state at the dump: per device
 *       "stats dev=D allocated=A reserved=R reserved_peak=P segments=N",
 *       each segment "segment dev=D size=S expandable=E blocks=STATES"
 *       (STATES one letter per block: a allocated, i inactive, p pending
 *       free), each imported mapping "imported dev=D source=S kind=KIND
 *       size=N fn=F"; in the file's order (tests sort them)
 *
 * Event lines: `ACTION dev=D size=S stream=X fn=F` (+ ` free=N` for oom),
 * oldest first, memory actions only (phase/step/tag/snapshot marks are
 * left out).  Streams are named by first appearance (0 stays 0, the others
 * s1, s2, ...) so that expected texts do not depend on handle values.
 * fn is the innermost frame of the event's stack (the program's function
 * that called the vendor, when the hooks skipped their own frames right),
 * "-" when the event has no stack.
 * Device lines: `device D VENDOR "NAME" CAPACITY`.
 *
 * Exit status: 0, or 2 when the file cannot be read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "snap_model.h"

static const char *innermost(const tdm_snap *s, uint32_t stack_id)
{
    if (stack_id == 0 || stack_id >= s->stack_count || s->stacks[stack_id].depth == 0)
        return "-";
    uint32_t f = s->stacks[stack_id].frames[0];
    if (f >= s->frame_count || s->frames[f].function == NULL || s->frames[f].function[0] == '\0')
        return "??";
    return s->frames[f].function;
}

static int is_memory_action(unsigned a)
{
    switch (a) {
    case TDM_ACTION_ALLOC:
    case TDM_ACTION_FREE_REQUESTED:
    case TDM_ACTION_FREE_COMPLETED:
    case TDM_ACTION_SEGMENT_ALLOC:
    case TDM_ACTION_SEGMENT_FREE:
    case TDM_ACTION_SEGMENT_MAP:
    case TDM_ACTION_SEGMENT_UNMAP:
    case TDM_ACTION_OOM:
        return 1;
    default:
        return 0;
    }
}

static void print_state(const tdm_snap *s)
{
    for (size_t i = 0; i < s->stats_count; i++) {
        const tdm_snap_device_stats *d = &s->stats[i];
        if (d->pool != 0)
            continue;
        printf("stats dev=%d allocated=%lld reserved=%lld reserved_peak=%lld segments=%lld\n",
               d->device, (long long)d->stats.allocated_bytes.current,
               (long long)d->stats.reserved_bytes.current,
               (long long)d->stats.reserved_bytes.peak, (long long)d->stats.segment.current);
    }
    for (size_t i = 0; i < s->segment_count; i++) {
        const tdm_snap_segment *g = &s->segments[i];
        char states[64] = "";
        for (uint32_t k = 0; k < g->block_count && k + 1 < sizeof states; k++) {
            unsigned st = s->blocks[g->first_block + k].state;
            states[k] = st == TDM_BLOCK_ACTIVE_ALLOCATED ? 'a'
                        : st == TDM_BLOCK_INACTIVE       ? 'i' : 'p';
        }
        printf("segment dev=%d size=%llu expandable=%d blocks=%s\n", g->device,
               (unsigned long long)g->total_size, g->is_expandable, states);
    }
    static const char *const kinds[] = {"ipc", "shareable", "peer_mapping", "multicast"};
    for (size_t i = 0; i < s->imported_count; i++) {
        const tdm_snap_imported *m = &s->imported[i];
        printf("imported dev=%d source=%d kind=%s size=%llu fn=%s\n", m->device,
               m->source_device, m->kind < 4 ? kinds[m->kind] : "?",
               (unsigned long long)m->size, innermost(s, m->stack_id));
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 4 && strcmp(argv[2], "count") == 0) &&
        !(argc == 3 && (strcmp(argv[2], "notes") == 0 || strcmp(argv[2], "state") == 0))) {
        fprintf(stderr, "usage: snapcheck FILE.tdm [count ACTION | notes | state]\n");
        return 2;
    }
    tdm_snap *s = NULL;
    tdm_read_error err;
    if (tdm__snap_read_file(argv[1], 0, &s, &err) != TDM_OK) {
        fprintf(stderr, "snapcheck: %s: %s\n", argv[1], err.message);
        return 2;
    }
    if (argc == 3 && strcmp(argv[2], "state") == 0) {
        print_state(s);
        tdm__snap_free(s);
        return 0;
    }
    if (argc == 3) {
        if (s->header.notes && s->header.notes[0])
            printf("%s\n", s->header.notes);
        tdm__snap_free(s);
        return 0;
    }
    if (argc == 4) {
        int want = tdm__action_from_name(argv[3]);
        size_t n = 0;
        for (size_t i = 0; i < s->event_count; i++)
            n += want >= 0 && s->events[i].action == (unsigned)want;
        printf("%zu\n", n);
        tdm__snap_free(s);
        return 0;
    }
    for (size_t i = 0; i < s->device_count; i++)
        printf("device %d %s \"%s\" %llu\n", s->devices[i].index, s->devices[i].vendor,
               s->devices[i].name, (unsigned long long)s->devices[i].capacity);
    uint64_t streams[64];
    size_t nstreams = 0;
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        if (!is_memory_action(e->action))
            continue;
        char stream[32] = "0";
        if (e->stream != 0) {
            size_t k = 0;
            while (k < nstreams && streams[k] != e->stream)
                k++;
            if (k == nstreams && nstreams < 64)
                streams[nstreams++] = e->stream;
            snprintf(stream, sizeof stream, "s%zu", k + 1);
        }
        printf("%s dev=%d size=%llu stream=%s fn=%s", tdm__action_name(e->action), e->device,
               (unsigned long long)e->size, stream, innermost(s, e->stack_id));
        if (e->action == TDM_ACTION_OOM)
            printf(" free=%llu", (unsigned long long)e->addr);
        printf("\n");
    }
    tdm__snap_free(s);
    return 0;
}
