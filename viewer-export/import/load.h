/* viewer-export/import/load.h: reading any file a command is given into
 * a snapshot (and its model), the same way for every command, so that the
 * same file gives the same diagnostics and the same exit code whichever
 * command reads it.
 *
 * A file whose first bytes are a format of the import table (a PyTorch
 * snapshot pickle, an RMM log, a trace CSV: import_formats.h) is imported
 * in memory; anything else is read as a .tdm snapshot.  A truncated .tdm
 * file is read up to its last whole record, after one warning naming the
 * byte offset; its exit code is still TDM_EXIT_BAD_INPUT so that scripts
 * notice.  Diagnostics go to stderr, prefixed "tidemark CMD: ".
 *
 * May include: model/ (input.h, model.h) and the snapshot reader. */
#ifndef TDM_VIEWER_LOAD_H
#define TDM_VIEWER_LOAD_H

#include <stdint.h>

#include "input.h"

/* Checks that `path` exists and is not a directory, before a reader
 * says only "input/output error": TDM_EXIT_OK, or TDM_EXIT_BAD_INPUT
 * after printing why not. */
int tdm__input_check_file(const char *cmd, const char *path);

/* Reads `path` for command `cmd`, accepting a truncated file.  Returns
 * TDM_EXIT_OK with *snap set (and *truncated = 0), TDM_EXIT_BAD_INPUT
 * with *snap set and *truncated = 1 after printing a warning naming the
 * byte offset, or TDM_EXIT_BAD_INPUT / TDM_EXIT_TOOL_ERROR with *snap NULL
 * after printing the error. */
int tdm__input_read_snapshot(const char *cmd, const char *path, tdm_snap **snap,
                             int *truncated, uint64_t *truncated_at);
/* Frees a snapshot tdm__input_read_snapshot returned (read or imported). */
void tdm__input_snap_free(tdm_snap *snap);

/* Reads `path` (as tdm__input_read_snapshot) and builds its model.
 * Returns a TDM_EXIT_* code: OK; BAD_INPUT with in->snap set when the
 * file was truncated (a warning was printed); BAD_INPUT or TOOL_ERROR
 * with in->snap NULL after printing the error. */
int tdm__input_load(const char *cmd, const char *path, tdm_input *in);
void tdm__input_free(tdm_input *in);

/* tdm__input_load and tdm__input_free, for layers that take a loader. */
extern const tdm_input_loader tdm__input_loader;

#endif
