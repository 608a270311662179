/* viewer-export/model/input.h: a file read for a command (its snapshot,
 * the analysis model built over it, and whether it was cut short), and
 * the exit codes every command and helper below the command line speaks.
 *
 * The type lives here, under every other subfolder, so that gates, views,
 * exporters and summaries take the same loaded input; reading a file into
 * one (a .tdm, or a format the importers recognize) is import/load.h's
 * job, and the command line's.  No state, no locks. */
#ifndef TDM_VIEWER_INPUT_H
#define TDM_VIEWER_INPUT_H

#include <stdint.h>
#include <stdio.h>

#include "tidemark.h"
#include "snap_model.h"
#include "model.h"

/* Exit codes; docs/cli.md lists them. */
enum {
    TDM_EXIT_OK = 0,
    TDM_EXIT_USAGE = 1,       /* bad command line */
    TDM_EXIT_BAD_INPUT = 2,   /* a file missing, unreadable, corrupt or truncated */
    TDM_EXIT_GATE_FAILED = 3, /* a gate's limit was exceeded */
    TDM_EXIT_TOOL_ERROR = 4,  /* tidemark itself failed (out of memory, bug) */
};

/* The larger (worse) of two exit codes. */
static inline int tdm__exit_worse(int a, int b) { return a > b ? a : b; }

/* One file read for a gate, a diff, a view or a summary, with its model. */
typedef struct tdm_input {
    const char *path;        /* the file read, `operand` or `found`, by the name
                              * reports give it (tdm__input_shown) */
    const char *operand;     /* as given, borrowed from argv */
    char *found;             /* the snapshot a directory operand stood for
                              * (malloc'd, freed by tdm__input_free) */
    tdm_snap *snap;          /* NULL when it could not be read */
    tdm_model *model;        /* NULL when snap is NULL */
    int truncated;           /* read up to a cut */
    uint64_t truncated_at;   /* byte offset of the cut */
    const char *error;       /* why snap is NULL (static text) */
} tdm_input;

/* How a layer that reads many files one at a time (the summary of a
 * job's ranks) gets them read without depending on the importers: the
 * command line hands it import/load.h's pair. */
typedef struct tdm_input_loader {
    int (*load)(const char *cmd, const char *path, tdm_input *in);
    void (*free)(tdm_input *in);
} tdm_input_loader;

/* Checks that the file read into `in` has device `ordinal` (a --device
 * option; -1 stands for every device and always passes).  Returns
 * TDM_EXIT_OK, or TDM_EXIT_BAD_INPUT after printing, the same in every
 * command, "tidemark CMD: PATH has no device N (its devices: 0, 1)". */
int tdm__input_check_device(const char *cmd, const tdm_input *in, int ordinal);
/* The same for a file whose devices are `have` (n of them): TDM_EXIT_OK
 * when `ordinal` is one, else TDM_EXIT_BAD_INPUT after the same line. */
int tdm__input_say_no_device(const char *cmd, const char *path, int ordinal, const int *have,
                             size_t n);

#endif
