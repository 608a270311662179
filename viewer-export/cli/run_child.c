/* viewer-export/cli/run_child.c: `tidemark run` running its command (run.h).
 *
 * The command runs in a process group of its own, so that a terminal's ^C
 * (and a signal sent to tidemark's whole group) reaches tidemark only:
 * tidemark first asks every process of the command that records for the
 * history so far (the dump signal of TIDEMARK_CONF's dump_on=signal,
 * which the library answers from a thread of its own while the program
 * goes on), waits until each has written it (the file appears under its
 * final name: it is written to a temporary name and renamed) or has
 * ended, and only then passes the signal on to the command's group.  A
 * program killed by the signal writes no exit snapshot; the one asked
 * for stands for it.  A program that handles the signal and exits
 * normally writes its exit snapshot too: that one is kept, the one asked
 * for is removed (it holds less).
 *
 * Invariants:
 *  - The command's exit status comes back as it is: 128+N when signal N
 *    killed it.
 *  - Signals are blocked and taken with sigwaitinfo/sigtimedwait: no
 *    handler runs asynchronously, and a signal cannot race the child's
 *    exit.
 *  - The command gets the signal mask and SIGCHLD disposition tidemark
 *    was started with, and dies with tidemark (PR_SET_PDEATHSIG), as it
 *    would have died with tidemark's process group.
 *  - On a terminal (tidemark started in the foreground), tidemark stays
 *    the foreground group, so that ^C and ^Z come to it: ^Z is passed on
 *    and tidemark stops when the command has; `fg` resumes both.  When a
 *    process of the command needs the terminal (it stopped on reading
 *    it), the terminal is handed to the command's group for the rest of
 *    the run, and given back at the end.
 * No state, no locks.
 */
#define _GNU_SOURCE /* strsignal, pipe2, asprintf, sigabbrev_np */
#include "run.h"
#include "input.h"
#include "format_spill.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* How long processes the command left running are waited for, in ms. */
#define ORPHAN_WAIT_MS 5000
/* How often the interruption's snapshots, and processes stopped on the
 * terminal, are looked for, in ms. */
#define POLL_MS 20
#define TTY_POLL_MS 250

/* Signals passed on to the command (the first of the ending ones asks
 * for snapshots first). */
static const int ending[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};
#define NENDING (sizeof ending / sizeof ending[0])

static const char *sig_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- processes ------------------------------------------------------------ */

typedef struct proc_info {
    pid_t pid, ppid, pgrp;
    char state;
} proc_info;

static int read_stat(pid_t pid, proc_info *p)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold anything */
    int ppid, pgrp;
    char state;
    if (!rp || sscanf(rp + 1, " %c %d %d", &state, &ppid, &pgrp) != 3)
        return -1;
    p->pid = pid;
    p->state = state;
    p->ppid = ppid;
    p->pgrp = pgrp;
    return 0;
}

/* Every process on the system; NULL when /proc cannot be read. */
static proc_info *list_procs(size_t *count)
{
    *count = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return NULL;
    size_t cap = 0;
    proc_info *all = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        proc_info p;
        if (*end || pid <= 0 || read_stat((pid_t)pid, &p) != 0)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 256;
            proc_info *grown = realloc(all, cap * sizeof *grown);
            if (!grown)
                break;
            all = grown;
        }
        all[(*count)++] = p;
    }
    closedir(d);
    return all;
}

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const proc_info *)a)->pid, y = ((const proc_info *)b)->pid;
    return (x > y) - (x < y);
}

/* Whether process `p` of `all` (sorted by pid) descends from `self`. */
static int descends(const proc_info *all, size_t n, const proc_info *p, pid_t self)
{
    for (int depth = 0; depth < 256; depth++) {
        if (p->ppid == self)
            return 1;
        proc_info key = {.pid = p->ppid};
        p = p->ppid > 1 ? bsearch(&key, all, n, sizeof *all, by_pid) : NULL;
        if (!p)
            return 0;
    }
    return 0;
}

/* Whether `pid` has a handler for `sig` (/proc/PID/status SigCgt). */
static int catches(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int yes = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "SigCgt:", 7) == 0) {
            uint64_t mask = strtoull(line + 7, NULL, 16);
            yes = sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1);
            break;
        }
    fclose(f);
    return yes;
}

/* Whether `pid` has ended (gone, or a zombie not yet reaped). */
static int ended(pid_t pid)
{
    proc_info p;
    return read_stat(pid, &p) != 0 || p.state == 'Z' || p.state == 'X';
}

/* ---- the snapshots asked for on interruption ---------------------------- */

