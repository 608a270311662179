/* viewer-export/cli/cmd_run.c: `tidemark run [OPTIONS] [GATES] -- CMD ARGS...`
 * records a command: it runs CMD with libtidemark_preload.so in LD_PRELOAD
 * and TIDEMARK_CONF set so that every process of it (children inherit the
 * environment) writes its own snapshot into one folder, waits for it,
 * summarizes every snapshot written, and checks the gates (gate.h).
 * run_child.c runs the command (its own process group, signals, the
 * snapshot asked for on interruption); run_conf.c composes and checks
 * TIDEMARK_CONF; run_spills.c recovers what killed processes left;
 * run_report.c prints the summaries, the rank table and the gates.
 *
 * Invariants:
 *  - The command's own exit code comes back unchanged unless tidemark
 *    failed (4), a gate failed (3), a snapshot lacks the --device asked
 *    for (2) or gates measured nothing (5); killed by signal N, it is
 *    128+N, as shells report it; a command that cannot be started gives
 *    127 (not found) or 126 (not executable), as shells do.
 *  - A TIDEMARK_CONF the library would refuse (inherited, --conf, or as
 *    composed) stops the run before the command starts (exit 1).
 *  - Runs are never mixed: a folder that holds snapshots already gets
 *    this run's in a new subfolder (DIR/run-2, run-3, ...), said on
 *    stderr; and only snapshots written during this run are collected.
 *  - The command's stdout is its own: tidemark reports on stderr (GitHub
 *    annotation lines, meant for the runner, go to stdout).
 *  - A failing gate's report leads with the verdict and stands alone (no
 *    whole summary before it): at most about 30 lines for one snapshot.
 * No state, no locks.
 */
#define _GNU_SOURCE /* asprintf */
#include "cli.h"
#include "load.h"
#include "format_size.h"
#include "gate.h"
#include "run.h"
#include "run_folder.h"
#include "run_spills.h"
#include "run_state.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_DIR "tidemark-out"

/* ---- the preload library ----------------------------------------------- */

/* Finds libtidemark_preload.so: $TIDEMARK_PRELOAD, else as run.h's
 * tdm__run_find_library finds it.  Returns 0 with path[0] set, 0 with
 * path[0] == 0 when there is none, -1 after printing why an override is
 * unusable. */
static int find_preload(char *path, size_t len)
{
    path[0] = '\0';
    const char *env = getenv("TIDEMARK_PRELOAD");
    if (env) {
        if (!env[0])
            return 0;
        if (!realpath(env, path) || access(path, R_OK) != 0) {
            fprintf(stderr, "tidemark run: TIDEMARK_PRELOAD=%s: %s\n", env, strerror(errno));
            path[0] = '\0';
            return -1;
        }
        /* A folder or a file of something else: the dynamic linker would
         * print an error and run the command unrecorded. */
        struct stat st = {0};
        unsigned char magic[4] = {0};
        FILE *f = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? fopen(path, "rb") : NULL;
        size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
        if (f)
            fclose(f);
        if (got != sizeof magic || memcmp(magic, "\177ELF", 4) != 0) {
            fprintf(stderr, "tidemark run: TIDEMARK_PRELOAD=%s: %s\n", env,
                    S_ISDIR(st.st_mode) ? "is a directory, not a shared library"
                                        : "not a shared library (no ELF header)");
            path[0] = '\0';
            return -1;
        }
        return 0;
    }
    tdm__run_find_library(TDM_RUN_PRELOAD_NAME, NULL, path, len);
    return 0;
}

/* ---- the environment --------------------------------------------------- */

/* Whether the LD_PRELOAD entry at `e` (len bytes) is a sanitizer's runtime
 * (libasan.so.8, /usr/lib/.../libtsan.so.2, ...), which must stay first. */
