/* tests/hooks/infra/snapcheck.c: prints a .tdm snapshot as plain lines, so
 * that the shell tests of tests/hooks/ can assert exact events, sizes,
 * streams and stack frames with grep.  It reads the file with the real
 * reader (format/format_read.c).
 *
 *   snapcheck FILE
 *
 * Lines (addresses in hex, sizes in bytes, stacks innermost first as
 * function names joined by '<'):
 *   header mode=M pid=P events=N dropped=D
 *   device IDX VENDOR CAPACITY NAME
 *   event ACTION dev=D size=S req=R stream=0xS cat=C addr=0xA stack=f<g<h [phase=NAME]
 *         (phase=: the phase in force, when one is)
 *   segment dev=D pool=P exp=E size=S stream=0xS addr=0xA blocks=B stack=...
 *   block state=S size=S req=R cat=C addr=0xA stack=...
 *   stats dev=D [pool=small|large] allocated=CUR/PEAK reserved=CUR/PEAK
 *         active=CUR/PEAK requested=CUR/PEAK allocations=CUR segments=CUR ooms=N
 * Exit status 0, or 1 when the file cannot be read (message on stderr). */
#include <inttypes.h>
#include <stdio.h>

#include "event.h"
#include "snap_model.h"

static void print_stack(const tdm_snap *s, uint32_t id)
{
    printf(" stack=");
    if (id == 0 || id >= s->stack_count) {
        printf("-");
        return;
    }
    const tdm_snap_stack *st = &s->stacks[id];
    for (uint32_t k = 0; k < st->depth; k++) {
        const tdm_snap_frame *f = &s->frames[st->frames[k]];
        printf("%s%s", k ? "<" : "", f->function && *f->function ? f->function : "??");
    }
}

static void print_stat(const char *name, const tdm_stat *st, int peak)
{
    if (peak)
        printf(" %s=%" PRId64 "/%" PRId64, name, st->current, st->peak);
    else
        printf(" %s=%" PRId64, name, st->current);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: snapcheck FILE\n");
        return 2;
    }
    tdm_snap *s = NULL;
    tdm_read_error err;
    tdm_status st = tdm__snap_read_file(argv[1], 0, &s, &err);
    if (st != TDM_OK) {
        fprintf(stderr, "snapcheck: %s: %s (%s)\n", argv[1], tdm_strerror(st),
                err.message);
        return 1;
    }
    printf("header mode=%s pid=%" PRId64 " events=%zu dropped=%" PRIu64 "\n",
           s->header.alloc_mode ? s->header.alloc_mode : "?", s->header.pid,
           s->event_count, s->dropped_events);
    for (size_t i = 0; i < s->device_count; i++)
        printf("device %d %s %" PRIu64 " %s\n", s->devices[i].index,
               s->devices[i].vendor, s->devices[i].capacity, s->devices[i].name);
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        const char *name = tdm__action_name(e->action);
        printf("event %s dev=%d size=%" PRIu64 " req=%" PRIu64 " stream=0x%" PRIx64
               " cat=%u addr=0x%" PRIx64,
               name ? name : "?", e->device, e->size, e->requested, e->stream,
               e->category, e->addr);
        print_stack(s, e->stack_id);
        if (e->phase && e->phase < s->phase_count)
            printf(" phase=%s", s->phase_names[e->phase]);
        printf("\n");
    }
    for (size_t i = 0; i < s->segment_count; i++) {
        const tdm_snap_segment *g = &s->segments[i];
        printf("segment dev=%d pool=%u exp=%u size=%" PRIu64 " stream=0x%" PRIx64
               " addr=0x%" PRIx64 " blocks=%u",
               g->device, g->pool, g->is_expandable, g->total_size, g->stream,
               g->address, g->block_count);
        print_stack(s, g->stack_id);
        printf("\n");
        for (uint32_t k = 0; k < g->block_count; k++) {
            const tdm_snap_block *b = &s->blocks[g->first_block + k];
            printf("block state=%u size=%" PRIu64 " req=%" PRIu64 " cat=%u addr=0x%" PRIx64,
                   b->state, b->size, b->requested_size, b->category, b->address);
            print_stack(s, b->stack_id);
            printf("\n");
        }
    }
    for (size_t i = 0; i < s->stats_count; i++) {
        const tdm_stats *t = &s->stats[i].stats;
        printf("stats dev=%d", s->stats[i].device);
        /* The all-pools row as before; a cache-mode dump adds one row per
         * pool, told apart here. */
        if (s->stats[i].pool != 0)
            printf(" pool=%s", s->stats[i].pool == 1 ? "small" : "large");
        print_stat("allocated", &t->allocated_bytes, 1);
        print_stat("reserved", &t->reserved_bytes, 1);
        print_stat("active", &t->active_bytes, 1);
        print_stat("requested", &t->requested_bytes, 1);
        print_stat("allocations", &t->allocation, 0);
        print_stat("segments", &t->segment, 0);
        printf(" ooms=%" PRIu64 "\n", t->num_ooms);
    }
    tdm__snap_free(s);
    return 0;
}
