/* viewer-export/cli/run_state.h: what `tidemark run`'s files share about
 * one run (cmd_run.c: options, the folder, the environment, collecting;
 * run_report.c: summaries, the rank table, gates and their reports).
 * Private to cli/.  No state, no locks. */
#ifndef TDM_VIEWER_RUN_STATE_H
#define TDM_VIEWER_RUN_STATE_H

#include <limits.h>
#include <sys/types.h>
#include <time.h>

#include "gate.h"
#include "input.h"
#include "run.h"

typedef struct old_file {
    char *name;
    ino_t ino;
    struct timespec mtime;
} old_file;

typedef struct run_state {
    tdm_gate_options o;
    const char *dir_arg;
    char *conf;              /* the --conf values joined by commas */
    char **confs;            /* each --conf value (borrowed from argv) */
    char *owned_conf;        /* --simulate's "simulate=GPU", in confs */
    size_t nconfs;
    char *inherited;         /* TIDEMARK_CONF from the environment, or NULL */
    int quiet;
    int command_failed;      /* --command-failed N; 0: the command's own code */
    char dir[PATH_MAX];      /* absolute */
    char spill_dir[PATH_MAX]; /* the run's own spill folder; "" when the
                               * settings name a spill of their own */
    const char *dump_name;   /* the snapshots' file name template */
    char user_dump_name[256]; /* --conf dump=...'s, when given */
    char user_dump_dir[PATH_MAX]; /* its folder, when it has one */
    int launcher;            /* the command starts ranks (mpirun, srun...) */
    old_file *old;
    size_t nold;
    char **paths;
    size_t npaths;
    tdm_input *inputs;       /* npaths of them: the busy ones first */
    size_t busy;             /* snapshots of processes that used device memory */
    int preloaded;           /* LD_PRELOAD has the preload library */
    tdm_input baseline;
    tdm_run_child child;
} run_state;

/* What a run's report adds up to. */
typedef struct tdm_run_verdict {
    int hard;      /* tidemark failed: 4 whatever else */
    int failed;    /* a gate failed: 3 */
    int device;    /* a snapshot lacks the --device: 2 */
    int soft;      /* a snapshot unreadable, a figure unmeasurable: 4 */
    int nothing;   /* nothing measured: 5 unless --allow-empty */
} tdm_run_verdict;

/* Summaries, gates and their reports, in the order a reader needs: a
 * failed gate's verdict first, alone; else the summaries (or, for the
 * ranks of a job, one rank table), then the gates (run_report.c). */
void tdm__run_report(run_state *r, int cmd_rc, int read_rc, tdm_run_verdict *v);

#endif