static int sanitizer_runtime(const char *e, size_t len)
{
    static const char *const names[] = {"libasan", "libtsan", "libubsan", "libhwasan",
                                        "liblsan", "libmsan", "libclang_rt."};
    const char *base = e;
    for (size_t i = 0; i < len; i++)
        if (e[i] == '/')
            base = e + i + 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(base, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

/* LD_PRELOAD with the preload library first, after any sanitizer runtimes
 * already at its head (an instrumented program needs those first). */
static int set_preload_env(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    char *v;
    if (old && old[0]) {
        size_t head = 0; /* the leading sanitizer runtimes, with their separators */
        for (;;) {
            size_t start = head + strspn(old + head, ": ");
            size_t len = strcspn(old + start, ": ");
            if (!len || !sanitizer_runtime(old + start, len))
                break;
            head = start + len;
        }
        if (asprintf(&v, "%.*s%s%s:%s", (int)head, old, head ? ":" : "", lib,
                     old + head + strspn(old + head, ": ")) < 0)
            return -1;
        size_t n = strlen(v);
        if (n && v[n - 1] == ':') /* nothing after the sanitizer runtimes */
            v[n - 1] = '\0';
    } else if (!(v = strdup(lib))) {
        return -1;
    }
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* simulate=GPU (--simulate, --conf or the inherited TIDEMARK_CONF): the
 * simulated CUDA platform's libraries go into LD_PRELOAD right after the
 * preload library (whose hooks then wrap the platform's calls as they
 * would NVIDIA's), SIMCUDA_GPU names the GPU, and the platform's Python
 * start-up folder goes first on PYTHONPATH.  A TDM_EXIT_* code. */
static int set_simulate_env(const char *conf, const char *inherited, int preloaded)
{
    static const char *const libs[] = {"libsimcuda.so", "libsimcudart.so", "libsimcublasLt.so",
                                       "libsimcublas.so", "libsimnvml.so", "libsimnccl.so"};
    char gpu[64] = "", dir[PATH_MAX];
    if (!(conf && tdm__run_conf_value(conf, "simulate", gpu, sizeof gpu)) && inherited)
        tdm__run_conf_value(inherited, "simulate", gpu, sizeof gpu);
    if (!gpu[0] || strcmp(gpu, "off") == 0)
        return TDM_EXIT_OK;
    tdm__run_find_simcuda(dir, sizeof dir);
    if (!dir[0] || strpbrk(dir, ": \t")) {
        fprintf(stderr, "tidemark run: simulate=%s: %s\n", gpu,
                dir[0] ? "the simulated platform's folder has ':' or blanks in its path"
                       : "the simulated CUDA platform (libsimcuda.so) is not installed "
                         "(built only with the CUDA 13 headers; TIDEMARK_SIMCUDA_DIR "
                         "names its folder)");
        return TDM_EXIT_TOOL_ERROR;
    }
    /* Inserted after the preload library, which set_preload_env put first
     * (after any sanitizer runtimes); first when there is none. */
    const char *old = getenv("LD_PRELOAD");
    const char *after = old ? old : "";
    size_t head = 0;
    if (preloaded) {
        const char *p = strstr(after, TDM_RUN_PRELOAD_NAME);
        if (p)
            head = (size_t)(p - after) + strlen(TDM_RUN_PRELOAD_NAME);
    }
    char *v = NULL, *list = NULL;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        char *next;
        if (asprintf(&next, "%s%s%s/%s", list ? list : "", list ? ":" : "", dir, libs[i]) < 0) {
            free(list);
            return TDM_EXIT_TOOL_ERROR;
        }
        free(list);
        list = next;
    }
    int rc = asprintf(&v, "%.*s%s%s%s%s", (int)head, after, head ? ":" : "", list,
                      after[head] && after[head] != ':' ? ":" : "", after + head);
    free(list);
    if (rc < 0 || setenv("LD_PRELOAD", v, 1) != 0 || setenv("SIMCUDA_GPU", gpu, 1) != 0) {
        free(v);
        fprintf(stderr, "tidemark run: %s\n", strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    free(v);
    /* The platform's Python start-up hook (cuDNN off) goes first on
     * PYTHONPATH; it runs the next sitecustomize (tidemark's) itself. */
    char py[PATH_MAX + 32];
    snprintf(py, sizeof py, "%s/python/autostart", dir);
    if (access(py, R_OK) == 0) {
        const char *pp = getenv("PYTHONPATH");
        if (asprintf(&v, "%s%s%s", py, pp && pp[0] ? ":" : "", pp ? pp : "") < 0 ||
            setenv("PYTHONPATH", v, 1) != 0) {
            fprintf(stderr, "tidemark run: %s\n", strerror(errno));
            return TDM_EXIT_TOOL_ERROR;
        }
        free(v);
    }
    return TDM_EXIT_OK;
}

/* Puts python/autostart first on PYTHONPATH, so that a Python program
 * gets automatic torch phases and torch_tensors (its sitecustomize.py;
 * TIDEMARK_CONF's torch_phases=off leaves them out).  When it is not
 * found, one line says so and where it was looked for: a Python program
 * then runs with neither, which changes what its snapshot holds. */
static int set_python_env(void)
{
    char dir[PATH_MAX], looked[4 * PATH_MAX];
    tdm__run_find_autostart(dir, sizeof dir, looked, sizeof looked);
    if (!dir[0]) {
        fprintf(stderr, "tidemark run: note: python/autostart not found (looked in %s); Python "
                        "programs run without torch_phases and torch_tensors: set "
                        "TIDEMARK_PYTHON_DIR to tidemark's python folder\n",
                looked[0] ? looked : "no folder");
        return 0;
    }
    const char *old = getenv("PYTHONPATH");
    char *v;
    if (old && old[0]) {
        if (asprintf(&v, "%s:%s", dir, old) < 0)
            return -1;
    } else if (!(v = strdup(dir))) {
        return -1;
    }
    int rc = setenv("PYTHONPATH", v, 1);
    free(v);
    return rc;
}

/* ---- the command ------------------------------------------------------- */

static const tdm_cli_option options[] = {
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "DIR",
     .help = "folder for the snapshots (default " DEFAULT_DIR "; made\n"
             "if missing); when it holds an earlier run's, this\n"
             "run's go into a new DIR/run-N, said on stderr"},
    {.name = "conf", .code = 'c', .has_arg = required_argument, .metavar = "KEY=VAL,...",
     .help = "more TIDEMARK_CONF settings (see docs/configuration.md);\n"
             "may be repeated; checked, with the TIDEMARK_CONF you\n"
             "have, before COMMAND starts; dump=[FOLDER/]NAME.tdm\n"
             "names the snapshots (FOLDER is then -o's)"},
    {.name = "simulate", .code = 'S', .has_arg = required_argument, .metavar = "GPU",
     .help = "run COMMAND on the simulated CUDA platform as GPU:\n"
             "h100, h200, a100-40g, a100-80g, cuda:SIZE, or Nx one\n"
             "of them (docs/simulate.md); = --conf simulate=GPU"},
    {.name = "quiet", .short_name = 'q', .help = "no summaries, only the gate report"},
    {.name = "command-failed", .code = 'F', .has_arg = required_argument, .metavar = "N",
     .help = "exit N (6 to 125) when the command fails in any way,\n"
             "instead of its own code, so that 2 to 5 always mean\n"
             "tidemark's verdict"},
    {.part = &tdm__cli_gate_options},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_run_spec = {
    .usage = "usage: tidemark run [OPTIONS] [GATES] -- COMMAND [ARGS...]\n"
             "\n"
             "Runs COMMAND with tidemark recording the device memory of every process it\n"
             "starts (LD_PRELOAD=libtidemark_preload.so and\n"
             "TIDEMARK_CONF=...,dump=DIR/" TDM_RUN_DUMP_NAME "), then summarizes each snapshot\n"
             "written and checks the gates; when a gate fails, its verdict and the sites\n"
             "holding the memory replace the summaries.  Reports go to stderr; the\n"
             "command's stdout is left to it.\n"
             "\n"
             "options:\n",
    .options = {options, 25},
    .after = "\n"
             "The preload library is $TIDEMARK_PRELOAD when set (empty: none), else the one\n"
             "beside this program or in its ../lib*/ folder.  Without it, only programs\n"
             "linked with libtidemark.so are recorded (a note says so).\n"
             "\n"
             "Under a launcher of ranks (mpirun, mpiexec, srun, torchrun...) snapshots are\n"
             "named by rank (" TDM_RUN_RANK_DUMP_NAME ") and the report is one row per rank.\n"
             "A process that ends without writing its snapshot (SIGKILL, the OOM killer, a\n"
             "crash) leaves its history in run's spill folder: run recovers it into DIR\n"
             "(partial), says so, and removes the spill file.\n"
             "\n"
             "Interrupted (^C, SIGTERM, SIGHUP, SIGQUIT), tidemark has every recording\n"
             "process write the history so far (dump_on=...+signal, signal=" TDM_RUN_DUMP_SIGNAL
             "\n"
             "unless you set one), says where, then passes the signal on.\n"
             "\n"
             "Exit code: the command's own (128+N when signal N killed it; 127/126 when it\n"
             "cannot be started; --command-failed N for all of those), unless a gate failed\n"
             "(3) or tidemark failed (4: cannot fork or write a report, a snapshot it cannot\n"
             "read).  5 gates given and nothing measured: no snapshot, or only of processes\n"
             "that used no device memory (unless --allow-empty; without gates such a run\n"
             "exits with the command's code).  2 the --baseline file is bad, or a\n"
             "snapshot lacks the --device asked for.  1 usage error or a bad TIDEMARK_CONF.\n",
    /* The first word that is not an option starts the command. */
    .operand_ends_options = 1,
};

static void run_state_free(run_state *r)
{
    free(r->conf);
    free(r->confs);
    free(r->owned_conf);
    free(r->inherited);
    for (size_t i = 0; i < r->nold; i++)
        free(r->old[i].name);
    free(r->old);
    for (size_t i = 0; i < r->npaths; i++) {
        if (r->inputs)
            tdm__input_free(&r->inputs[i]);
        free(r->paths[i]);
    }
    free(r->paths);
    free(r->inputs);
    tdm__input_free(&r->baseline);
    tdm__run_child_free(&r->child);
}

static int add_conf(run_state *r, char *arg)
{
    /* dump=NAME (or FOLDER/NAME): the snapshots' names, in -o's folder
     * (or FOLDER, which then is -o's); run composes the dump itself. */
    const char *folder = NULL;
    int d = tdm__run_conf_dump(arg, &folder, r->user_dump_dir, sizeof r->user_dump_dir,
                               r->user_dump_name, sizeof r->user_dump_name);
    if (d < 0)
        return -1;
    if (d > 0)
        r->dump_name = r->user_dump_name;
    if (folder) {
        if (r->dir_arg && strcmp(r->dir_arg, DEFAULT_DIR) != 0 && strcmp(r->dir_arg, folder)) {
            fprintf(stderr, "tidemark run: --conf dump=%s/%s and -o %s name two folders; give "
                            "one\n", folder, r->user_dump_name, r->dir_arg);
            return -1;
        }
        r->dir_arg = folder;
    }
    char *joined, **grown = realloc(r->confs, (r->nconfs + 1) * sizeof *grown);
    if (!grown)
        return -1;
    r->confs = grown;
    r->confs[r->nconfs++] = arg;
    if (asprintf(&joined, "%s%s%s", r->conf ? r->conf : "", r->conf ? "," : "", arg) < 0)
        return -1;
    free(r->conf);
    r->conf = joined;
    return 0;
}

static int add_owned_conf(run_state *r, char *item)
{
    free(r->owned_conf);
    r->owned_conf = item;
    return add_conf(r, item);
}

/* Options; returns the index of COMMAND in argv; -1 a usage error (said,
 * without the pointer to the help); 0 when the parse stopped with exit
 * code *said, all said (--help, an unknown option). */
static int parse(run_state *r, int argc, char **argv, int *said)
{
    int c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "run", argc, argv) != 0) {
        *said = p.exit;
        return 0;
    }
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'o':
            if (!optarg[0]) {
                fprintf(stderr, "tidemark run: -o needs a folder\n");
                return -1;
            }
            if (r->user_dump_dir[0] && strcmp(r->user_dump_dir, optarg) != 0) {
                fprintf(stderr, "tidemark run: --conf dump=%s/%s and -o %s name two folders; "
                                "give one\n", r->user_dump_dir, r->user_dump_name, optarg);
                return -1;
            }
            r->dir_arg = optarg;
            break;
        case 'c':
            if (add_conf(r, optarg))
                return -1;
            break;
        case 'q':
            r->quiet = 1;
            break;
        case 'S': {
            /* --simulate GPU is --conf simulate=GPU: checked and recorded
             * with the rest. */
            char *item;
            if (asprintf(&item, "simulate=%s", optarg) < 0 || add_owned_conf(r, item))
                return -1;
            break;
        }
        case 'F': {
            unsigned long v;
            if (tdm__parse_count("run", "--command-failed", optarg, 125, &v) != 0)
                return -1;
            if (v <= TDM_EXIT_NOTHING_MEASURED) {
                fprintf(stderr, "tidemark run: --command-failed needs a code from 6 to 125 "
                                "(0 to 5 are tidemark's own), not %lu\n", v);
                return -1;
            }
            r->command_failed = (int)v;
            break;
        }
        default: /* the gates' (each code left is one of theirs) */
            if (tdm__gate_option("run", c, optarg, &r->o) <= 0)
                return -1;
        }
    }
    if (c < 0) {
        *said = p.exit;
        return 0;
    }
    if (tdm__gate_options_check("run", &r->o))
        return -1;
    if (optind >= argc) {
        fprintf(stderr, "tidemark run: no command given (tidemark run [OPTIONS] -- "
                        "COMMAND ARGS...)\n");
        return -1;
    }
    /* Under a launcher of ranks, the files are named by rank. */
    r->launcher = tdm__run_is_launcher(argv[optind]);
    if (!r->dump_name)
        r->dump_name = r->launcher ? TDM_RUN_RANK_DUMP_NAME : TDM_RUN_DUMP_NAME;
    if (strchr(r->dir_arg, ',')) {
        fprintf(stderr, "tidemark run: -o %s: a comma cannot go into TIDEMARK_CONF; "
                        "choose a folder without one\n", r->dir_arg);
        return -1;
    }
    return optind;
}

/* Checks TIDEMARK_CONF, then prepares the folder and the environment; a
 * TDM_EXIT_* code (USAGE for a refused TIDEMARK_CONF, said already). */
static int prepare(run_state *r)
{
    /* The check loads libtidemark.so into tidemark, which applies the
     * TIDEMARK_CONF of its environment: out of it until the end. */
    const char *env = getenv("TIDEMARK_CONF");
    if (env && !(r->inherited = strdup(env))) {
        fprintf(stderr, "tidemark run: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    unsetenv("TIDEMARK_CONF");
    char lib[PATH_MAX];
    if (find_preload(lib, sizeof lib) != 0)
        return TDM_EXIT_TOOL_ERROR;
    int dump_signal;
    char *conf = tdm__run_conf_make(r->inherited, r->conf, r->dir_arg, r->dump_name, NULL,
                                    &dump_signal);
    if (!conf) {
        fprintf(stderr, "tidemark run: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    int refused = tdm__run_conf_check(lib, r->inherited, r->confs, r->nconfs, conf);
    free(conf);
    if (refused)
        return TDM_EXIT_USAGE;

    if (tdm__run_make_dirs(r->dir_arg) != 0 || !realpath(r->dir_arg, r->dir)) {
        fprintf(stderr, "tidemark run: cannot make the folder %s: %s\n", r->dir_arg,
                strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    if (tdm__run_list_old(r->dir, &r->old, &r->nold) != 0) {
        fprintf(stderr, "tidemark run: cannot read the folder %s: %s\n", r->dir,
                strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    if (r->nold && tdm__run_own_subfolder(r) != 0)
        return TDM_EXIT_TOOL_ERROR;
    if (!lib[0]) {
        const char *over = getenv("TIDEMARK_PRELOAD");
        fprintf(stderr, "tidemark run: note: %s; running without it: only programs linked "
                        "with libtidemark.so are recorded\n",
                over ? "TIDEMARK_PRELOAD is empty"
                     : TDM_RUN_PRELOAD_NAME " not found beside tidemark or in its ../lib*/ "
                                            "folder");
    } else if (strpbrk(lib, ": \t")) {
        fprintf(stderr, "tidemark run: cannot preload %s: LD_PRELOAD cannot hold a path "
                        "with ':' or blanks\n", lib);
        return TDM_EXIT_TOOL_ERROR;
    } else if (set_preload_env(lib) != 0) {
        fprintf(stderr, "tidemark run: %s\n", strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    } else {
        r->preloaded = 1;
    }
    if (set_python_env() != 0) {
        fprintf(stderr, "tidemark run: %s\n", strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    int sim = set_simulate_env(r->conf, r->inherited, r->preloaded);
    if (sim != TDM_EXIT_OK)
        return sim;
    /* The run's own spill folder, unless the settings choose a spill. */
    char theirs[PATH_MAX];
    int chosen = (r->inherited && tdm__run_conf_value(r->inherited, "spill", theirs,
                                                      sizeof theirs)) ||
                 (r->conf && tdm__run_conf_value(r->conf, "spill", theirs, sizeof theirs));
    if (!chosen) /* what runs killed before their sweep left */
        tdm__run_spills_sweep_stale();
    if (chosen || tdm__run_spill_dir_make(r->spill_dir, sizeof r->spill_dir) != 0) {
        r->spill_dir[0] = '\0';
    } else if (tdm__run_spill_dir_note(r->spill_dir, r->dir) != 0) {
        rmdir(r->spill_dir); /* (then the library's default place) */
        r->spill_dir[0] = '\0';
    }
    conf = tdm__run_conf_make(r->inherited, r->conf, r->dir, r->dump_name,
                              r->spill_dir[0] ? r->spill_dir : NULL, &r->child.dump_signal);
    if (!conf || setenv("TIDEMARK_CONF", conf, 1) != 0) {
        fprintf(stderr, "tidemark run: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        free(conf);
        return TDM_EXIT_TOOL_ERROR;
    }
    free(conf);
    r->child.dir = r->dir;
    r->child.spill_dir = r->spill_dir[0] ? r->spill_dir : NULL;
    /* A batch job has no terminal for the library's "history spills to"
     * line: where things go is said here, once, for the job's log. */
    if (!isatty(STDERR_FILENO))
        fprintf(stderr, "tidemark run: snapshots go into %s; until each process ends, its "
                        "history spills to %s\n", r->dir,
                r->spill_dir[0] ? r->spill_dir : "the spill= of the settings");
    return TDM_EXIT_OK;
}

/* Reads what the run wrote, the snapshots of processes that used device
 * memory first (r->busy of them); a TDM_EXIT_* code for trouble reading
 * them (said already). */
static int collect(run_state *r)
{
    if (tdm__run_list_new(r->dir, r->old, r->nold, ".tdm", &r->paths, &r->npaths) != 0 ||
        !(r->inputs = calloc(r->npaths ? r->npaths : 1, sizeof *r->inputs))) {
        fprintf(stderr, "tidemark run: cannot read the folder %s: %s\n", r->dir,
                strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    /* A Python program's tensor history (NAME.torch.pickle beside the
     * snapshot) goes into its snapshot: one file per process.  One that
     * recorded nothing is removed; one that cannot be merged is said in
     * one line and left beside it. */
    for (size_t i = 0; i < r->npaths; i++)
        tdm__cli_merge_torch_beside("run", r->paths[i], r->quiet);
    tdm__run_note_lone_histories(r);
    int rc = TDM_EXIT_OK;
    for (size_t i = 0; i < r->npaths; i++)
        rc = tdm__exit_worse(rc, tdm__input_load("run", r->paths[i], &r->inputs[i]));
    /* A snapshot of a process that never touched device memory (a shell
     * the preload library was loaded into, too) is listed, not summarized. */
    r->busy = 0;
    for (size_t i = 0; i < r->npaths; i++)
        if (!tdm__gate_input_empty(&r->inputs[i])) {
            tdm_input t = r->inputs[r->busy];
            r->inputs[r->busy] = r->inputs[i];
            r->inputs[i] = t;
            r->busy++;
        }
    return rc;
}

int tdm__cli_run(int argc, char **argv)
{
    run_state r;
    memset(&r, 0, sizeof r);
    tdm__gate_options_init(&r.o);
    r.dir_arg = DEFAULT_DIR;
    int said = TDM_EXIT_OK, cmd = parse(&r, argc, argv, &said);
    if (cmd <= 0) {
        run_state_free(&r);
        if (cmd == 0) /* the help, or the usage error with its pointer to it */
            return said;
        fprintf(stderr, "Try 'tidemark help run'.\n");
        return TDM_EXIT_USAGE;
    }
    /* A bad baseline is found before the command runs, not after. */
    if (r.o.baseline) {
        int brc = tdm__input_load("run", r.o.baseline, &r.baseline);
        if (brc != TDM_EXIT_OK) {
            run_state_free(&r);
            return brc;
        }
    }
    int rc = prepare(&r);
    if (rc != TDM_EXIT_OK) {
        run_state_free(&r);
        if (rc == TDM_EXIT_USAGE)
            fprintf(stderr, "Try 'tidemark help run'.\n");
        return rc;
    }

    int cmd_rc = tdm__run_child(argv + cmd, &r.child);
    /* What killed processes left: recovered into the folder, so that it
     * is collected and summarized with the rest. */
    if (r.spill_dir[0])
        tdm__run_spills_sweep(r.spill_dir, r.dir);
    if (cmd_rc < 0) {
        run_state_free(&r);
        return TDM_EXIT_TOOL_ERROR;
    }
    tdm_run_verdict v = {0};
    int read_rc = collect(&r);
    if (!r.inputs)
        v.hard = 1;
    else
        tdm__run_report(&r, cmd_rc, read_rc, &v);
    if (fflush(stdout) != 0 || ferror(stdout))
        v.hard = 1;
    if (cmd_rc != 0 && r.command_failed)
        cmd_rc = r.command_failed;
    int allow_empty = r.o.allow_empty;
    run_state_free(&r);

    /* Precedence: tidemark failed > a gate failed > the command's own code
     * (the likelier cause of what follows) > a snapshot without the
     * --device > trouble reading snapshots > nothing measured (each said
     * on stderr). */
    if (v.hard)
        return TDM_EXIT_TOOL_ERROR;
    if (v.failed)
        return TDM_EXIT_GATE_FAILED;
    if (cmd_rc != 0)
        return cmd_rc;
    if (v.device)
        return TDM_EXIT_BAD_INPUT;
    if (v.soft)
        return TDM_EXIT_TOOL_ERROR;
    if (v.nothing && !allow_empty)
        return TDM_EXIT_NOTHING_MEASURED;
    return TDM_EXIT_OK;
}
