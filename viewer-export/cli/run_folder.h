/* viewer-export/cli/run_folder.h: `tidemark run`'s output folder
 * (run_folder.c). */
#ifndef TDM_CLI_RUN_FOLDER_H
#define TDM_CLI_RUN_FOLDER_H

#include <stddef.h>

#include "run_state.h"

/* The run files (snapshots, PyTorch histories) already in `dir`, so that
 * they are not taken for this run's; 0, or -1 with errno. */
int tdm__run_list_old(const char *dir, old_file **out, size_t *count);
/* The files ending in `suffix` this run wrote in `dir` (not among `old`,
 * or changed since), sorted by name; 0, or -1 with errno. */
int tdm__run_list_new(const char *dir, const old_file *old, size_t nold, const char *suffix,
                      char ***out, size_t *count);
/* Makes `path` and its parents as mkdir -p does; 0, or -1 with errno. */
int tdm__run_make_dirs(const char *path);
/* Gives the run DIR/run-N when DIR holds an earlier run (said on one
 * line); -1 after saying why it cannot. */
int tdm__run_own_subfolder(run_state *r);
/* Says which PyTorch histories this run left with no snapshot of their
 * own. */
void tdm__run_note_lone_histories(const run_state *r);

#endif
