/* viewer-export/model/stack_display.h: the stacks of a snapshot as every
 * command shows them, prepared once when a file is read (import/load.c
 * calls tdm__stack_display_apply on each snapshot it reads, before any
 * model, site, export or page sees it):
 *
 *   - names: C++ names demangled and compiler clone suffixes dropped
 *     (names.h), unless raw names are asked for (--raw-names);
 *   - wrappers: the frames at the top of a stack that only pass the
 *     request on are dropped, so a site is named by the code that asked
 *     for the memory: tidemark's own frames; known vendor and framework
 *     allocation calls (cudaMalloc*, cuMemAlloc*, hipMalloc*, zeMemAlloc*,
 *     PyTorch's c10 caching allocators); frames matching a `hide=REGEX`
 *     item of the recording's TIDEMARK_CONF or a --hide option; and the
 *     program's own allocation wrapper, found as the function every
 *     allocation stack starts with while their callers differ (train_sim's
 *     device_alloc).  --keep-wrappers keeps all but tidemark's frames and
 *     --hide's.  A stack made only of such frames keeps them.
 *   - stacks left with the same frames (same shown name, file and line)
 *     become one stack id: events, blocks and segments are renumbered, so
 *     every grouping by stack id groups them as one site;
 *   - sites shown by Python frames (sites.h) are grouped by them;
 *   - --focus REGEX: stacks with no frame matching stay in the timelines
 *     but are left out of site lists and flame graphs
 *     (tdm__stack_display_focused).
 *
 * Regexes are POSIX extended, matched against the shown function name and
 * the raw one.  State: the options (set once by the command line) and the
 * list of snapshots prepared and not yet forgotten; the tool is single
 * threaded. */
#ifndef TDM_VIEWER_STACK_DISPLAY_H
#define TDM_VIEWER_STACK_DISPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "snap_model.h"

typedef struct tdm_stack_display_options {
    int raw_names;     /* names exactly as the file has them */
    int keep_wrappers; /* drop only tidemark's frames and --hide's */
    int native_frames; /* sites with Python frames shown by every frame */
    const char *const *hide;
    size_t hide_count;
    const char *const *focus;
    size_t focus_count;
} tdm_stack_display_options;

/* Sets the options for every snapshot prepared afterwards (the defaults:
 * all zero).  Returns 0, or -1 with `err` saying which regex is bad and
 * why ("--hide 'a(': parentheses not balanced"). */
int tdm__stack_display_configure(const tdm_stack_display_options *o, char *err,
                                 size_t err_len);
/* Prepares `snap` for display as described above.  TDM_OK or
 * TDM_HOST_OUT_OF_MEMORY (snap unchanged then, or with names already
 * rewritten: still a valid snapshot).  Call tdm__stack_display_forget
 * before freeing it. */
tdm_status tdm__stack_display_apply(tdm_snap *snap);
/* Frees what tdm__stack_display_apply kept for `snap` (no-op otherwise). */
void tdm__stack_display_forget(const tdm_snap *snap);
/* Nonzero when stack `stack_id` of `snap` is to be listed: always unless
 * --focus was given and none of its frames matches. */
int tdm__stack_display_focused(const tdm_snap *snap, uint32_t stack_id);
/* The stack whose site `stack_id`'s allocations belong to: stack_id
 * itself, or with Python frames the first stack that reads the same from
 * its innermost user Python frame on (sites.h). */
uint32_t tdm__stack_display_site(const tdm_snap *snap, uint32_t stack_id);
/* The `hide=` regexes of a TIDEMARK_CONF text (items split at commas
 * outside [...], as the recorder splits them): *out gets a malloc'd array
 * of malloc'd strings.  Returns how many, or -1 when out of memory. */
int tdm__stack_display_conf_hides(const char *conf, char ***out);

#endif
