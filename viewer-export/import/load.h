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
 * A directory stands for the one snapshot it holds (its *.tdm files
 * directly inside, as model/ranks.h lists them), so that a folder `tidemark
 * run -o DIR` wrote can be given wherever one snapshot is read (a diff
 * operand, a --baseline).  A directory with none is bad input (exit 2); one
 * with several is a usage error (exit 1) naming some of them: a command
 * that takes several files expands directories into its ranks instead
 * (tdm__ranks_expand) before it gets here.
 *
 * May include: model/ (input.h, model.h) and the snapshot reader. */
#ifndef TDM_VIEWER_LOAD_H
#define TDM_VIEWER_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "input.h"

/* Checks that `path` exists, before a reader says only "input/output
 * error", and finds the snapshot a directory stands for.  Returns
 * TDM_EXIT_OK with *file NULL (not a directory) or the malloc'd path of
 * the directory's one snapshot; else *file NULL after printing, the same
 * for every command: "tidemark CMD: PATH: No such file or directory"
 * (TDM_EXIT_BAD_INPUT), "tidemark CMD: DIR: no .tdm snapshot in this
 * directory" (TDM_EXIT_BAD_INPUT), "tidemark CMD: DIR holds N snapshots;
 * name the one to use (DIR/a.tdm, DIR/b.tdm, ...)" (TDM_EXIT_USAGE), or
 * TDM_EXIT_TOOL_ERROR when out of memory. */
int tdm__input_resolve(const char *cmd, const char *path, char **file);
/* The same; a file (not a directory) must start as a .tdm file or a
 * format of the import table does ("tidemark CMD: PATH: not a snapshot
 * (at byte 0: ...)", TDM_EXIT_BAD_INPUT), checked on its first
 * TDM_IMPORT_SNIFF_BYTES bytes before more is read, unless `any_content`
 * (`import --format`, whose reader is named). */
int tdm__input_resolve_as(const char *cmd, const char *path, char **file, int any_content);
/* The name messages and reports give the file `file` (a path
 * tdm__input_resolve returned or any other): for the copy of a stream,
 * what the user named ("standard input" for `-`, or the FIFO's or
 * device's path), never the copy's /proc/self/fd name; else `file`. */
const char *tdm__input_shown(const char *file);
/* What messages call an operand: "standard input" for `-`, else itself. */
const char *tdm__input_operand_name(const char *operand);
/* Whether `file` is the copy of a stream (standard input, a pipe). */
int tdm__input_is_spooled(const char *file);
/* tdm__input_resolve without the name: TDM_EXIT_OK when `path` is a file
 * or a directory of one snapshot, else the code after printing why not. */
int tdm__input_check_file(const char *cmd, const char *path);

/* Reads `path` (a file, or a directory of one snapshot: its messages then
 * name that snapshot) for command `cmd`, accepting a truncated file.
 * Returns
 * TDM_EXIT_OK with *snap set (and *truncated = 0), TDM_EXIT_BAD_INPUT
 * with *snap set and *truncated = 1 after printing a warning naming the
 * byte offset, or TDM_EXIT_BAD_INPUT / TDM_EXIT_TOOL_ERROR with *snap NULL
 * after printing the error. */
int tdm__input_read_snapshot(const char *cmd, const char *path, tdm_snap **snap,
                             int *truncated, uint64_t *truncated_at);
/* The same read of a file (not a directory), for a library caller: it
 * prints nothing; the first message a command would print (an error, or
 * the truncation's "FILE is truncated at byte N (why)") goes into `msg`
 * unprefixed ("" when there is none).  Same returns. */
int tdm__input_read_quiet(const char *path, tdm_snap **snap, int *truncated,
                          uint64_t *truncated_at, char *msg, size_t msglen);
/* Frees a snapshot tdm__input_read_snapshot returned (read or imported). */
void tdm__input_snap_free(tdm_snap *snap);

/* Reads `path` (as tdm__input_read_snapshot) and builds its model;
 * in->path is the file read (for a directory, its snapshot's path, owned
 * by `in`).  Returns a TDM_EXIT_* code: OK; BAD_INPUT with in->snap set
 * when the file was truncated (a warning was printed); BAD_INPUT, USAGE (a
 * directory of several snapshots) or TOOL_ERROR with in->snap NULL after
 * printing the error.  in->path stays valid until tdm__input_free. */
int tdm__input_load(const char *cmd, const char *path, tdm_input *in);
/* Frees what tdm__input_load made; in->path is then the operand given. */
void tdm__input_free(tdm_input *in);

/* tdm__input_load and tdm__input_free, for layers that take a loader. */
extern const tdm_input_loader tdm__input_loader;

#endif
