/* viewer-export/cli/run_report.c: what `tidemark run` prints once the
 * command has ended: the summaries of the snapshots of processes that
 * used device memory (one rank table for the ranks of a job, as `tidemark
 * summary DIR` prints it), the line that counts and names them, the gates
 * and their reports (text, GitHub annotations, JUnit).  A failing gate's
 * report leads with the verdict and stands alone.  No state, no locks.
 */
#include "cli.h"
#include "load.h"
#include "ranks.h"
#include "run_state.h"
#include "summary.h"

#include <stdlib.h>
#include <string.h>

/* The ranks of a job (two or more busy snapshots with a rank): one row
 * per rank and the spread, as `tidemark summary DIR` prints them, not a
 * whole summary each.  -1 when it cannot be printed. */
static int print_rank_table(run_state *r)
{
    tdm_summary_options so = {.top = 5, .frames = 3, .device = r->o.device};
    tdm_rank_paths paths = {.paths = calloc(r->busy, sizeof(char *)), .count = 0};
    int rc = paths.paths ? 0 : -1;
    for (size_t i = 0; !rc && i < r->busy; i++)
        if (r->inputs[i].model && !(paths.paths[paths.count++] = strdup(r->inputs[i].path)))
            rc = -1;
    if (!rc) {
        fputc('\n', stderr);
        int s = tdm__summary_ranks(stderr, &paths, &so, 0, &tdm__input_loader);
        rc = s == TDM_EXIT_OK || s == TDM_EXIT_BAD_INPUT ? 0 : -1;
    }
    tdm__ranks_paths_free(&paths);
    return rc;
}

static size_t ranked(const run_state *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->busy; i++)
        n += r->inputs[i].snap && r->inputs[i].snap->header.rank >= 0;
    return n;
}

/* Whole summaries of the busy snapshots; -1 when one cannot be printed. */
static int print_summaries(run_state *r)
{
    tdm_summary_options so = {.top = 5, .frames = 3, .device = r->o.device};
    int rc = 0;
    if (ranked(r) >= 2)
        return print_rank_table(r);
    for (size_t i = 0; i < r->busy; i++) {
        tdm_input *in = &r->inputs[i];
        if (!in->model)
            continue;
        so.truncated = in->truncated;
        so.truncated_at = in->truncated_at;
        fputc('\n', stderr);
        if (tdm__summary_print(stderr, in->path, in->snap, in->model, &so) != TDM_OK)
            rc = -1;
    }
    return rc;
}

/* Which process wrote a snapshot: "train_sim (pid 123)", "python3
 * train.py rank 1 (pid 124)" (the script too, for an interpreter), from
 * the header's command line, rank and pid. */
static void print_writer(FILE *out, const tdm_input *in)
{
    const tdm_snap *s = in->snap;
    if (!s) {
        const char *slash = strrchr(in->path, '/');
        fprintf(out, "%s (unreadable)", slash ? slash + 1 : in->path);
        return;
    }
    const char *cmd = s->header.command ? s->header.command : "";
    for (int word = 0; word < 2; word++) {
        size_t len = strcspn(cmd, " ");
        const char *name = cmd;
        for (const char *c = cmd; c < cmd + len; c++)
            if (*c == '/')
                name = c + 1;
        if (word == 0)
            fprintf(out, "%.*s", name < cmd + len ? (int)(cmd + len - name) : 1,
                    name < cmd + len ? name : "?");
        else if (len && cmd[0] != '-')
            fprintf(out, " %.*s", (int)(cmd + len - name), name);
        if (word == 0 && strncmp(name, "python", 6) != 0)
            break;
        cmd += len;
        cmd += strspn(cmd, " ");
    }
    if (s->header.rank >= 0)
        fprintf(out, " rank %d", (int)s->header.rank);
    fprintf(out, " (pid %lld)", (long long)s->header.pid);
}

/* Snapshots named one by one on the count line, at most. */
#define WRITERS_SHOWN 8

/* "tidemark run: 2 snapshots in DIR (1 of processes that used no device
 * memory): train_sim (pid 12), python3 train.py rank 0 (pid 13)", and
 * where the whole summary is when it was left out. */