typedef struct interruption {
    int sig;                 /* the signal held back; 0 when none is */
    int done;                /* asked once already */
    pid_t from;              /* who sent it (si_pid) */
    int code;                /* and how (si_code) */
    struct timespec start;
    pid_t *pids;             /* processes asked, and not yet answered */
    size_t npids;
    char **before;           /* .tdm names in the folder when they were asked */
    size_t nbefore;
} interruption;

static int has_tdm_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && name[0] != '.' && strcmp(name + n - 4, ".tdm") == 0;
}

/* The .tdm names in dir; NULL (count 0) when it cannot be read. */
static char **list_names(const char *dir, size_t *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **names = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!has_tdm_suffix(e->d_name))
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(names, cap * sizeof *grown);
            if (!grown)
                break;
            names = grown;
        }
        if (!(names[*count] = strdup(e->d_name)))
            break;
        (*count)++;
    }
    closedir(d);
    return names;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The pid of a signal snapshot's name, "...-PID-N.tdm"; 0 if not one. */
static pid_t signal_dump_pid(const char *name)
{
    size_t n = strlen(name) - 4; /* before ".tdm" */
    size_t i = n;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == n || i < 2 || name[i - 1] != '-')
        return 0;
    size_t j = --i;
    while (j > 0 && name[j - 1] >= '0' && name[j - 1] <= '9')
        j--;
    if (j == i || j < 1 || name[j - 1] != '-')
        return 0;
    return (pid_t)strtol(name + j, NULL, 10);
}

/* Asks every process below tidemark that catches c->dump_signal for a
 * snapshot.  Returns how many were asked. */
static size_t ask(tdm_run_child *c, interruption *it, int sig)
{
    size_t n;
    proc_info *all = list_procs(&n);
    if (!all)
        return 0;
    it->pids = malloc((n ? n : 1) * sizeof *it->pids);
    if (!it->pids) {
        free(all);
        return 0;
    }
    qsort(all, n, sizeof *all, by_pid);
    /* Below tidemark: its descendants, whatever group or session they
     * made (a launcher's workers), and the orphans it reaps. */
    pid_t self = getpid();
    it->before = list_names(c->dir, &it->nbefore);
    it->npids = 0;
    for (size_t i = 0; i < n; i++)
        if (all[i].state != 'Z' && descends(all, n, &all[i], self) &&
            catches(all[i].pid, c->dump_signal) && kill(all[i].pid, c->dump_signal) == 0)
            it->pids[it->npids++] = all[i].pid;
    free(all);
    it->sig = sig;
    it->done = 1;
    clock_gettime(CLOCK_MONOTONIC, &it->start);
    return it->npids;
}

static int was_there(const interruption *it, const char *name)
{
    for (size_t i = 0; i < it->nbefore; i++)
        if (strcmp(it->before[i], name) == 0)
            return 1;
    return 0;
}

/* Collects the snapshots written since the processes were asked, and
 * strikes off the processes that wrote one or ended.  Returns whether
 * every one is done. */
static int collect_answers(tdm_run_child *c, interruption *it)
{
    size_t n;
    char **names = list_names(c->dir, &n);
    for (size_t i = 0; i < n; i++) {
        pid_t pid = signal_dump_pid(names[i]);
        if (!pid || was_there(it, names[i]))
            continue;
        for (size_t k = 0; k < it->npids; k++) {
            if (it->pids[k] != pid)
                continue;
            char *path, **grown = realloc(c->interrupted,
                                          (c->interrupted_count + 1) * sizeof *grown);
            if (grown) {
                c->interrupted = grown;
                if (asprintf(&path, "%s/%s", c->dir, names[i]) >= 0)
                    c->interrupted[c->interrupted_count++] = path;
            }
            it->pids[k] = it->pids[--it->npids];
            break;
        }
    }
    free_names(names, n);
    for (size_t k = 0; k < it->npids;)
        if (ended(it->pids[k]))
            it->pids[k] = it->pids[--it->npids];
        else
            k++;
    return it->npids == 0;
}

/* The snapshots are in (or the wait is over): says where, and lets the
 * held signal go. */
