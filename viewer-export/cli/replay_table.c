/* viewer-export/cli/replay_table.c: the outcome of `tidemark replay`, one
 * row per setting: which row is best (the star), and the table as text or
 * JSON.  No state, no locks. */
#include "cli.h"
#include "format_size.h"
#include "json.h"
#include "replay_table.h"

#include <stdio.h>
#include <string.h>

/* Whether setting a beats setting b.  With --min-capacity the question
 * is the smallest device: a setting is better only when its smallest
 * device really is smaller (then, on a tie, when it reserves less at its
 * peak); without, the least peak reserved on the device given, among
 * those that do not run out of memory there.  Ties go to the earlier row
 * (the recorded settings first), so a star on another row always means
 * a real gain. */
static int better(const setting *a, const setting *b, int find_min)
{
    if (find_min) {
        if (!a->min_capacity || !b->min_capacity) /* "none": fits no device */
            return a->min_capacity != 0;
        if (a->min_capacity != b->min_capacity)
            return a->min_capacity < b->min_capacity;
    }
    if (!a->r.ooms != !b->r.ooms)
        return !a->r.ooms;
    return a->r.peak_reserved < b->r.peak_reserved;
}

/* The row --sweep stars, or n when none fits. */
size_t tdm__replay_pick_best(const setting *s, size_t n, int find_min)
{
    size_t best = n;
    for (size_t i = 0; i < n; i++) {
        int fits = find_min ? s[i].min_capacity != 0 : !s[i].r.ooms;
        if (fits && (best == n || better(&s[i], &s[best], find_min)))
            best = i;
    }
    return best;
}

void tdm__replay_print_text(const char *path, const tdm_replay_input *in, const setting *s,
                            size_t n, uint64_t capacity, int find_min, char notes[][256],
                       size_t note_count, const char *timeline, int compare_peak)
{
    char a[32], b[32], c[32];
    printf("replay of %s, device %d: %zu requests (%zu allocations) on a sim device of %s\n",
           path, in->device, in->op_count, in->allocs,
           capacity >= UNLIMITED ? "unlimited size" : tdm__fmt_bytes(a, sizeof a, capacity));
    for (size_t i = 0; i < note_count; i++)
        printf("note: %s\n", notes[i]);
    if (in->recorded_peak_reserved && compare_peak)
        printf("recorded peak reserved %s; replayed under the recorded settings %s (%s)\n",
               tdm__fmt_bytes(a, sizeof a, in->recorded_peak_reserved),
               tdm__fmt_bytes(b, sizeof b, s[0].r.peak_reserved),
               s[0].r.peak_reserved == in->recorded_peak_reserved ? "exactly the same"
                                                                   : "differs");
    if (timeline)
        printf("segment timeline under the recorded settings: %s\n", timeline);
    int width = 36; /* the label column: as wide as its longest label */
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(s[i].label) + 2 > width)
            width = (int)strlen(s[i].label) + 2;
    printf("\n%-*s %13s %13s %9s %9s %9s %8s %6s", width, "setting", "peak reserved",
           "peak alloc", "res/alloc", "segments", "dev calls", "retries", "OOM");
    if (find_min)
        printf(" %13s", "min capacity");
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        const tdm_replay_result *r = &s[i].r;
        char label[80];
        snprintf(label, sizeof label, "%s%s", s[i].best ? "* " : "  ", s[i].label);
        double ratio = r->reserved_at_peak && r->peak_allocated
                           ? (double)r->reserved_at_peak / (double)r->peak_allocated
                           : 0.0;
        printf("%-*s %13s %13s %9.3f %9llu %9llu %8llu %6s", width, label,
               tdm__fmt_bytes(a, sizeof a, r->peak_reserved),
               tdm__fmt_bytes(b, sizeof b, r->peak_allocated), ratio,
               (unsigned long long)r->segments, (unsigned long long)r->device_calls,
               (unsigned long long)r->retries, r->ooms ? "OOM" : "fits");
        if (find_min)
            printf(" %13s", s[i].min_capacity ? tdm__fmt_bytes(c, sizeof c, s[i].min_capacity)
                                              : "none");
        printf("\n");
    }
    for (size_t i = 0; i < n; i++) {
        if (!s[i].best)
            continue;
        if (find_min)
            printf("\n* best: %s (the smallest device, %s%s)\n", s[i].label,
                   tdm__fmt_bytes(c, sizeof c, s[i].min_capacity),
                   i == 0 ? "; no setting tried needs a smaller one" : "");
        else
            printf("\n* best: %s (least peak reserved without running out of memory%s)\n",
                   s[i].label, i == 0 ? "; no setting tried reserves less" : "");
    }
}

