/* viewer-export/export/export_formats.c: the table of formats `tidemark export`
 * writes (export_formats.h).  One row per format; each exporter lives in
 * its own file (export_NAME.c).  The command (cmd_export.c), its help, and
 * the benchmark (bench/export.c) all read this table, so a new format is
 * one row here plus its file.  No state, no locks.
 */
#include "export_formats.h"

#include <string.h>

static const tdm_export_option perfetto_options[] = {
    {"merge", "FILE", "add the tracks to this PyTorch profiler trace (same run)"},
    {NULL, NULL, NULL},
};
static const tdm_export_option flamegraph_options[] = {
    {"at", "TIME", "bytes live at TIME (offset from the recording's start: 1.5, 200ms; peak, end)"},
    {"by-category", NULL, "put the category under the device frame"},
    {NULL, NULL, NULL},
};

const tdm_export_format tdm__export_formats[] = {
    /* name, default extension, description, exporter, its own options */
    {"pytorch", ".pickle",
     "PyTorch snapshot pickle for pytorch.org/memory_viz, _memory_viz.py",
     tdm__export_pytorch, NULL, NULL},
    {"perfetto", ".json",
     "Chrome JSON trace for ui.perfetto.dev, chrome://tracing and HTA",
     tdm__export_perfetto, perfetto_options, NULL},
    {"flamegraph", ".folded",
     "collapsed stacks of the bytes live at the peak (flamegraph.pl, speedscope)",
     tdm__export_flamegraph, flamegraph_options, NULL},
    {"csv", ".csv", "RMM log (Thread,Time,Action,Pointer,Size,Stream) for RMM's replay",
     tdm__export_csv, NULL, NULL},
    {"json", ".model.json", "the analysis model as JSON, for scripts (docs/export.md)",
     tdm__export_json, NULL, NULL},
#ifdef TDM_HAVE_SQLITE
    {"sqlite", ".sqlite", "SQLite database of events, allocations and their categories (docs/export.md)",
     tdm__export_sqlite, NULL, NULL},
#else
    {"sqlite", ".sqlite", "SQLite database (not built in: this tidemark was built without libsqlite3)",
     NULL, NULL, "libsqlite3, Debian: libsqlite3-dev"},
#endif
};
const size_t tdm__export_format_count =
    sizeof tdm__export_formats / sizeof tdm__export_formats[0];

const tdm_export_format *tdm__export_format_find(const char *name)
{
    for (size_t i = 0; i < tdm__export_format_count; i++)
        if (strcmp(tdm__export_formats[i].name, name) == 0)
            return &tdm__export_formats[i];
    return NULL;
}

const char *tdm__export_option(const tdm_export_context *ctx, const char *name)
{
    const tdm_export_option *o = ctx->format ? ctx->format->options : NULL;
    for (size_t i = 0; o && o[i].name && i < TDM_EXPORT_MAX_OPTIONS; i++)
        if (strcmp(o[i].name, name) == 0)
            return ctx->option_values[i];
    return NULL;
}
