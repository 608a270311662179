/* viewer-export/cli/cmd_gate.c: `tidemark gate [GATES] FILE...`, memory limits
 * for CI on snapshots already recorded: every gate (gate.h) on every device
 * of every file, a line per result and a short account of each failure on
 * stdout, optionally JUnit XML and GitHub Actions annotations.  A directory
 * stands for its .tdm files, and the files of a multi-rank job are checked
 * in rank order (ranks.h), each line naming the rank and host.
 *
 * The report leads with the verdict when a gate failed (gate_text.c).
 *
 * Exit codes: 0 every gate passed; 3 one failed; 2 a file (or the
 * baseline) is missing, corrupt or truncated, a figure could not be
 * measured from it, or it lacks the --device asked for; 5 nothing was
 * measured (every file records no device memory used) and no
 * --allow-empty; 1 usage; 4 tidemark failed (out of memory, cannot
 * write the JUnit file).  4 outranks 3, 3 outranks 2, 2 outranks 5 (so a
 * CI job that must not regress still sees 3).  No state, no locks.
 */
#include "cli.h"
#include "load.h"
#include "gate.h"
#include "ranks.h"

#include <stdlib.h>
#include <string.h>

static const tdm_cli_option options[] = {
    {.part = &tdm__cli_gate_options},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_gate_spec = {
    .usage = "usage: tidemark gate GATE... [OPTIONS] FILE|DIR [FILE|DIR...]\n"
             "\n"
             "Checks memory limits on recorded snapshots, for CI.  Each file is a .tdm\n"
             "snapshot (or a file `tidemark import` reads); a directory stands for the\n"
             "*.tdm files in it.  When every gate passes, prints one line per gate per\n"
             "device per file.  When one fails, the report opens with the verdict: the\n"
             "first failure's limit, figure and excess, its file, rank and device, when\n"
             "it happened (time, step, phase) and the allocation sites holding the\n"
             "memory; other failures follow one line each and passes are counted.\n"
             "Snapshots of a multi-rank job (dump=out/%h-r%r.tdm) are checked in rank\n"
             "order and every line names the rank and host.\n"
             "\n",
    .options = {options, 25},
    .after = "\n"
             "At least one gate is needed.  Exit codes: 0 all gates passed, 1 usage\n"
             "error, 2 a file missing, unreadable, corrupt or truncated (or a figure it\n"
             "cannot give, or without the --device asked for), 3 a gate failed\n"
             "(outranks 2), 4 internal error, 5 nothing measured (no file records device\n"
             "memory used; --allow-empty passes).  See docs/ci.md.\n",
};

int tdm__cli_gate(int argc, char **argv)
{
    tdm_gate_options o;
    tdm__gate_options_init(&o);
    int c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "gate", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0)
        if (tdm__gate_option("gate", c, optarg, &o) <= 0)
            goto usage; /* (each of its codes is a gate option's) */
    if (c < 0)
        return p.exit;
    if (tdm__gate_options_check("gate", &o))
        goto usage;
    if (!o.enabled) {
        fprintf(stderr, "tidemark gate: no gate given (--max-peak, --max-reserved, "
                        "--max-leak or --baseline with --max-growth)\n");
        goto usage;
    }
    if (optind >= argc) {
        fprintf(stderr, "tidemark gate: no snapshot file given\n");
        goto usage;
    }

    /* A directory stands for its .tdm files (one per rank of a job). */
    tdm_rank_paths paths;
    int rc = tdm__ranks_expand("gate", argv + optind, (size_t)(argc - optind), &paths);
    if (rc == TDM_EXIT_TOOL_ERROR)
        return rc;
    size_t n = paths.count;
    tdm_input *inputs = calloc(n ? n : 1, sizeof *inputs);
    tdm_input baseline;
    memset(&baseline, 0, sizeof baseline);
    if (!inputs) {
        fprintf(stderr, "tidemark gate: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        tdm__ranks_paths_free(&paths);
        return TDM_EXIT_TOOL_ERROR;
    }
    if (o.baseline) {
        int brc = tdm__input_load("gate", o.baseline, &baseline);
        if (brc == TDM_EXIT_USAGE) { /* a folder of several: which one? (as run) */
            free(inputs);
            tdm__ranks_paths_free(&paths);
            return brc;
        }
        rc = tdm__exit_worse(rc, brc);
    }
    for (size_t i = 0; i < n; i++)
        rc = tdm__exit_worse(rc, tdm__input_load("gate", paths.paths[i], &inputs[i]));
    /* Results in rank order; files without ranks keep the given order. */
    tdm_status st = tdm__ranks_sort_inputs(inputs, n);
    if (st == TDM_OK)
        rc = tdm__exit_worse(rc, tdm__gate_check_devices("gate", &o, inputs, n));

    tdm_gate_report rep;
    if (st == TDM_OK)
        st = tdm__gate_evaluate(&o, inputs, n, o.baseline ? &baseline : NULL, &rep);
    if (st == TDM_OK) {
        /* The exit it leads to, unless a worse one (a file not read) was
         * said already. */
        const char *then = rc != TDM_EXIT_OK ? ""
                           : o.allow_empty   ? "; passing, as --allow-empty asks"
                                             : "; exit 5 (--allow-empty passes it)";
        if (!tdm__gate_nothing_measured(&rep))
            st = tdm__gate_print(stdout, &o, inputs, &rep);
        else if (n == 1)
            fprintf(stderr, "tidemark gate: nothing measured: %s records no device memory "
                            "used%s\n", inputs[0].path, then);
        else if (n > 1) /* (none: no file to read, and why was said) */
            fprintf(stderr, "tidemark gate: nothing measured: none of the %zu files records "
                            "device memory used%s\n", n, then);
        if (st == TDM_OK && o.github)
            tdm__gate_print_github(stdout, inputs, &rep);
        if (st == TDM_OK && o.junit) {
            /* Its folder made as -o's are (e.g. --junit reports/mem.xml). */
            st = tdm__cli_make_parents("gate", o.junit) != TDM_EXIT_OK
                     ? TDM_IO_ERROR
                     : tdm__junit_write("gate", o.junit, "tidemark gate", 0.0, &o, inputs, n,
                                        &rep);
            if (st == TDM_IO_ERROR) /* already explained */
                rc = tdm__gate_exit_worse(rc, TDM_EXIT_TOOL_ERROR), st = TDM_OK;
        }
        rc = tdm__gate_exit_worse(rc, tdm__gate_exit_code(&o, &rep));
        tdm__gate_report_free(&rep);
    }
    if (st != TDM_OK) {
        fprintf(stderr, "tidemark gate: %s\n", tdm_strerror(st));
        rc = TDM_EXIT_TOOL_ERROR;
    }
    for (size_t i = 0; i < n; i++)
        tdm__input_free(&inputs[i]);
    tdm__input_free(&baseline);
    free(inputs);
    tdm__ranks_paths_free(&paths);
    return tdm__cli_flush("gate", rc);
usage:
    fprintf(stderr, "Try 'tidemark help gate'.\n");
    return TDM_EXIT_USAGE;
}
