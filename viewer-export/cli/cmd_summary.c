/* viewer-export/cli/cmd_summary.c: `tidemark summary FILE.tdm|DIR...`:
 * its options, and which of the summaries (model/summary.h) its operands
 * call for: one file's full summary, each file's in turn (--each), or
 * the table of a job's ranks.  No state, no locks. */
#include "cli.h"
#include "load.h"
#include "ranks.h"
#include "summary.h"

#include <stdlib.h>

static const tdm_cli_option options[] = {
    {.name = "top", .code = 't', .has_arg = required_argument, .metavar = "N",
     .help = "allocation sites listed per device (default 10, 0 for none)"},
    {.name = "frames", .code = 'f', .has_arg = required_argument, .metavar = "N",
     .help = "frames shown per site (default 2; 6 with --verbose; 3 for\n"
             "the top site of a rank table)"},
    {.name = "device", .code = 'd', .has_arg = required_argument, .metavar = "N",
     .help = "only the device with ordinal N"},
    {.name = "verbose", .short_name = 'v',
     .help = "also the file's format, the full config and metadata, the\n"
             "allocator's counts and pools, the sites live at the end,\n"
             "and more frames per site"},
    {.name = "bytes", .code = 'b',
     .help = "sizes in the rank table and the allocator stats as exact\n"
             "byte counts"},
    {.name = "all", .code = 'a', .help = "with more than 16 ranks, every rank's row"},
    {.name = "each", .code = 'e', .help = "with several files, the full summary of each in turn"},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_summary_spec = {
    .usage = "usage: tidemark summary [OPTIONS] FILE.tdm|DIR [FILE.tdm|DIR...]\n"
             "\n"
             "Answer first: per device, the peak of allocated memory (how much, the\n"
             "share of the device's capacity, and when: time, step, phase), reserved\n"
             "memory at the peak, and the allocation sites holding the most memory at\n"
             "the peak with their innermost frames.  Then the details: bytes live at\n"
             "the end and the allocator's stats; who recorded the snapshot (process,\n"
             "command, start, recording settings, config); how many events were\n"
             "recorded and dropped.  --verbose adds what one screen leaves out.\n"
             "\n"
             "Several snapshots (or a directory, standing for the .tdm files in it), as\n"
             "a multi-rank job writes them with dump=out/%h-r%r.tdm, give one row per\n"
             "rank instead, in rank order: host, rank, device, peak, when it happened\n"
             "(from its own recording start), step and phase at the peak,\n"
             "bytes live at the end and events dropped; then the spread of the peaks\n"
             "(max, min, mean) with the rank and the top allocation site of the max.\n"
             "Past 16 ranks, the rows of the 10 highest peaks and the 3 lowest, and the\n"
             "median in the spread (--all for every row).\n"
             "\n"
             "options:\n",
    .options = {options, 16},
    .after = "\n"
             "A truncated file is summarized up to its last whole record, with a warning\n"
             "naming the byte offset, and exits 2.  Exit codes: 0 ok, 1 usage error,\n"
             "2 missing, unreadable, corrupt or truncated input, 4 internal error.\n"
             "See docs/multi-rank.md for jobs with many ranks.\n",
};

static int parse_count(const char *opt, const char *text, unsigned long max,
                       unsigned long *v)
{
    char *end;
    if (!text[0] || text[0] == '-') {
        fprintf(stderr, "tidemark summary: %s needs a number, not '%s'\n", opt, text);
        return -1;
    }
    *v = strtoul(text, &end, 10);
    if (*end || *v > max) {
        fprintf(stderr, "tidemark summary: %s needs a number up to %lu, not '%s'\n", opt,
                max, text);
        return -1;
    }
    return 0;
}

/* The full summary of one file; `gap` puts a blank line before it. */
static int summarize_one(const char *path, int gap, tdm_summary_options *o)
{
    tdm_snap *snap;
    tdm_model *model;
    int rc = tdm__input_read_snapshot("summary", path, &snap, &o->truncated, &o->truncated_at);
    if (!snap)
        return rc;
    tdm_status s = tdm__model_build(snap, &model);
    if (s == TDM_OK) {
        tdm_input in = {.path = path, .operand = path, .snap = snap, .model = model};
        if (tdm__input_check_device("summary", &in, o->device) != TDM_EXIT_OK) {
            tdm__model_free(model);
            tdm__input_snap_free(snap);
            return TDM_EXIT_BAD_INPUT;
        }
        if (gap)
            fputc('\n', stdout);
        s = tdm__summary_print(stdout, path, snap, model, o);
        tdm__model_free(model);
    }
    if (s != TDM_OK) {
        fprintf(stderr, "tidemark summary: %s: %s\n", path, tdm_strerror(s));
        rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
    }
    tdm__input_snap_free(snap);
    return rc;
}

int tdm__cli_summary(int argc, char **argv)
{
    tdm_summary_options o = {.top = 10, .frames = 0 /* by output */, .device = -1};
    unsigned long v;
    int c, exact = 0, each = 0;

    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "summary", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 't':
            if (parse_count("--top", optarg, 100000, &v))
                goto usage;
            o.top = (unsigned)v;
            break;
        case 'f':
            if (parse_count("--frames", optarg, 1000, &v))
                goto usage;
            if (v == 0) { /* (a site is named by its frames: one at least) */
                fprintf(stderr, "tidemark summary: --frames wants 1..1000, got '%s'\n", optarg);
                goto usage;
            }
            o.frames = (unsigned)v;
            break;
        case 'd':
            if (parse_count("--device", optarg, 32767, &v))
                goto usage;
            o.device = (int)v;
            break;
        case 'b':
            exact = o.exact = 1;
            break;
        case 'e':
            each = 1;
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'a':
            o.all = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (optind >= argc) {
        fprintf(stderr, "tidemark summary: no snapshot file given\n");
        goto usage;
    }

    tdm_rank_paths paths;
    int rc = tdm__ranks_expand("summary", argv + optind, (size_t)(argc - optind), &paths);
    if (rc == TDM_EXIT_TOOL_ERROR)
        return rc;
    /* One file: its full summary, as ever (also from a directory of one). */
    if (paths.count > 1 && !each) {
        rc = tdm__exit_worse(rc, tdm__summary_ranks(stdout, &paths, &o, exact, &tdm__input_loader));
    } else {
        for (size_t i = 0; i < paths.count; i++)
            rc = tdm__exit_worse(rc, summarize_one(paths.paths[i], i > 0, &o));
    }
    tdm__ranks_paths_free(&paths);
    return tdm__cli_flush("summary", rc);
usage:
    fprintf(stderr, "Try 'tidemark help summary'.\n");
    return TDM_EXIT_USAGE;
}
