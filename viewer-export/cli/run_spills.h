/* viewer-export/cli/run_spills.h: `tidemark run`'s own spill folder and
 * what its processes leave in it (run_spills.c).  Private to cli/.
 * No state, no locks. */
#ifndef TDM_VIEWER_RUN_SPILLS_H
#define TDM_VIEWER_RUN_SPILLS_H

#include <stddef.h>

/* Makes the run's spill folder, DEFAULT/run-PID-TIME (0700), into
 * out[0..len).  Returns 0, or -1 with out[0] = 0 when the default place
 * is not usable (then the library's own default applies). */
int tdm__run_spill_dir_make(char *out, size_t len);

/* Once the command has ended: every spill file left in `spill_dir`
 * recovered into snapshot folder `dir` (named as its snapshot would be,
 * STEM.tdm), each said on one line, and removed; one still held by a
 * running process is left and said.  The folder is removed when empty.
 * Returns how many were recovered. */
size_t tdm__run_spills_sweep(const char *spill_dir, const char *dir);

#endif
