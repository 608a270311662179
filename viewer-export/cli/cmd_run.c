/* viewer-export/cli/cmd_run.c: `tidemark run [OPTIONS] [GATES] -- CMD ARGS...`
 * records a command: it runs CMD with libtidemark_preload.so in LD_PRELOAD
 * and TIDEMARK_CONF set so that every process of it (children inherit the
 * environment) writes its own snapshot into one folder, waits for it,
 * summarizes every snapshot written, and checks the gates (gate.h).
 *
 * Invariants:
 *  - The command's own exit code comes back unchanged unless tidemark
 *    failed (4) or a gate failed (3); killed by signal N, it is 128+N, as
 *    shells report it; a command that cannot be started gives 127 (not
 *    found) or 126 (not executable), as shells do.
 *  - Only snapshots written during this run are collected: files of the
 *    folder that existed before, unchanged, are left out.
 *  - The command's stdout is its own: tidemark reports on stderr (GitHub
 *    annotation lines, meant for the runner, go to stdout).
 *  - tidemark becomes a child subreaper so that processes the command
 *    leaves behind are reaped, and waited for a short while, before the
 *    folder is read.
 * Signals: SIGINT, SIGQUIT, SIGTERM and SIGHUP sent to tidemark alone are
 * passed on to the command, and tidemark goes on to collect what it
 * wrote; those a terminal sends to the whole process group reach the
 * command already and are not sent twice.  While the command runs they
 * and SIGCHLD are blocked and taken synchronously (sigwaitinfo): no
 * signal handler, no locks.
 */
#define _GNU_SOURCE /* strsignal, pipe2, asprintf */
#include "cli.h"
#include "load.h"
#include "format_size.h"
#include "gate.h"
#include "summary.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PRELOAD_NAME "libtidemark_preload.so"
#define DEFAULT_DIR "tidemark-out"
#define DUMP_NAME "tidemark-%h-%p.tdm"
/* How long processes the command left running are waited for, in ms. */
#define ORPHAN_WAIT_MS 5000

/* Signals passed on to the command when sent to tidemark alone. */
static const int forwarded[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

/* ---- the output folder ------------------------------------------------- */

typedef struct old_file {
    char *name;
    ino_t ino;
    struct timespec mtime;
} old_file;

static int is_tdm(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && name[0] != '.' && strcmp(name + n - 4, ".tdm") == 0;
}

/* The snapshot files already in `dir` (so they are not taken for ours). */
static int list_old(const char *dir, old_file **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) {
        if (!is_tdm(e->d_name) || fstatat(dirfd(d), e->d_name, &st, 0) != 0)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            old_file *grown = realloc(*out, cap * sizeof *grown);
            if (!grown)
                goto oom;
            *out = grown;
        }
        old_file *f = &(*out)[*count];
        if (!(f->name = strdup(e->d_name)))
            goto oom;
        f->ino = st.st_ino;
        f->mtime = st.st_mtim;
        (*count)++;
    }
    closedir(d);
    return 0;
oom:
    closedir(d);
    return -1;
}

static int is_old(const old_file *old, size_t n, const char *name, const struct stat *st)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(old[i].name, name) == 0)
            return old[i].ino == st->st_ino && old[i].mtime.tv_sec == st->st_mtim.tv_sec &&
                   old[i].mtime.tv_nsec == st->st_mtim.tv_nsec;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Paths of the snapshots this run wrote, sorted; -1 on allocation failure. */
static int list_new(const char *dir, const old_file *old, size_t nold, char ***out,
                    size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) {
        if (!is_tdm(e->d_name) || fstatat(dirfd(d), e->d_name, &st, 0) != 0 ||
            !S_ISREG(st.st_mode) || is_old(old, nold, e->d_name, &st))
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(*out, cap * sizeof *grown);
            if (!grown)
                goto oom;
            *out = grown;
        }
        if (asprintf(&(*out)[*count], "%s/%s", dir, e->d_name) < 0)
            goto oom;
        (*count)++;
    }
    closedir(d);
    if (*count) /* qsort wants an array, even for no elements */
        qsort(*out, *count, sizeof **out, name_cmp);
    return 0;
oom:
    closedir(d);
    return -1;
}

static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* ---- the preload library ----------------------------------------------- */

