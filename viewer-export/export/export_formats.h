/* viewer-export/export/export_formats.h: the formats `tidemark export` writes,
 * as one table (export_formats.c), and the context every exporter gets.
 *
 * export/ writes a snapshot and its model in other tools' formats: the
 * memory_viz pickle (export_pytorch*.c, pickle_write.c), Perfetto and
 * JSON (json.c), the flame graph and RMM CSV.  It may include model/
 * and format/'s reader, never import/, view/, gate/ or cli/.
 *
 * Adding a format: write export/export_NAME.c with a function of
 * type tdm_export_fn, declare it below, and add one row to the table in
 * export_formats.c.  cmd_export.c (the command) and bench/export.c (the
 * benchmark) go through the table and need no change.  A format's own
 * options (e.g. perfetto's --merge FILE) are listed in its row; the
 * command accepts them only with that --format and hands their values to
 * the exporter through tdm__export_option().
 *
 * Exporters write to a FILE the command opened (a temporary file renamed
 * into place once the exporter returned TDM_OK, or stdout), report
 * problems on stderr as "tidemark export: …" lines, and never exit.  No
 * state, no locks: a context is built per export.
 */
#ifndef TDM_VIEWER_EXPORT_FORMATS_H
#define TDM_VIEWER_EXPORT_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidemark.h"
#include "snap_model.h"
#include "model.h"

/* An option only one format takes: "--merge FILE" is {"merge", "FILE", …}. */
typedef struct tdm_export_option {
    const char *name;  /* long option name without the dashes */
    const char *arg;   /* placeholder shown in help ("FILE", "TIME"), NULL: a flag */
    const char *help;  /* one line */
} tdm_export_option;

/* Most options a format may declare, and option values one export holds. */
#define TDM_EXPORT_MAX_OPTIONS 8

typedef struct tdm_export_context {
    const char *input_path; /* the .tdm file (for messages) */
    const tdm_snap *snap;
    const tdm_model *model; /* built from snap by the command */
    int device;             /* --device N, or -1 for every device */
    int quiet;              /* --quiet: no warnings on stderr */
    /* Values of the format's own options, parallel to its options[]:
     * NULL when not given, "" for a flag that was given. */
    const char *option_values[TDM_EXPORT_MAX_OPTIONS];
    const struct tdm_export_format *format;
} tdm_export_context;

/* Writes one export of ctx->snap to `out`.  Returns TDM_OK, TDM_IO_ERROR
 * (writing failed), TDM_HOST_OUT_OF_MEMORY, or TDM_INVALID_ARGUMENT for a
 * bad option value / TDM_FORMAT_ERROR for an option input file that cannot
 * be read or parsed (both after printing why; the command adds nothing). */
typedef tdm_status (*tdm_export_fn)(FILE *out, const tdm_export_context *ctx);

typedef struct tdm_export_format {
    const char *name;        /* --format NAME */
    const char *extension;   /* default output: input path with .tdm replaced by this */
    const char *description; /* one line for `tidemark help export` */
    tdm_export_fn write;     /* NULL: a format this build lacks (its library
                              * was not found at build time; see lacks) */
    const tdm_export_option *options; /* NULL or terminated by a {NULL} row */
    const char *lacks;       /* write == NULL: the library this build lacks
                              * ("libsqlite3, Debian: libsqlite3-dev") */
} tdm_export_format;

/* The table, in the order help lists it. */
extern const tdm_export_format tdm__export_formats[];
extern const size_t tdm__export_format_count;

/* The row named `name`, or NULL. */
const tdm_export_format *tdm__export_format_find(const char *name);
/* The value of the format's option `name` (see option_values), or NULL. */
const char *tdm__export_option(const tdm_export_context *ctx, const char *name);

/* ---- exporters ---------------------------------------------------------- */

/* pytorch: a pickle for pytorch.org/memory_viz and _memory_viz.py
 * (export_pytorch.c; docs/export.md "pytorch"). */
tdm_status tdm__export_pytorch(FILE *out, const tdm_export_context *ctx);

/* perfetto: Chrome JSON trace, counters per device and category, phase
 * and step slices, Kineto [memory] events; option --merge FILE
 * (export_perfetto.c; docs/export.md "perfetto"). */
tdm_status tdm__export_perfetto(FILE *out, const tdm_export_context *ctx);
/* perfetto with several snapshots (the ranks of a job) in one trace, one
 * process per snapshot on one time axis (µs since the epoch): begin, add
 * each snapshot (its ctx may be freed once add returns), end.  end writes
 * the trailer, frees the writer and returns the first failure of the
 * whole sequence (the output is then unusable).  --merge is refused. */
typedef struct tdm_perfetto_ranks tdm_perfetto_ranks;
tdm_status tdm__export_perfetto_ranks_begin(FILE *out, tdm_perfetto_ranks **writer);
tdm_status tdm__export_perfetto_ranks_add(tdm_perfetto_ranks *writer,
                                          const tdm_export_context *ctx);
tdm_status tdm__export_perfetto_ranks_end(tdm_perfetto_ranks *writer);
/* flamegraph: collapsed stacks of the bytes live at the peak or --at TIME
 * (export_flamegraph.c). */
tdm_status tdm__export_flamegraph(FILE *out, const tdm_export_context *ctx);
/* csv: RMM's Thread,Time,Action,Pointer,Size,Stream log (export_csv.c). */
tdm_status tdm__export_csv(FILE *out, const tdm_export_context *ctx);
/* json: the analysis model for scripts (export_json.c). */
tdm_status tdm__export_json(FILE *out, const tdm_export_context *ctx);
/* sqlite: tables of events, allocations (with their categories), frames,
 * stacks, segments, blocks, devices and phases; only where libsqlite3 was
 * found at build time (export_sqlite.c; docs/export.md "sqlite"). */
tdm_status tdm__export_sqlite(FILE *out, const tdm_export_context *ctx);

#endif
