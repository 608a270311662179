/* viewer-export/cli/replay_table.h: the settings `tidemark replay`
 * compares and the table it prints of them (replay_table.c: the best row,
 * text and JSON).  Private to cli/.  No state, no locks. */
#ifndef TDM_VIEWER_CLI_REPLAY_TABLE_H
#define TDM_VIEWER_CLI_REPLAY_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "replay_ops.h"

#define MAX_SETTINGS 64
#define UNLIMITED ((uint64_t)1 << 40) /* the sim device of "unlimited" */

typedef struct setting {
    char label[64];
    char conf[512];
    char *save_path; /* --save: where its replay goes; NULL without */
    tdm_replay_result r;
    uint64_t min_capacity; /* 0: not searched */
    int best;
} setting;

/* The row --sweep stars, or n when none fits: with `find_min` the one
 * whose smallest device is the smallest, else the least peak reserved
 * without running out of memory; ties to the earlier row. */
size_t tdm__replay_pick_best(const setting *s, size_t n, int find_min);

/* The table on stdout: the header lines, the notes, one row per setting,
 * the best line. */
void tdm__replay_print_text(const char *path, const tdm_replay_input *in, const setting *s,
                            size_t n, uint64_t capacity, int find_min, char notes[][256],
                            size_t note_count, const char *timeline, int compare_peak);
/* The same as one JSON object on stdout; a TDM_EXIT_* code. */
int tdm__replay_print_json(const char *path, const tdm_replay_input *in, const setting *s,
                           size_t n, uint64_t capacity, char notes[][256], size_t note_count,
                           const char *timeline, int timeline_ok);

#endif
