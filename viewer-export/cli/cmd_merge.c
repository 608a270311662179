/* viewer-export/cli/cmd_merge.c: `tidemark merge-torch FILE.tdm [PICKLE]
 * [-o OUT.tdm]`: PyTorch's tensor history of a run (PICKLE, by default
 * FILE.torch.pickle, which python/tidemark_tensors.py writes beside the
 * snapshot) merged into tidemark's snapshot of it (import/merge_torch.h
 * says what comes from where).  `tidemark run` does the same for every
 * snapshot of its run that has such a pickle (tdm__cli_merge_torch_beside).
 *
 * Without -o the snapshot is replaced in place (a temporary beside it,
 * moved over it when complete) and the pickle, now inside it, removed;
 * with -o both inputs stay and OUT is never replaced without --force.
 * Whatever goes wrong, FILE.tdm is left as it was and one line says why.
 *
 * Exit codes as docs/cli.md: 1 usage (OUT exists without --force), 2 bad
 * input (a file missing, unreadable or malformed: the message names the
 * byte offset; a history that cannot be merged), 4 tool error.  No state,
 * no locks. */
#include "cli.h"
#include "merge_torch.h"
#include "import_formats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "merge-torch"

static const tdm_cli_option options[] = {
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "OUT",
     .help = "write the merged snapshot to OUT and keep both inputs;\n"
             "default: replace FILE.tdm and remove PICKLE"},
    {.name = "force", .code = 'F',
     .help = "replace OUT if it exists (refused otherwise, exit 1)"},
    {.name = "quiet", .short_name = 'q', .help = "no 'merged' line"},
    TDM_CLI_HELP_ROW("this help"),
    {0},
};

const tdm_cli_spec tdm__cli_merge_torch_spec = {
    .usage = "usage: tidemark merge-torch [-o OUT.tdm] [--force] [--quiet] FILE.tdm [PICKLE]\n"
             "\n"
             "Merges PyTorch's tensor history of a run (PICKLE; default FILE.torch.pickle,\n"
             "written beside the snapshot when a Python program used torch.cuda) into\n"
             "tidemark's snapshot of it: tensors from PyTorch, segments (reserved memory)\n"
             "and stacks of segments from tidemark.  `tidemark run` does this by itself.\n"
             "\n"
             "options:\n",
    .options = {options, 21},
    .after = "\n"
             "See docs/categories.md (\"One file\").\n",
};

typedef struct merge_job {
    const char *cmd;    /* the command saying what happens */
    const char *tdm;    /* the snapshot */
    const char *pickle; /* PyTorch's history */
    const char *out;    /* where the result goes (tdm: in place) */
    int force, quiet;
    /* The run's own pickle beside its snapshot (tdm__cli_merge_torch_beside):
     * one that recorded nothing is removed, not reported as unmergeable. */
    int beside;
} merge_job;

static int exit_for(tdm_status s)
{
    return s == TDM_HOST_OUT_OF_MEMORY || s == TDM_INTERNAL ? TDM_EXIT_TOOL_ERROR
                                                            : TDM_EXIT_BAD_INPUT;
}

static int run_merge(const merge_job *j)
{
    int in_place = strcmp(j->out, j->tdm) == 0;
    tdm_read_error rerr;
    memset(&rerr, 0, sizeof rerr);
    tdm_snap *t = NULL, *p = NULL, *m = NULL;
    tdm_snap_device_stats *stats = NULL;
    size_t nstats = 0;
    tdm_merge_torch_ring ring = {0};
    char err[320] = "";
    int rc = TDM_EXIT_OK;
    tdm_status s = tdm__snap_read_file(j->tdm, 0, &t, &rerr);
    if (s != TDM_OK) {
        fprintf(stderr, "tidemark %s: %s: %s at byte %" PRIu64 "%s%s; nothing merged\n", j->cmd,
                j->tdm, tdm_strerror(s), rerr.offset, rerr.message[0] ? ": " : "",
                rerr.message);
        return exit_for(s);
    }
    if (tdm__merge_torch_done(t)) {
        fprintf(stderr, "tidemark %s: %s holds PyTorch's tensor history already; %s left "
                        "as it is\n", j->cmd, j->tdm, j->pickle);
        rc = TDM_EXIT_OK;
        goto out;
    }
    s = tdm__merge_torch_load(j->pickle, &p, &stats, &nstats, &ring, err, sizeof err);
    if (s != TDM_OK) {
        fprintf(stderr, "tidemark %s: %s: %s (reading it as PyTorch's memory history): %s; "
                        "%s left as it is\n", j->cmd, j->pickle, tdm_strerror(s), err, j->tdm);
        rc = exit_for(s);
        goto out;
    }
    if (j->beside && tdm__merge_torch_empty(p)) {
        /* Nothing to merge, and nothing a reader of the folder needs: a
         * pickle left there would only be named by every command after. */
        if (unlink(j->pickle) != 0)
            fprintf(stderr, "tidemark %s: warning: %s holds no tensor history, but cannot be "
                            "removed: %s\n", j->cmd, j->pickle, strerror(errno));
        else if (!j->quiet)
            fprintf(stderr, "tidemark %s: %s removed: PyTorch recorded no tensor history "
                            "(its caching allocator off, or no CUDA tensor made); %s holds "
                            "tidemark's own events\n", j->cmd, j->pickle, j->tdm);
        goto out;
    }
    const char *base = strrchr(j->pickle, '/');
    tdm_merge_torch_report rep;
    s = tdm__merge_torch(t, p, stats, nstats, &ring, base ? base + 1 : j->pickle, &m, &rep, err,
                         sizeof err);
    if (s != TDM_OK) {
        fprintf(stderr, "tidemark %s: %s cannot be merged: %s; %s left as it is\n", j->cmd,
                j->pickle, err, j->tdm);
        rc = exit_for(s);
        goto out;
    }
    if (!in_place && (rc = tdm__cli_make_parents(j->cmd, j->out)) != TDM_EXIT_OK)
        goto out;
    s = tdm__snap_write_as(m, j->out, in_place || j->force);
    if (s != TDM_OK) {
        int e = errno;
        if (s == TDM_IO_ERROR && e == EEXIST && !in_place) {
            rc = tdm__cli_output_check(j->cmd, j->out, 0, 1); /* it appeared meanwhile */
        } else {
            fprintf(stderr, "tidemark %s: cannot write %s: %s; %s left as it is\n", j->cmd,
                    j->out, s == TDM_IO_ERROR && e ? tdm__out_strerror(e) : tdm_strerror(s),
                    j->tdm);
            rc = TDM_EXIT_TOOL_ERROR;
        }
        goto out;
    }
    /* The history is inside the snapshot now: one file, as if recorded so. */
    int removed = in_place && unlink(j->pickle) == 0;
    if (in_place && !removed)
        fprintf(stderr, "tidemark %s: warning: %s merged, but not removed: %s\n", j->cmd,
                j->pickle, strerror(errno));
    if (!j->quiet)
        fprintf(stderr, "tidemark %s: %s: %" PRIu64 " tensor events from %s merged (%" PRIu64
                        " of tidemark's events over PyTorch's segments replaced; marks from "
                        "%s; statistics from %s)\n", j->cmd, j->out, rep.tensor_events,
                base ? base + 1 : j->pickle, rep.left_out,
                rep.marks_from_torch ? "PyTorch" : "tidemark",
                rep.stats_from_torch ? "PyTorch" : "tidemark");
    if (rep.ring_full) /* quiet or not: the history is not whole */
        fprintf(stderr, "tidemark %s: %s: PyTorch's memory history filled its ring "
                        "(max_entries=%" PRIu64 "): its oldest tensor events are lost%s; "
                        "see the snapshot's note\n", j->cmd, j->out, ring.max_entries,
                rep.torch_lost ? "" : " (how many, torch.cuda.memory_stats cannot say)");
out:
    tdm__merge_torch_free(m);
    if (p)
        tdm__import_pytorch_free(p);
    free(stats);
    free(ring.full);
    tdm__snap_free(t);
    return rc;
}

