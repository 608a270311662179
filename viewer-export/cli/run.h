/* viewer-export/cli/run.h: what the files of `tidemark run` share:
 * cmd_run.c (options, collecting the snapshots, reports), run_child.c
 * (running the command: its process group, signals, the snapshot asked
 * for on interruption, the terminal) and run_conf.c (the TIDEMARK_CONF
 * the command gets, and its check by libtidemark.so before it starts).
 * Private to cli/.  No state, no locks. */
#ifndef TDM_VIEWER_RUN_H
#define TDM_VIEWER_RUN_H

#include <stddef.h>

#define TDM_RUN_PRELOAD_NAME "libtidemark_preload.so"
#define TDM_RUN_LIBRARY_NAME "libtidemark.so"
#define TDM_RUN_DUMP_NAME "tidemark-%h-%p.tdm"
/* Under a launcher of ranks (mpirun, srun, torchrun...): by rank.  A name
 * without %p taken already gets -PID (docs/configuration.md), so the
 * launcher's own processes, rank 0 by default, never overwrite rank 0. */
#define TDM_RUN_RANK_DUMP_NAME "tidemark-%h-r%r.tdm"
/* The signal run asks snapshots with when the user named none: one that
 * programs leave alone (not SIGUSR1/2, which they use). */
#define TDM_RUN_DUMP_SIGNAL "SIGRTMAX-5"
/* How long the processes asked for a snapshot on interruption are waited
 * for (a million events take about 0.3 s), in ms. */
#define TDM_RUN_DUMP_WAIT_MS 10000

/* ---- run_conf.c --------------------------------------------------------- */

/* Finds library `name` (TDM_RUN_PRELOAD_NAME or TDM_RUN_LIBRARY_NAME):
 * first in folder `first` when given, then beside this binary (the build
 * tree), then in its ../libNAME and ../libNAME/TRIPLET folders (lib,
 * lib64, lib/x86_64-linux-gnu: an installed tree).
 * Sets path[0] = 0 when there is none. */
void tdm__run_find_library(const char *name, const char *first, char *path, size_t len);

/* Finds python/autostart (its sitecustomize.py starts tidemark's
 * automatic torch phases and torch_tensors in every Python program run
 * starts): $TIDEMARK_PYTHON_DIR/autostart, else, beside this binary,
 * ../share/tidemark/python/autostart (an installed tree) or
 * ../python/autostart (a build folder in the source tree, wherever the
 * tree is now), else the source tree's it was built from while the binary
 * is still in its build folder.  Sets path[0] = 0 when there is none, and
 * then `looked` (may be NULL) to the folders looked in, comma-separated. */
void tdm__run_find_autostart(char *path, size_t len, char *looked, size_t looked_len);

/* The `dump` a --conf value sets, as run takes it: the file name template
 * (it must end in .tdm) into name[0..name_len), and its folder, when it
 * has one, into folder (then *folder_out = folder; else NULL).  Returns 1
 * when it has one, 0 when not, -1 after printing why it cannot be used. */
int tdm__run_conf_dump(const char *conf, const char **folder_out, char *folder,
                       size_t folder_len, char *name, size_t name_len);

/* Whether `argv0` (the command run starts) is a launcher of ranks:
 * mpirun, mpiexec, orterun, prterun, srun, torchrun, ... by its file name. */
int tdm__run_is_launcher(const char *argv0);

/* The TIDEMARK_CONF the command gets: `inherited` (the one in run's
 * environment, may be NULL), the --conf values joined (`conf`, may be
 * NULL), dump=DIR/NAME ('%' in DIR escaped; NAME `dump_name`, NULL for
 * TDM_RUN_DUMP_NAME), spill=SPILL_DIR/STEM[-%p].spill when `spill_dir` is
 * given (STEM: NAME without .tdm), then what
 * snapshots on interruption need: dump_on with `signal` added (unless the
 * settings say dump_on=none or already have it) and signal=
 * TDM_RUN_DUMP_SIGNAL (unless they name one).  *dump_signal gets the
 * signal number that asks for a snapshot, 0 when there is none.  NULL
 * when out of memory. */
char *tdm__run_conf_make(const char *inherited, const char *conf, const char *dir,
                         const char *dump_name, const char *spill_dir, int *dump_signal);

/* Checks, with libtidemark.so's tdm_conf_check (loaded with dlopen from
 * beside the preload library `preload`, or where tdm__run_find_library
 * finds it), the inherited TIDEMARK_CONF, each --conf value and the
 * composed text, before the command starts.  TIDEMARK_CONF must not be in
 * the environment then (loading the library applies it).  Returns 0, or
 * -1 after printing the library's line about the first one refused
 * ("tidemark run: --conf record=al: bad value 'al' for key 'record'
 * (...); the command was not started").  Without the library or the
 * function, nothing is checked: 0. */
int tdm__run_conf_check(const char *preload, const char *inherited, char *const *confs,
                        size_t conf_count, const char *composed);

/* The last value of `key` in TIDEMARK_CONF text `conf` into out (len
 * bytes): 1, or 0 when it has none (or it does not fit). */
int tdm__run_conf_value(const char *conf, const char *key, char *out, size_t len);

/* The folder of the simulated CUDA platform's libraries (simcuda/,
 * docs/simulate.md): $TIDEMARK_SIMCUDA_DIR when set, else simcuda/ beside
 * this binary (the build tree), else tidemark/simcuda in its ../lib folders or their
 * TRIPLET subfolders (installed).
 * dir[0] = 0 when libsimcuda.so is in none of them. */
void tdm__run_find_simcuda(char *dir, size_t len);

/* ---- run_child.c -------------------------------------------------------- */

typedef struct tdm_run_child {
    /* in */
    const char *dir;        /* the snapshot folder (absolute) */
    const char *spill_dir;  /* the run's own spill folder, swept by cmd_run.c
                               afterwards; NULL: the user chose `spill` */
    int dump_signal;        /* asks a recording process for a snapshot; 0: none */
    /* out */
    double seconds;         /* the command's run time */
    char **interrupted;     /* snapshots written on interruption (kept ones) */
    size_t interrupted_count;
} tdm_run_child;

/* Runs argv in a process group of its own and waits for it (and, a short
 * while, for processes it left running).  SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT reaching tidemark (a terminal's ^C reaches only tidemark's group)
 * are passed on to the command's group; the first one is held back until
 * every process of the command that records has written the history up to
 * then (asked with dump_signal; at most TDM_RUN_DUMP_WAIT_MS), and the
 * line "tidemark run: SIGINT: the history up to it is in PATH" says where.
 * On a terminal, ^Z stops and `fg` resumes the command with tidemark, and
 * a command that reads the terminal gets it (from then on ^C reaches it
 * directly).  Returns the shell-style exit code (128+N when signal N
 * killed it), or -1 when it could not be started at all (after printing
 * why). */
int tdm__run_child(char **argv, tdm_run_child *c);
void tdm__run_child_free(tdm_run_child *c);

#endif