static void answered(tdm_run_child *c, interruption *it, pid_t pgid, pid_t pid)
{
    char name[32];
    sig_name(it->sig, name, sizeof name);
    size_t shown = c->interrupted_count < 3 ? c->interrupted_count : 3;
    for (size_t i = 0; i < shown; i++)
        fprintf(stderr, "tidemark run: %s: the history up to it is in %s\n", name,
                c->interrupted[i]);
    if (c->interrupted_count > shown)
        fprintf(stderr, "tidemark run: %s: and %zu more snapshots of it in %s\n", name,
                c->interrupted_count - shown, c->dir);
    if (it->npids)
        fprintf(stderr, "tidemark run: %s: %zu process%s wrote no snapshot of the history "
                        "in %.1f s; passing the signal on without\n", name, it->npids,
                it->npids == 1 ? "" : "es", (double)ms_since(&it->start) / 1000.0);
    if (kill(-pgid, it->sig) != 0)
        kill(pid, it->sig);
    it->sig = 0;
    it->npids = 0;
}

/* A process that handled the signal and went on to exit wrote its exit
 * snapshot ("...-PID.tdm", later than "...-PID-N.tdm"): that one is kept. */
static void drop_superseded(tdm_run_child *c)
{
    size_t kept = 0;
    for (size_t i = 0; i < c->interrupted_count; i++) {
        char *p = c->interrupted[i], exit_path[4096];
        char *dash = strrchr(p, '-');
        struct stat a, b;
        int superseded = 0;
        if (dash && (size_t)(dash - p) + 5 < sizeof exit_path) {
            memcpy(exit_path, p, (size_t)(dash - p));
            strcpy(exit_path + (dash - p), ".tdm");
            superseded = stat(p, &a) == 0 && stat(exit_path, &b) == 0 &&
                         (b.st_mtim.tv_sec > a.st_mtim.tv_sec ||
                          (b.st_mtim.tv_sec == a.st_mtim.tv_sec &&
                           b.st_mtim.tv_nsec >= a.st_mtim.tv_nsec));
        }
        if (superseded && unlink(p) == 0) {
            fprintf(stderr, "tidemark run: %s left out: its process wrote its exit snapshot "
                            "%s after it\n", p, exit_path);
            free(p);
        } else {
            c->interrupted[kept++] = p;
        }
    }
    c->interrupted_count = kept;
}

/* ---- the terminal ----------------------------------------------------------- */

typedef struct terminal {
    int fd;            /* the controlling terminal; -1 when none */
    int lent;          /* the command's group has it */
} terminal;

/* Whether tidemark's group is the terminal's foreground. */
static int in_front(const terminal *t)
{
    return t->fd >= 0 && tcgetpgrp(t->fd) == getpgrp();
}

/* A process of the command stopped on the terminal: it gets it. */
static void lend(terminal *t, pid_t pgid)
{
    if (t->lent || !in_front(t) || tcsetpgrp(t->fd, pgid) != 0)
        return;
    t->lent = 1;
    fprintf(stderr, "tidemark run: note: the command reads the terminal: it has it now, and "
                    "^C goes to it directly (no snapshot of the history on ^C)\n");
    kill(-pgid, SIGCONT);
}

static void take_back(terminal *t)
{
    if (t->lent && tcsetpgrp(t->fd, getpgrp()) == 0)
        t->lent = 0;
}

/* Whether a process of group pgid is stopped (on the terminal, in a
 * session where tidemark holds it: nothing else stops them there). */
static int group_stopped(pid_t pgid)
{
    size_t n;
    proc_info *all = list_procs(&n);
    int stopped = 0;
    for (size_t i = 0; i < n && !stopped; i++)
        stopped = all[i].pgrp == pgid && all[i].state == 'T';
    free(all);
    return stopped;
}

/* ---- running ------------------------------------------------------------------ */

/* Processes the command left behind were re-parented to us: reap those
 * that end within ORPHAN_WAIT_MS, so their snapshots are in the folder.
 * A signal for tidemark cuts the wait short. */
static void reap_orphans(const sigset_t *set)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r > 0 || (r < 0 && errno == EINTR))
            continue;
        if (r < 0) /* ECHILD: none left */
            return;
        long ms = ms_since(&start);
        if (ms >= ORPHAN_WAIT_MS) {
            fprintf(stderr, "tidemark run: note: processes the command started are still "
                            "running; snapshots they write later are not collected\n");
            return;
        }
        long left = ORPHAN_WAIT_MS - ms;
        struct timespec t = {left / 1000, left % 1000 * 1000000L};
        siginfo_t si;
        int sig = sigtimedwait(set, &si, &t);
        if (sig > 0 && sig != SIGCHLD && sig != SIGCONT && sig != SIGWINCH &&
            sig != SIGTSTP) {
            fprintf(stderr, "tidemark run: %s: not waiting for the processes the command "
                            "left running\n", strsignal(sig));
            return;
        }
    }
}