/* Finds libtidemark_preload.so: $TIDEMARK_PRELOAD, else beside this
 * binary (the build tree), else in ../libNAME (and ../libNAME/TRIPLET)
 * folders of an installed tree: lib, lib64, lib/x86_64-linux-gnu.  Returns 0 with path[0] set, 0 with path[0] == 0 when
 * there is none, -1 after printing why an override is unusable. */
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
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 0;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    char pattern[PATH_MAX + 64];
    const char *const where[] = {"/", "/../lib*/", "/../lib*/*/"};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(pattern, sizeof pattern, "%s%s" PRELOAD_NAME, self, where[i]);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) == 0) {
            for (size_t k = 0; k < g.gl_pathc; k++)
                if (access(g.gl_pathv[k], R_OK) == 0 && realpath(g.gl_pathv[k], path) &&
                    strlen(path) < len) {
                    globfree(&g);
                    return 0;
                }
            globfree(&g);
        }
        path[0] = '\0';
    }
    return 0;
}

/* ---- the environment --------------------------------------------------- */

/* Checks one --conf value: items KEY=VAL separated by commas; `dump` is
 * run's to set. */
static int check_conf(const char *conf)
{
    const char *p = conf;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *key = p;
        while (*p && *p != '=' && *p != ',')
            p++;
        const char *end = p;
        while (end > key && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - key) == 4 && strncmp(key, "dump", 4) == 0) {
            fprintf(stderr, "tidemark run: --conf may not set 'dump': run writes one "
                            "snapshot per process into -o DIR\n");
            return -1;
        }
        while (*p && *p != ',')
            p++;
    }
    return 0;
}

/* TIDEMARK_CONF for the command: the one inherited, then --conf, then the
 * dump template (the last value of a key wins). */
static char *make_conf(const char *conf, const char *dir)
{
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m)
        return NULL;
    const char *inherited = getenv("TIDEMARK_CONF");
    if (inherited && inherited[strspn(inherited, " \t,")])
        fprintf(m, "%s,", inherited);
    if (conf && conf[0])
        fprintf(m, "%s,", conf);
    fputs("dump=", m);
    for (const char *p = dir; *p; p++) /* a '%' in the folder is no code */
        if (*p == '%')
            fputs("%%", m);
        else
            fputc(*p, m);
    fputs("/" DUMP_NAME, m);
    if (fclose(m) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static int set_preload_env(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    char *v;
    if (old && old[0]) {
        if (asprintf(&v, "%s:%s", lib, old) < 0)
            return -1;
    } else if (!(v = strdup(lib))) {
        return -1;
    }
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* ---- running ----------------------------------------------------------- */

/* A terminal's ^C reaches the whole process group (si_code SI_KERNEL),
 * the command included; a kill aimed at tidemark comes from a process
 * (SI_USER, SI_QUEUE, SI_TKILL: si_code <= 0) and must be passed on. */
static int sent_to_us(const siginfo_t *si)
{
    return si->si_code <= 0;
}

/* Processes the command left behind were re-parented to us: reap those
 * that end within ORPHAN_WAIT_MS, so their snapshots are in the folder.
 * A signal for tidemark cuts the wait short. */
static void reap_orphans(const sigset_t *set)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r > 0 || (r < 0 && errno == EINTR))
            continue;
        if (r < 0) /* ECHILD: none left */
            return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (ms >= ORPHAN_WAIT_MS) {
            fprintf(stderr, "tidemark run: note: processes the command started are still "
                            "running; snapshots they write later are not collected\n");
            return;
        }
        long left = ORPHAN_WAIT_MS - ms;
        struct timespec t = {left / 1000, left % 1000 * 1000000L};
        siginfo_t si;
        int sig = sigtimedwait(set, &si, &t);
        if (sig > 0 && sig != SIGCHLD) {
            fprintf(stderr, "tidemark run: %s: not waiting for the processes the command "
                            "left running\n", strsignal(sig));
            return;
        }
    }
}

/* Runs argv; returns the shell-style exit code, or -1 when tidemark could
 * not start it at all (after printing why).  The forwarded signals and
 * SIGCHLD are blocked and taken with sigwaitinfo, so no handler runs
 * asynchronously and a signal cannot race the child's exit. */
