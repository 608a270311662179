/* viewer-export/cli/run_spills.h: `tidemark run`'s own spill folder and
 * what its processes leave in it (run_spills.c).  Private to cli/.
 * No state, no locks. */
#ifndef TDM_VIEWER_RUN_SPILLS_H
#define TDM_VIEWER_RUN_SPILLS_H

#include <stddef.h>

/* Makes the run's spill folder, DEFAULT/run-PID-TIME-HOST (0700), into
 * out[0..len).  Returns 0, or -1 with out[0] = 0 when the default place
 * is not usable (then the library's own default applies). */
int tdm__run_spill_dir_make(char *out, size_t len);

/* Notes in `spill_dir` the snapshot folder `dir` its spills recover into,
 * for tdm__run_spills_sweep_stale should this run be killed.  0 or -1. */
int tdm__run_spill_dir_note(const char *spill_dir, const char *dir);

/* The spill folders of earlier runs that ended without sweeping them
 * (the run itself killed, with its command): each swept into the
 * snapshot folder it noted, said in one line.  Returns how many spills
 * were recovered. */
size_t tdm__run_spills_sweep_stale(void);

/* Once the command has ended: every spill file left in `spill_dir`
 * recovered into snapshot folder `dir` (named as its snapshot would be,
 * STEM.tdm), each said on one line, and removed; one still held by a
 * running process is left and said.  The folder is removed when empty.
 * Returns how many were recovered. */
size_t tdm__run_spills_sweep(const char *spill_dir, const char *dir);

#endif