int tdm__cli_merge_torch_beside(const char *cmd, const char *tdm_path, int quiet)
{
    char *pickle = tdm__merge_torch_pickle_path(tdm_path);
    if (!pickle) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return -1;
    }
    int rc = 0;
    if (access(pickle, F_OK) == 0) {
        merge_job j = {cmd, tdm_path, pickle, tdm_path, 0, quiet, 1};
        rc = run_merge(&j) == TDM_EXIT_OK ? 1 : -1;
    }
    free(pickle);
    return rc;
}

int tdm__cli_merge_torch(int argc, char **argv)
{
    const char *out_opt = NULL, *files[2] = {NULL, NULL};
    int quiet = 0, force = 0, c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, CMD, argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'o':
            out_opt = optarg;
            break;
        case 'F':
            force = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (argc - optind > 2)
        return tdm__cli_usage(CMD, "at most two files (FILE.tdm and PICKLE); got '%s' too",
                              argv[optind + 2]);
    for (int k = 0; k < 2 && optind + k < argc; k++)
        files[k] = argv[optind + k];
    if (!files[0])
        return tdm__cli_usage(CMD, "no snapshot given");
    if (out_opt && !*out_opt)
        return tdm__cli_usage(CMD, "option '-o' needs a value");
    char *pickle = files[1] ? strdup(files[1]) : tdm__merge_torch_pickle_path(files[0]);
    char *out = !out_opt ? strdup(files[0]) : tdm__cli_output_path(out_opt, files[0]);
    int rc;
    struct stat st;
    if (!pickle || !out) {
        fprintf(stderr, "tidemark " CMD ": %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        rc = TDM_EXIT_TOOL_ERROR;
    } else if (stat(files[0], &st) != 0 || access(files[0], R_OK) != 0) {
        /* The snapshot first: a pickle missing beside a missing snapshot
         * is not the news. */
        fprintf(stderr, "tidemark " CMD ": %s: %s\n", files[0], strerror(errno));
        rc = TDM_EXIT_BAD_INPUT;
    } else if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tidemark " CMD ": %s is a directory; merge-torch takes one snapshot\n",
                files[0]);
        rc = TDM_EXIT_BAD_INPUT;
    } else if (!tdm__cli_has_tdm_signature(files[0])) {
        fprintf(stderr, "tidemark " CMD ": %s is not a tidemark snapshot (FILE.tdm comes first, "
                        "then PICKLE); nothing merged\n", files[0]);
        rc = TDM_EXIT_BAD_INPUT;
    } else if (access(pickle, R_OK) != 0) {
        fprintf(stderr, "tidemark " CMD ": no PyTorch history to merge: %s: %s; %s left as "
                        "it is\n", pickle, strerror(errno), files[0]);
        rc = TDM_EXIT_BAD_INPUT;
    } else if (out_opt && (rc = tdm__cli_output_check(CMD, out, force, 1)) != TDM_EXIT_OK) {
        /* said */
    } else {
        merge_job j = {CMD, files[0], pickle, out, force, quiet, 0};
        rc = run_merge(&j);
    }
    free(pickle);
    free(out);
    return tdm__cli_flush(CMD, rc);
}