/* Starts argv in a group of its own; the pid, or -1 after saying why. */
static pid_t start(char **argv, const sigset_t *saved_mask,
                   const struct sigaction *saved_chld)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        fprintf(stderr, "tidemark run: pipe: %s\n", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "tidemark run: fork: %s\n", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* Dies with tidemark, as with tidemark's group before. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
            _exit(128 + SIGKILL);
        sigaction(SIGCHLD, saved_chld, NULL);
        sigprocmask(SIG_SETMASK, saved_mask, NULL);
        close(pfd[0]);
        execvp(argv[0], argv);
        int err = errno;
        ssize_t w = write(pfd[1], &err, sizeof err);
        (void)w;
        _exit(err == ENOENT ? 127 : 126);
    }
    setpgid(pid, pid); /* also here: no signal can find it in ours */
    close(pfd[1]);
    int err = 0;
    ssize_t got;
    do
        got = read(pfd[0], &err, sizeof err);
    while (got < 0 && errno == EINTR);
    close(pfd[0]);
    if (got == (ssize_t)sizeof err)
        fprintf(stderr, "tidemark run: cannot run '%s': %s\n", argv[0], strerror(err));
    return pid;
}

/* A second signal within REPEAT_MS of the one held back, of the same
 * number from the same sender, is that request again, not a user asking
 * to stop waiting: timeout(1) sends its signal to the process it started
 * and then to its own process group, which tidemark is in, and launchers
 * (Slurm, CI runners) may do likewise.  A user's second ^C comes later. */
#define REPEAT_MS 500

static int repeat_of(const interruption *it, int sig, const siginfo_t *si)
{
    return sig == it->sig && si->si_pid == it->from && si->si_code == it->code &&
           ms_since(&it->start) < REPEAT_MS;
}

static int is_ending(int sig)
{
    for (size_t i = 0; i < NENDING; i++)
        if (ending[i] == sig)
            return 1;
    return 0;
}

static void pass_on(pid_t pgid, pid_t pid, int sig)
{
    if (kill(-pgid, sig) != 0) /* it left its group: itself at least */
        kill(pid, sig);
}

/* The command was killed: where its spill file is (the default place,
 * docs/spill.md, for the dump name run gives), if it is there. */
/* The folder the library puts a spill file in when `spill` names none. */
static char *spill_folder(void)
{
    char dir[4096];
    return tdm__spill_default_folder(dir, sizeof dir) == 0 ? strdup(dir) : NULL;
}

/* A process asked for its history wrote it, then the passed-on signal
 * ended it: the spill file it leaves at the default place holds that
 * history again (and the instants after), so it goes, once the process
 * is gone; else an interrupted run would leave one in /dev/shm (memory)
 * per process.  A snapshot asked for is named NAME-PID-N.tdm, the
 * process's dump NAME-PID.tdm, its spill NAME-PID.spill. */
static void drop_spills(const tdm_run_child *c)
{
    char *dir = c->spill_dir ? strdup(c->spill_dir) : spill_folder();
    for (size_t i = 0; dir && i < c->interrupted_count; i++) {
        const char *slash = strrchr(c->interrupted[i], '/');
        const char *name = slash ? slash + 1 : c->interrupted[i];
        const char *dash = strrchr(name, '-');
        pid_t pid = signal_dump_pid(name);
        char *path = NULL;
        struct stat st;
        if (!dash || !pid || !ended(pid) ||
            asprintf(&path, "%s/%.*s.spill", dir, (int)(dash - name), name) < 0)
            continue;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid())
            unlink(path);
        free(path);
    }
    free(dir);
}

static void say_spill(pid_t pid)
{
    char host[256] = "", *path = NULL, *dir = spill_folder();
    if (!dir || gethostname(host, sizeof host - 1) != 0) {
        free(dir);
        return;
    }
    int n = asprintf(&path, "%s/tidemark-%s-%ld.spill", dir, host, (long)pid);
    free(dir);
    if (n < 0)
        return;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        fprintf(stderr, "tidemark run: its history is in %s; to read it: tidemark recover %s "
                        "-o OUT.tdm\n", path, path);
    free(path);
}