static int run_command(char **argv, double *seconds)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        fprintf(stderr, "tidemark run: pipe: %s\n", strerror(errno));
        return -1;
    }
    /* SIGCHLD ignored (inherited) would reap the command behind our back. */
    struct sigaction dfl, saved_chld;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &saved_chld);
    sigset_t set, saved_mask;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, &saved_mask);
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tidemark run: fork: %s\n", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        sigaction(SIGCHLD, &saved_chld, NULL);
        return -1;
    }
    if (pid == 0) {
        sigaction(SIGCHLD, &saved_chld, NULL);
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        close(pfd[0]);
        execvp(argv[0], argv);
        int err = errno;
        ssize_t w = write(pfd[1], &err, sizeof err);
        (void)w;
        _exit(err == ENOENT ? 127 : 126);
    }
    close(pfd[1]);
    int err = 0;
    ssize_t got;
    do
        got = read(pfd[0], &err, sizeof err);
    while (got < 0 && errno == EINTR);
    close(pfd[0]);
    if (got == (ssize_t)sizeof err)
        fprintf(stderr, "tidemark run: cannot run '%s': %s\n", argv[0], strerror(err));

    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "tidemark run: waitpid: %s\n", strerror(errno));
            status = 1 << 8; /* as if it had exited 1 */
            break;
        }
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si); /* SIGCHLD, or one to pass on */
        if (sig > 0 && sig != SIGCHLD && sent_to_us(&si))
            kill(pid, sig);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    reap_orphans(&set);
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    sigaction(SIGCHLD, &saved_chld, NULL);

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "tidemark run: the command was killed by signal %d (%s)%s\n", sig,
                strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ---- the command ------------------------------------------------------- */

void tdm__cli_run_help(FILE *out)
{
    fputs("usage: tidemark run [OPTIONS] [GATES] -- COMMAND [ARGS...]\n"
          "\n"
          "Runs COMMAND with tidemark recording the device memory of every process it\n"
          "starts (LD_PRELOAD=libtidemark_preload.so and\n"
          "TIDEMARK_CONF=...,dump=DIR/" DUMP_NAME "), then summarizes each snapshot\n"
          "written and checks the gates.  Reports go to stderr; the command's stdout\n"
          "is left to it.\n"
          "\n"
          "options:\n"
          "  -o, --output DIR       folder for the snapshots (default " DEFAULT_DIR "; made\n"
          "                         if missing; files already there are not collected)\n"
          "  --conf KEY=VAL,...     more TIDEMARK_CONF settings (see docs/configuration.md;\n"
          "                         not dump); may be repeated\n"
          "  -q, --quiet            no summaries, only the gate report\n"
          "  --command-failed N     exit N (5 to 125) when the command fails in any way,\n"
          "                         instead of its own code, so that 3 and 4 always mean\n"
          "                         tidemark's verdict\n",
          out);
    tdm__gate_options_help(out);
    fputs("  -h, --help             this text\n"
          "\n"
          "The preload library is $TIDEMARK_PRELOAD when set (empty: none), else the one\n"
          "beside this program or in its ../lib*/ folder.  Without it, only programs\n"
          "linked with libtidemark.so are recorded (a note says so).\n"
          "\n"
          "Exit code: the command's own (128+N when signal N killed it; 127/126 when it\n"
          "cannot be started; --command-failed N for all of those), unless a gate failed\n"
          "(3) or tidemark failed (4: cannot fork or write a report, no snapshot to check\n"
          "the gates on, a snapshot it cannot read).  1 usage error; 2 the --baseline\n"
          "file is bad.\n",
          out);
}

/* A snapshot of a process that never touched device memory (a shell the
 * preload library was loaded into, too): listed, not summarized. */
static int is_empty(const tdm_input *in)
{
    return in->model && in->model->alloc_count == 0 && in->snap->segment_count == 0;
}

typedef struct run_state {
    tdm_gate_options o;
    const char *dir_arg;
    char *conf;              /* the --conf values joined by commas */
    int quiet;
    int command_failed;      /* --command-failed N; 0: the command's own code */
    char dir[PATH_MAX];      /* absolute */
    old_file *old;
    size_t nold;
    char **paths;
    size_t npaths;
    tdm_input *inputs;  /* npaths of them */
    tdm_input baseline;
} run_state;

static void run_state_free(run_state *r)
{
    free(r->conf);
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
}

static int add_conf(run_state *r, const char *arg)
{
    if (check_conf(arg))
        return -1;
    char *joined;
    if (asprintf(&joined, "%s%s%s", r->conf ? r->conf : "", r->conf ? "," : "", arg) < 0)
        return -1;
    free(r->conf);
    r->conf = joined;
    return 0;
}