static void print_count(run_state *r, int failed)
{
    fprintf(stderr, "tidemark run: %zu snapshot%s in %s", r->npaths, r->npaths == 1 ? "" : "s",
            r->dir);
    if (r->npaths > r->busy)
        fprintf(stderr, " (%zu of processes that used no device memory)", r->npaths - r->busy);
    /* Several: which process wrote which, the busy ones first. */
    for (size_t i = 0; r->npaths > 1 && i < r->npaths && i < WRITERS_SHOWN; i++) {
        fputs(i ? ", " : ": ", stderr);
        print_writer(stderr, &r->inputs[i]);
    }
    if (r->npaths > WRITERS_SHOWN)
        fprintf(stderr, ", and %zu more", r->npaths - WRITERS_SHOWN);
    if (failed && r->busy)
        fprintf(stderr, "; the whole summary: tidemark summary %s",
                r->busy == 1 ? r->inputs[0].path : r->dir);
    fputc('\n', stderr);
}

/* The one line when gates measured nothing; `other`: the run exits with
 * another code, said on its own line (the command's, a snapshot
 * unread), so this one names none. */
static void print_nothing(const run_state *r, int other)
{
    const char *then = other            ? ""
                       : r->o.allow_empty ? "; passing, as --allow-empty asks"
                                          : "; exit 5 (--allow-empty passes it)";
    if (!r->npaths && r->preloaded)
        fprintf(stderr, "tidemark run: nothing measured: no process of the command used "
                        "device memory (one that never touches it writes no snapshot)%s\n",
                then);
    else if (!r->npaths)
        fprintf(stderr, "tidemark run: nothing measured: no snapshot was written (is the "
                        "preload library there, or the program linked with libtidemark.so?)"
                        "%s\n", then);
    else if (r->npaths == 1)
        fprintf(stderr, "tidemark run: nothing measured: the 1 snapshot written is of a "
                        "process that never touched device memory%s\n", then);
    else
        fprintf(stderr, "tidemark run: nothing measured: the %zu snapshots written are of "
                        "processes that never touched device memory%s\n", r->npaths, then);
}

/* Summaries, gates and their reports, in the order a reader needs: a
 * failed gate's verdict first, alone; else the summaries, then the gates. */
void tdm__run_report(run_state *r, int cmd_rc, int read_rc, tdm_run_verdict *v)
{
    size_t first = 0, count = r->busy ? r->busy : r->npaths;
    tdm_gate_report rep;
    int evaluated = 0;
    if (read_rc != TDM_EXIT_OK)
        v->soft = 1;
    if (r->o.enabled) {
        v->device = tdm__gate_check_devices("run", &r->o, r->inputs + first, count) != 0;
        tdm_status st = tdm__gate_evaluate(&r->o, r->inputs + first, count,
                                           r->o.baseline ? &r->baseline : NULL, &rep);
        if (st != TDM_OK) {
            fprintf(stderr, "tidemark run: %s\n", tdm_strerror(st));
            v->hard = 1;
        } else {
            evaluated = 1;
            v->failed = rep.failed > 0;
            v->nothing = tdm__gate_nothing_measured(&rep);
            if (rep.errors)
                v->soft = 1;
        }
    }
    if (cmd_rc != 0 && !v->failed)
        fprintf(stderr, "tidemark run: the command exited with %d\n", cmd_rc);
    if (!v->failed && !r->quiet && print_summaries(r) != 0)
        v->hard = 1;
    if (!v->failed) {
        if (r->busy && !r->quiet)
            fputc('\n', stderr);
        print_count(r, 0);
    }
    if (!evaluated)
        return;
    tdm_status st = TDM_OK;
    if (v->nothing) {
        print_nothing(r, cmd_rc != 0 || v->device || v->soft || v->hard);
    } else {
        if (!v->failed)
            fputc('\n', stderr);
        st = tdm__gate_print(stderr, &r->o, r->inputs + first, &rep);
        if (v->failed) {
            print_count(r, 1);
            if (cmd_rc != 0)
                fprintf(stderr, "tidemark run: the command exited with %d\n", cmd_rc);
        }
    }
    if (st == TDM_OK && r->o.github)
        tdm__gate_print_github(stdout, r->inputs + first, &rep);
    if (st == TDM_OK && r->o.junit) {
        /* Its folder made as -o's is. */
        st = tdm__cli_make_parents("run", r->o.junit) != TDM_EXIT_OK
                 ? TDM_IO_ERROR
                 : tdm__junit_write("run", r->o.junit, "tidemark run", r->child.seconds, &r->o,
                                    r->inputs + first, count, &rep);
        if (st == TDM_IO_ERROR) /* said already */
            v->hard = 1, st = TDM_OK;
    }
    if (st != TDM_OK) {
        fprintf(stderr, "tidemark run: %s\n", tdm_strerror(st));
        v->hard = 1;
    }
    tdm__gate_report_free(&rep);
}