int tdm__replay_print_json(const char *path, const tdm_replay_input *in, const setting *s,
                      size_t n, uint64_t capacity, char notes[][256], size_t note_count,
                      const char *timeline, int timeline_ok)
{
    tdm_jw w;
    if (tdm__jw_init(&w, stdout) != TDM_OK)
        return TDM_EXIT_TOOL_ERROR;
    tdm__jw_open(&w, '{');
    tdm__jw_kstr(&w, "input", path);
    tdm__jw_ki64(&w, "device", in->device);
    tdm__jw_ku64(&w, "requests", in->op_count);
    tdm__jw_ku64(&w, "allocations", in->allocs);
    tdm__jw_ku64(&w, "capacity", capacity >= UNLIMITED ? 0 : capacity);
    tdm__jw_ku64(&w, "recorded_peak_reserved", in->recorded_peak_reserved);
    tdm__jw_key(&w, "segment_timeline");
    if (timeline)
        tdm__jw_lit(&w, timeline_ok ? "\"reproduced\"" : "\"differs\"");
    else
        tdm__jw_lit(&w, "null");
    tdm__jw_key(&w, "notes");
    tdm__jw_open(&w, '[');
    for (size_t i = 0; i < note_count; i++) {
        tdm__jw_sep(&w);
        tdm__jw_str(&w, notes[i]);
    }
    tdm__jw_close(&w, ']');
    tdm__jw_key(&w, "settings");
    tdm__jw_open(&w, '[');
    for (size_t i = 0; i < n; i++) {
        const tdm_replay_result *r = &s[i].r;
        tdm__jw_sep(&w);
        tdm__jw_open(&w, '{');
        tdm__jw_kstr(&w, "label", s[i].label);
        tdm__jw_kstr(&w, "conf", s[i].conf);
        tdm__jw_ku64(&w, "peak_reserved", r->peak_reserved);
        tdm__jw_ku64(&w, "peak_allocated", r->peak_allocated);
        tdm__jw_ku64(&w, "reserved_at_allocated_peak", r->reserved_at_peak);
        tdm__jw_ku64(&w, "segments", r->segments);
        tdm__jw_ku64(&w, "device_calls", r->device_calls);
        tdm__jw_ku64(&w, "device_frees", r->device_frees);
        tdm__jw_ku64(&w, "retries", r->retries);
        tdm__jw_ku64(&w, "ooms", r->ooms);
        tdm__jw_key(&w, "oom");
        tdm__jw_lit(&w, r->ooms ? "true" : "false");
        if (r->ooms) {
            tdm__jw_ku64(&w, "first_oom_request", r->first_oom_op);
            tdm__jw_ku64(&w, "first_oom_size", r->first_oom_size);
        }
        if (s[i].min_capacity)
            tdm__jw_ku64(&w, "min_capacity", s[i].min_capacity);
        if (s[i].save_path)
            tdm__jw_kstr(&w, "saved", s[i].save_path);
        tdm__jw_key(&w, "best");
        tdm__jw_lit(&w, s[i].best ? "true" : "false");
        tdm__jw_close(&w, '}');
    }
    tdm__jw_close(&w, ']');
    tdm__jw_close(&w, '}');
    tdm__jw_raw(&w, "\n", 1);
    return tdm__jw_finish(&w) == TDM_OK ? TDM_EXIT_OK : TDM_EXIT_TOOL_ERROR;
}