/* Options; returns the index of COMMAND in argv, 0 for --help, -1 usage. */
static int parse(run_state *r, int argc, char **argv)
{
    static const struct option longopts[] = {
        TDM_GATE_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"conf", required_argument, NULL, 'c'},
        {"quiet", no_argument, NULL, 'q'},
        {"command-failed", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    optind = 0;
    /* '+': the first word that is not an option starts the command. */
    while ((c = getopt_long(argc, argv, "+:ho:q", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            tdm__cli_run_help(stdout);
            return 0;
        case 'o':
            if (!optarg[0]) {
                fprintf(stderr, "tidemark run: -o needs a folder\n");
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
        case 'F': {
            unsigned long v;
            if (tdm__parse_count("run", "--command-failed", optarg, 125, &v) != 0)
                return -1;
            if (v < 5) {
                fprintf(stderr, "tidemark run: --command-failed needs a code from 5 to 125 "
                                "(0 to 4 are tidemark's own), not %lu\n", v);
                return -1;
            }
            r->command_failed = (int)v;
            break;
        }
        default: {
            int took = c == ':' ? 0 : tdm__gate_option("run", c, optarg, &r->o);
            if (took == 0)
                tdm__cli_bad_option("run", c, argv);
            if (took <= 0)
                return -1;
        }
        }
    }
    if (tdm__gate_options_check("run", &r->o))
        return -1;
    if (optind >= argc) {
        fprintf(stderr, "tidemark run: no command given (tidemark run [OPTIONS] -- "
                        "COMMAND ARGS...)\n");
        return -1;
    }
    if (strchr(r->dir_arg, ',')) {
        fprintf(stderr, "tidemark run: -o %s: a comma cannot go into TIDEMARK_CONF; "
                        "choose a folder without one\n", r->dir_arg);
        return -1;
    }
    return optind;
}

/* Prepares the folder and the environment; a TDM_EXIT_* code. */
static int prepare(run_state *r)
{
    if (make_dirs(r->dir_arg) != 0 || !realpath(r->dir_arg, r->dir)) {
        fprintf(stderr, "tidemark run: cannot make the folder %s: %s\n", r->dir_arg,
                strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    if (list_old(r->dir, &r->old, &r->nold) != 0) {
        fprintf(stderr, "tidemark run: cannot read the folder %s: %s\n", r->dir,
                strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    char lib[PATH_MAX];
    if (find_preload(lib, sizeof lib) != 0)
        return TDM_EXIT_TOOL_ERROR;
    if (!lib[0]) {
        const char *env = getenv("TIDEMARK_PRELOAD");
        fprintf(stderr, "tidemark run: note: %s; running without it: only programs linked "
                        "with libtidemark.so are recorded\n",
                env ? "TIDEMARK_PRELOAD is empty"
                    : PRELOAD_NAME " not found beside tidemark or in its ../lib*/ folder");
    } else if (strpbrk(lib, ": \t")) {
        fprintf(stderr, "tidemark run: cannot preload %s: LD_PRELOAD cannot hold a path "
                        "with ':' or blanks\n", lib);
        return TDM_EXIT_TOOL_ERROR;
    } else if (set_preload_env(lib) != 0) {
        fprintf(stderr, "tidemark run: %s\n", strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    char *conf = make_conf(r->conf, r->dir);
    if (!conf || setenv("TIDEMARK_CONF", conf, 1) != 0) {
        fprintf(stderr, "tidemark run: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        free(conf);
        return TDM_EXIT_TOOL_ERROR;
    }
    free(conf);
    return TDM_EXIT_OK;
}

/* Reads and summarizes what the run wrote; returns the index range of the
 * inputs to gate in *first..*count (the non-empty ones, or all when every
 * one is empty) and a TDM_EXIT_* code for trouble reading them. */
static int collect(run_state *r, size_t *gate_first, size_t *gate_count)
{
    *gate_first = *gate_count = 0;
    if (list_new(r->dir, r->old, r->nold, &r->paths, &r->npaths) != 0 ||
        !(r->inputs = calloc(r->npaths ? r->npaths : 1, sizeof *r->inputs))) {
        fprintf(stderr, "tidemark run: cannot read the folder %s: %s\n", r->dir,
                strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    int rc = TDM_EXIT_OK;
    for (size_t i = 0; i < r->npaths; i++)
        rc = tdm__exit_worse(rc, tdm__input_load("run", r->paths[i], &r->inputs[i]));
    /* Empty snapshots last, so the ones worth gating are one range. */
    size_t busy = 0;
    for (size_t i = 0; i < r->npaths; i++)
        if (!is_empty(&r->inputs[i])) {
            tdm_input t = r->inputs[busy];
            r->inputs[busy] = r->inputs[i];
            r->inputs[i] = t;
            busy++;
        }
    size_t empty = r->npaths - busy;

    tdm_summary_options so = {.top = 5, .frames = 3, .device = r->o.device};
    for (size_t i = 0; i < busy && !r->quiet; i++) {
        tdm_input *in = &r->inputs[i];
        if (!in->model)
            continue;
        so.truncated = in->truncated;
        so.truncated_at = in->truncated_at;
        fputc('\n', stderr);
        if (tdm__summary_print(stderr, in->path, in->snap, in->model, &so) != TDM_OK)
            rc = TDM_EXIT_TOOL_ERROR;
    }
    fprintf(stderr, "\ntidemark run: %zu snapshot%s in %s", r->npaths,
            r->npaths == 1 ? "" : "s", r->dir);
    if (empty)
        fprintf(stderr, " (%zu of processes that used no device memory)", empty);
    fputc('\n', stderr);
    *gate_count = busy ? busy : r->npaths;
    return rc;
}

int tdm__cli_run(int argc, char **argv)
{
    run_state r;
    memset(&r, 0, sizeof r);
    tdm__gate_options_init(&r.o);
    r.dir_arg = DEFAULT_DIR;
    int cmd = parse(&r, argc, argv);
    if (cmd <= 0) {
        run_state_free(&r);
        if (cmd == 0)
            return TDM_EXIT_OK;
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
        return rc;
    }

    double seconds = 0;
    int cmd_rc = run_command(argv + cmd, &seconds);
    if (cmd_rc < 0) {
        run_state_free(&r);
        return TDM_EXIT_TOOL_ERROR;
    }
    if (cmd_rc != 0)
        fprintf(stderr, "tidemark run: the command exited with %d\n", cmd_rc);

    size_t first, count;
    int soft = collect(&r, &first, &count); /* trouble with the snapshots */
    int hard = soft == TDM_EXIT_TOOL_ERROR && !r.inputs ? TDM_EXIT_TOOL_ERROR : TDM_EXIT_OK;
    if (soft != TDM_EXIT_OK)
        soft = TDM_EXIT_TOOL_ERROR;
    int gate_failed = 0;
    if (r.o.enabled && r.inputs) {
        if (count == 0) {
            fprintf(stderr, "tidemark run: no snapshot was written, so no gate could be "
                            "checked (is the preload library there, or the program linked "
                            "with libtidemark.so?)\n");
            soft = TDM_EXIT_TOOL_ERROR;
        }
        tdm_gate_report rep;
        tdm_status st = tdm__gate_evaluate(&r.o, r.inputs + first, count,
                                           r.o.baseline ? &r.baseline : NULL, &rep);
        int evaluated = st == TDM_OK;
        if (st == TDM_OK && count) {
            fputc('\n', stderr);
            st = tdm__gate_print(stderr, &r.o, r.inputs + first, &rep);
        }
        if (st == TDM_OK && r.o.github)
            tdm__gate_print_github(stdout, r.inputs + first, &rep);
        if (st == TDM_OK && r.o.junit) {
            st = tdm__junit_write("run", r.o.junit, "tidemark run", seconds, &r.o,
                                  r.inputs + first, count, &rep);
            if (st == TDM_IO_ERROR)
                hard = TDM_EXIT_TOOL_ERROR, st = TDM_OK;
        }
        if (evaluated) {
            gate_failed = rep.failed > 0;
            if (rep.errors)
                soft = TDM_EXIT_TOOL_ERROR;
            tdm__gate_report_free(&rep);
        }
        if (st != TDM_OK) {
            fprintf(stderr, "tidemark run: %s\n", tdm_strerror(st));
            hard = TDM_EXIT_TOOL_ERROR;
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout))
        hard = TDM_EXIT_TOOL_ERROR;
    if (cmd_rc != 0 && r.command_failed)
        cmd_rc = r.command_failed;
    run_state_free(&r);

    /* Precedence: tidemark failed > a gate failed > the command's own code
     * > trouble reading snapshots (reported on stderr either way). */
    if (hard)
        return TDM_EXIT_TOOL_ERROR;
    if (gate_failed)
        return TDM_EXIT_GATE_FAILED;
    if (cmd_rc != 0)
        return cmd_rc;
    return soft;
}