int tdm__run_child(char **argv, tdm_run_child *c)
{
    c->seconds = 0;
    c->interrupted = NULL;
    c->interrupted_count = 0;
    /* SIGCHLD ignored (inherited) would reap the command behind our back. */
    struct sigaction dfl, saved_chld;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &saved_chld);
    /* Taken synchronously: the ending signals, the job-control ones, a
     * resize (passed on), SIGCHLD; SIGTTOU blocked so that tidemark may
     * hand the terminal over and back from the background. */
    sigset_t set, block, saved_mask;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < NENDING; i++)
        sigaddset(&set, ending[i]);
    sigaddset(&set, SIGTSTP);
    sigaddset(&set, SIGCONT);
    sigaddset(&set, SIGWINCH);
    block = set;
    sigaddset(&block, SIGTTOU);
    sigprocmask(SIG_BLOCK, &block, &saved_mask);
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    terminal tty = {.fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC), .lent = 0};

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = start(argv, &saved_mask, &saved_chld);
    if (pid < 0) {
        if (tty.fd >= 0)
            close(tty.fd);
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        sigaction(SIGCHLD, &saved_chld, NULL);
        return -1;
    }
    pid_t pgid = pid;
    interruption it;
    memset(&it, 0, sizeof it);
    struct timespec tty_poll = t0, tstp_at = {0, 0};
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG | (tty.fd >= 0 ? WUNTRACED : 0));
        if (r == pid && WIFSTOPPED(status)) {
            int s = WSTOPSIG(status);
            if ((s == SIGTTIN || s == SIGTTOU) && in_front(&tty)) {
                lend(&tty, pgid);
            } else {
                /* ^Z (passed on, or to the group holding the terminal):
                 * stop with it; `fg` continues tidemark, which continues
                 * the command (before the terminal poll takes it for a
                 * reader stopped on the terminal). */
                take_back(&tty);
                kill(getpid(), SIGSTOP);
                pass_on(pgid, pid, SIGCONT);
                clock_gettime(CLOCK_MONOTONIC, &tstp_at);
            }
            continue;
        }
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "tidemark run: waitpid: %s\n", strerror(errno));
            status = 1 << 8; /* as if it had exited 1 */
            break;
        }
        if (it.sig && (collect_answers(c, &it) || ms_since(&it.start) >= TDM_RUN_DUMP_WAIT_MS))
            answered(c, &it, pgid, pid);
        /* A process deeper in the command stopped on reading the
         * terminal: only tidemark can see it. */
        if (tty.fd >= 0 && !tty.lent && ms_since(&tty_poll) >= TTY_POLL_MS) {
            clock_gettime(CLOCK_MONOTONIC, &tty_poll);
            /* (not the stop of a ^Z just passed on) */
            if (ms_since(&tstp_at) > 1000 && in_front(&tty) && group_stopped(pgid))
                lend(&tty, pgid);
        }
        siginfo_t si;
        int sig;
        if (it.sig || (tty.fd >= 0 && !tty.lent)) {
            long wait_ms = it.sig ? POLL_MS : TTY_POLL_MS;
            struct timespec t = {0, wait_ms * 1000000L};
            sig = sigtimedwait(&set, &si, &t);
        } else {
            sig = sigwaitinfo(&set, &si);
        }
        if (sig <= 0 || sig == SIGCHLD)
            continue;
        if (!is_ending(sig)) { /* SIGTSTP, SIGCONT, SIGWINCH */
            if (sig == SIGTSTP)
                clock_gettime(CLOCK_MONOTONIC, &tstp_at);
            pass_on(pgid, pid, sig);
            continue;
        }
        if (it.sig && repeat_of(&it, sig, &si)) {
            continue; /* the same request, sent twice: still one */
        } else if (it.sig) { /* again: stop waiting */
            answered(c, &it, pgid, pid);
            pass_on(pgid, pid, sig);
        } else if (!it.done && c->dump_signal && ask(c, &it, sig)) {
            it.from = si.si_pid;
            it.code = si.si_code;
            continue; /* held back until the snapshots are in */
        } else {
            it.sig = 0;
            pass_on(pgid, pid, sig);
        }
    }
    /* It ended while the snapshots were being written: say which are in. */
    if (it.sig) {
        collect_answers(c, &it);
        it.npids = 0;
        answered(c, &it, pgid, pid);
    }
    free(it.pids);
    free_names(it.before, it.nbefore);
    c->seconds = (double)ms_since(&t0) / 1000.0;
    reap_orphans(&set);
    take_back(&tty);
    if (tty.fd >= 0)
        close(tty.fd);
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    sigaction(SIGCHLD, &saved_chld, NULL);
    drop_superseded(c);
    drop_spills(c);

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "tidemark run: the command was killed by signal %d (%s)%s\n", sig,
                strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
        if (!c->spill_dir) /* else run recovers it (run_spills.c) */
            say_spill(pid);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

void tdm__run_child_free(tdm_run_child *c)
{
    for (size_t i = 0; i < c->interrupted_count; i++)
        free(c->interrupted[i]);
    free(c->interrupted);
    c->interrupted = NULL;
    c->interrupted_count = 0;
}
