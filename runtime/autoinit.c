/* runtime/autoinit.c: TIDEMARK_CONF applied when the library is loaded, and
 * the snapshots written at exit, on a signal and on out-of-memory.
 *
 * Owns: the load-time constructor; the process-wide state of auto-enabling
 * (`g` below): the configuration in force, the dump template made absolute,
 * the signal pipe and the watcher thread that writes signal-triggered dumps.
 *
 * Invariants:
 *  - A bad TIDEMARK_CONF prints exactly one line and changes nothing: no
 *    device configuration, no recording, no handler, no thread, no atexit.
 *  - The signal handler only writes one byte into a non-blocking pipe
 *    (async-signal-safe); the watcher thread reads it and writes the dump,
 *    so the program never runs tidemark's dump code inside a handler.
 *  - SIGINT and SIGTERM still at SIG_DFL at the process's first recorded
 *    event (and dump_on has exit) write the exit snapshot, then kill the
 *    process by the same signal (see dump_for_term_signal); handlers of
 *    the program's own, before or after, are never replaced or run over,
 *    and until that event the program sees its signals as it would
 *    without tidemark (take_term_at_first_event).
 *  - Spill (spill=): the ring and stacks live in a file that outlives the
 *    process; a successful exit snapshot, or a normal exit that wants
 *    none, removes it.
 *  - The exit dump happens once per process that records: the one that
 *    applied the configuration and, with fork=follow, each forked child
 *    (its ring cleared at the fork, its own watcher thread, its own file:
 *    the template's %p is its pid, or "-PID" is added when the template
 *    has no %p).  With fork=stop a child stops recording and writes
 *    nothing; its handler swallows the signal (see after_fork_child).
 *  - A process that never touched device memory writes no exit dump
 *    (tdm__snap_untouched); signal, out-of-memory and tdm_dump_snapshot
 *    dumps are written whatever they hold.
 *  - A template without %p: the first process of the job (its process
 *    group) to move its snapshot into place keeps the name (link(2), no
 *    empty claim file first); any other adds "-PID", so no process of a
 *    job writes over another's snapshot.
 *  - Out-of-memory dumps run in the allocating thread (alloc/ calls on_oom
 *    with no allocator lock held); at most OOM_DUMPS_MAX per process.
 *  - Messages go to stderr with one write() each, so lines from several
 *    processes or threads never interleave mid-line.
 *
 * Lock: g.lock serializes dumps (watcher, exit, out-of-memory) and guards
 * the sequence numbers.  The rest of `g` is written once, in
 * tdm__autoinit_apply, before the watcher thread starts, the handler is
 * installed or the allocator can call on_oom, and only read afterwards;
 * after_fork_child rewrites it in a child, where it is the only thread.
 */
#define _GNU_SOURCE /* pipe2, sigabbrev_np, secure_getenv, dladdr */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "format_file.h"
#include "preload.h"
#include "procinfo.h"
#include "recorder.h"
#include "spill.h"

static struct {
    pthread_mutex_t lock;
    atomic_int applied;    /* a non-blank TIDEMARK_CONF was seen */
    atomic_int exit_done;  /* the exit path ran */
    tdm__config cfg;
    char tmpl[TDM__CONF_PATH_MAX]; /* cfg.dump, made absolute at start */
    uint64_t start_time_us;        /* %t */
    uint64_t job_start_us;         /* the process group's start (dump_now) */
    pid_t owner_pid;               /* the process that applied the config */
    _Atomic int pipe_wr;           /* signal handler -> watcher; -1 if none */
    int pipe_rd;
    int reply_rd, reply_wr;        /* watcher -> a SIGINT/SIGTERM handler */
    atomic_int term_pending;       /* a SIGINT/SIGTERM snapshot was asked */
    pthread_t watcher;
    int watcher_started;
    unsigned signal_seq; /* signal dumps named so far (under lock) */
    unsigned oom_seq;    /* out-of-memory dumps named so far (under lock) */
    atomic_int active;   /* recording started: dumps may be written */
    atomic_int decided;  /* apply finished (whatever it found) */
    atomic_int hook_mode;/* tdm__hook_mode, valid once decided */
    int forked;          /* a fork=follow child: its files carry its pid */
    atomic_int first_event; /* the ring's first event was recorded */
    atomic_int term_ready;  /* the watcher runs: SIGINT/SIGTERM may be taken */
    atomic_int term_taken;  /* take_term_signals ran (once) */
} g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .pipe_wr = -1,
    .pipe_rd = -1,
    .reply_rd = -1,
    .reply_wr = -1,
};

/* Longest message line, with its NUL: the parser's, or one that quotes
 * a dump path (tdm_conf_check's callers size their buffers by it). */
#define MESSAGE_MAX TDM_CONF_MESSAGE_MAX
_Static_assert(MESSAGE_MAX >= TDM__CONF_ERR_MAX + TDM__CONF_PATH_MAX,
               "TDM_CONF_MESSAGE_MAX holds the parser's line and a dump path");

/* One line on stderr, written at once.  The line is escaped as a whole
 * (tdm__escape_text): it quotes dump paths and configuration values, and
 * no text of the program's or its user's may drive the terminal. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[MESSAGE_MAX];
    char shown[2 * MESSAGE_MAX + 1]; /* escapes grow it; a rare long one is cut */
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    size_t used;
    size_t have = strnlen(line, sizeof line);
    ssize_t n = (ssize_t)tdm__escape_text(line, have, shown, sizeof shown - 1, 0, 1, &used);
    shown[n++] = '\n';
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, shown + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += w;
    }
}

static const char *signal_name(int sig)
{
    const char *abbrev = sigabbrev_np(sig);
    return abbrev ? abbrev : "?";
}

/* A program that probes for the largest batch that fits may run out of
 * memory many times; the first snapshots are the ones that explain it. */
#define OOM_DUMPS_MAX 16

/* Why a dump is written; each kind but exit numbers its files. */
enum dump_kind { DUMP_EXIT, DUMP_SIGNAL, DUMP_OOM };

/* Puts `suffix` before the extension of path (TDM__CONF_PATH_MAX bytes), in
 * place; TDM_INVALID_ARGUMENT, path unchanged, when it would not fit. */
static tdm_status add_suffix(char *path, const char *suffix)
{
    char out[TDM__CONF_PATH_MAX];
    tdm_status st = tdm__dump_path_with_suffix(path, suffix, out, sizeof out);
    if (st == TDM_OK)
        memcpy(path, out, sizeof out);
    return st;
}

/* "-PID" before the extension: this process's own name beside another's. */
static tdm_status add_pid(char *path)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-%lld", (long long)getpid());
    return add_suffix(path, suffix);
}

/* Writes one snapshot: the exit dump under the template's own name, the
 * N-th signal dump with "-N" before the extension and the N-th
 * out-of-memory dump with "-oom-N" (so each is a new file, whatever codes
 * the template uses).  A template without %p names one process's file:
 * the first of the job to claim it keeps it, any other adds "-PID". */
static void dump_now(enum dump_kind kind)
{
    char path[TDM__CONF_PATH_MAX];
    tdm_snap *snap = NULL;
    /* Not on out-of-memory: that dump runs inside the failing allocation,
     * where the hooks must not call the vendor again. */
    if (kind != DUMP_OOM)
        tdm__rec_run_refresh();
    pthread_mutex_lock(&g.lock);
    if (kind == DUMP_OOM && g.oom_seq >= OOM_DUMPS_MAX) {
        if (g.oom_seq++ == OOM_DUMPS_MAX)
            say("tidemark: %d snapshots on out-of-memory written; no more in "
                "this process", OOM_DUMPS_MAX);
        pthread_mutex_unlock(&g.lock);
        return;
    }
    /* The recorder's own build + write (what tdm_dump_snapshot does), so
     * that the line can say how many events went into the file. */
    tdm_status st = tdm__rec_build_snapshot(&snap);
    if (st != TDM_OK) {
        say("tidemark: cannot build a snapshot: %s", tdm_strerror(st));
        goto out;
    }
    /* A process that never touched device memory (a shell, a helper a
     * launcher runs) leaves nothing at exit: dozens of empty files and
     * lines would hide the one that matters.  A dump asked by signal is
     * written all the same: someone asked for it. */
    if (kind == DUMP_EXIT && tdm__snap_untouched(snap)) {
        tdm__spill_remove(); /* nothing to recover either */
        goto out;
    }
    st = tdm__dump_path_for_process(g.tmpl, g.start_time_us, path, sizeof path);
    int has_pid = tdm__dump_template_has_pid(g.tmpl);
    /* A forked child must not write over its parent's file. */
    if (st == TDM_OK && g.forked && !has_pid)
        st = add_pid(path);
    if (st == TDM_OK && kind != DUMP_EXIT) {
        char suffix[32];
        unsigned *seq = kind == DUMP_SIGNAL ? &g.signal_seq : &g.oom_seq;
        snprintf(suffix, sizeof suffix, kind == DUMP_SIGNAL ? "-%u" : "-oom-%u",
                 *seq + 1);
        st = add_suffix(path, suffix);
        if (st == TDM_OK)
            (*seq)++;
    }
    if (st != TDM_OK) {
        say("tidemark: dump path '%s' is too long once expanded; no snapshot "
            "written", g.cfg.dump);
        goto out;
    }
    if (tdm__dump_path_make_parent(path) != TDM_OK) {
        say("tidemark: cannot create the folder of %s: %m; no snapshot written",
            path);
        goto out;
    }
    /* Another process of this job (one this one exec'd in a child, as a
     * shell or launcher does, or one the same script ran before) wrote the
     * name: keep its snapshot, and write ours beside it.  A file from an
     * earlier run is replaced.  Where nothing is, the snapshot is moved
     * into place only if nothing is there still (link(2)): no empty file
     * ever claims the name first, to stay after a kill or to take the
     * umask's permissions. */
    int exclusive = 0;
    struct stat there;
    if (!has_pid && lstat(path, &there) != 0)
        exclusive = 1;
    else if (!has_pid && tdm__dump_path_written_since(path, g.job_start_us) &&
             (st = add_pid(path)) != TDM_OK) {
        say("tidemark: dump path '%s' is too long once expanded; no snapshot "
            "written", g.cfg.dump);
        goto out;
    }
    size_t events = snap->event_count;
    uint64_t dropped = snap->dropped_events;
    st = tdm__snap_write_as(snap, path, !exclusive);
    if (st == TDM_IO_ERROR && exclusive && errno == EEXIST) {
        /* Another process of the job got there while this one wrote. */
        if ((st = add_pid(path)) != TDM_OK) {
            say("tidemark: dump path '%s' is too long once expanded; no snapshot "
                "written", g.cfg.dump);
            goto out;
        }
        st = tdm__snap_write(snap, path);
    }
    int why = errno; /* on TDM_IO_ERROR: an errno value or a TDM__OUT_* code */
    if (st == TDM_OK && dropped)
        say("tidemark: wrote snapshot to %s (%zu events, %llu dropped)", path,
            events, (unsigned long long)dropped);
    else if (st == TDM_OK)
        say("tidemark: wrote snapshot to %s (%zu events)", path, events);
    /* The exit snapshot holds the history: the spill is no longer needed.
     * A failed one leaves it for `tidemark recover`. */
    if (st == TDM_OK && kind == DUMP_EXIT)
        tdm__spill_remove();
    if (st != TDM_OK) {
        say("tidemark: cannot write snapshot to %s: %s", path,
            st == TDM_IO_ERROR && why ? tdm__out_strerror(why) : tdm_strerror(st));
    }
out:
    tdm__rec_snapshot_free(snap);
    pthread_mutex_unlock(&g.lock);
}

/* ---- dump on signal ------------------------------------------------------ */

static void on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved = errno;
    int fd = atomic_load_explicit(&g.pipe_wr, memory_order_relaxed);
    if (fd >= 0) {
        /* Non-blocking: a flood of signals drops wake-ups, never blocks. */
        char byte = 's';
        ssize_t w = write(fd, &byte, 1);
        (void)w;
    }
    errno = saved;
}

/* ---- the normal snapshot on SIGINT / SIGTERM ---------------------------
 * Only where the signal's disposition was SIG_DFL when recording started
 * (a program that handles, ignores or later installs its own handler keeps
 * it: sigaction replaces ours).  The handler hands the signal to the
 * watcher thread and waits (poll on a reply pipe, async-signal-safe) while
 * the watcher writes the exit snapshot, so the interrupted thread goes no
 * further; then it puts SIG_DFL back and sends the signal again, so the
 * program still ends "killed by signal N" (exit status 128+N in a shell).
 * It holds the thread at most TERM_HOLD_MS: the signal may have stopped it
 * inside tidemark, holding a lock the dump needs (an allocation's device
 * lock), and the dump would wait for it forever.  Then the handler lets
 * the thread go on (it leaves tidemark and lets the lock go), and the
 * watcher, once the snapshot is written, puts SIG_DFL back and sends the
 * signal to the process itself.  A second signal meanwhile ends the
 * process at once (SA_NODEFER), as does the first where no watcher is (a
 * forked child without one).  The spill file stays when no snapshot was
 * written. */

#define TERM_HOLD_MS 2000

static const int term_signals[] = {SIGINT, SIGTERM};

static void die_by(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    kill(getpid(), sig);
    /* From a handler, the signal is blocked in this thread: let it in. */
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
}

static void on_term_signal(int sig)
{
    int saved = errno;
    int fd = atomic_load_explicit(&g.pipe_wr, memory_order_relaxed);
    char byte = (char)sig; /* SIGINT, SIGTERM: never 's', 'q' or 'g' */
    if (atomic_exchange(&g.term_pending, 1) == 0 && fd >= 0 && g.reply_rd >= 0 &&
        write(fd, &byte, 1) == 1) {
        struct pollfd p = {.fd = g.reply_rd, .events = POLLIN};
        int ready;
        while ((ready = poll(&p, 1, TERM_HOLD_MS)) < 0 && errno == EINTR)
            ;
        if (ready == 0) {
            /* Not written yet: this thread may hold what the dump waits
             * for.  It goes on; the watcher ends the process after. */
            errno = saved;
            return;
        }
    }
    die_by(sig);
    errno = saved;
}

/* Installs on_term_signal for each of SIGINT and SIGTERM still at SIG_DFL;
 * returns how many. */
static int take_term_signals(void)
{
    int taken = 0;
    for (size_t i = 0; i < sizeof term_signals / sizeof *term_signals; i++) {
        struct sigaction old, sa;
        if (sigaction(term_signals[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term_signal;
        sa.sa_flags = SA_RESTART | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        if (sigaction(term_signals[i], &sa, NULL) == 0)
            taken++;
    }
    return taken;
}

/* The ring's first event (tdm__ring_set_first_event_hook): the program
 * has used device memory, and SIGINT and SIGTERM still at SIG_DFL now are
 * taken.  Not at start: a program looks at its signals as it starts
 * (Python installs its KeyboardInterrupt handler only over SIG_DFL, and
 * reports any other as not its own), and a process that never uses device
 * memory (a shell, a launcher) must see exactly what it would without
 * tidemark.  Only in the process that started the watcher (a forked child
 * has none: its signals stay the parent's). */
static void take_term_once(void)
{
    if (atomic_load(&g.term_ready) && atomic_load(&g.first_event) &&
        getpid() == g.owner_pid && !atomic_exchange(&g.term_taken, 1))
        take_term_signals();
}

static void take_term_at_first_event(void)
{
    atomic_store(&g.first_event, 1);
    take_term_once();
}

/* The exit snapshot, once, for a stopping signal; then the waiting
 * handler is woken, and the process ended by the signal in case the
 * handler stopped waiting (its thread went on, see TERM_HOLD_MS): SIG_DFL
 * and the signal sent to the process, which a thread that does not block
 * it takes (this one blocks every signal).  If the program exits
 * meanwhile (another thread), its exit path waits for this dump (at_exit
 * takes g.lock) and writes none of its own. */
static void dump_for_term_signal(int sig)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&g.exit_done, &expected, 1))
        dump_now(DUMP_EXIT);
    char done = 'd';
    if (write(g.reply_wr, &done, 1) < 0) {
        /* the handler ends the process itself when it sees no reply */
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    kill(getpid(), sig);
}

/* The spill file's waker (spill.h): a writer asks for file space ahead
 * of the ring; the watcher reserves it, so that recording threads do not
 * pay for the file system's page allocation.  One byte, never blocking:
 * a full pipe already holds wake-ups. */
static void wake_for_spill(void)
{
    int saved = errno;
    int fd = atomic_load_explicit(&g.pipe_wr, memory_order_relaxed);
    char grow = 'g';
    if (fd >= 0 && write(fd, &grow, 1) < 0) {
        /* full: the watcher has wake-ups to read */
    }
    errno = saved;
}

static void *watcher_main(void *arg)
{
    (void)arg;
    for (;;) {
        char byte;
        ssize_t n = read(g.pipe_rd, &byte, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || byte == 'q')
            break;
        if (byte == 'g')
            tdm__spill_ahead_work();
        else if (byte == SIGINT || byte == SIGTERM)
            dump_for_term_signal(byte);
        else
            dump_now(DUMP_SIGNAL);
    }
    return NULL;
}

/* Whether a watcher thread is wanted: for dumps on signal, or for the
 * exit snapshot on SIGINT/SIGTERM. */
static int wants_watcher(void)
{
    return (g.cfg.dump_on & TDM__DUMP_ON_SIGNAL) ||
           ((g.cfg.dump_on & TDM__DUMP_ON_EXIT) &&
            g.cfg.stop_signals == TDM__CONF_STOP_SNAPSHOT);
}

/* Pipe, watcher thread, then the handlers (so no wake-up is ever lost to a
 * thread that is not there yet): the dump signal's when dump_on has
 * signal, SIGINT's and SIGTERM's (where at SIG_DFL) when it has exit.
 * Returns 0 or an errno value. */
static int start_signal_watch(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return e;
    }
    g.pipe_rd = fds[0];
    int reply[2];
    if (pipe2(reply, O_CLOEXEC | O_NONBLOCK) != 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        g.pipe_rd = -1;
        return e;
    }
    g.reply_rd = reply[0];
    g.reply_wr = reply[1];
    /* The watcher blocks every signal, so the program's signals keep going
     * to the program's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&g.watcher, NULL, watcher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(fds[0]);
        close(fds[1]);
        close(reply[0]);
        close(reply[1]);
        g.pipe_rd = g.reply_rd = g.reply_wr = -1;
        return rc;
    }
    pthread_setname_np(g.watcher, "tidemark-dump");
    g.watcher_started = 1;
    atomic_store(&g.pipe_wr, fds[1]);
    tdm__spill_ahead_set_waker(wake_for_spill);

    /* SIGINT and SIGTERM wait for the first event (take_term_at_first_event). */
    if (!(g.cfg.dump_on & TDM__DUMP_ON_SIGNAL))
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; /* the program's calls go on */
    sigemptyset(&sa.sa_mask);
    if (sigaction(g.cfg.signal, &sa, NULL) != 0)
        return errno; /* the watcher stays idle; at_exit stops it */
    return 0;
}

static void stop_watcher(void)
{
    if (!g.watcher_started)
        return;
    tdm__spill_ahead_set_waker(NULL);
    int fd = atomic_exchange(&g.pipe_wr, -1);
    char quit = 'q';
    /* If the pipe is full of wake-ups the watcher is busy with them and the
     * quit byte cannot go in: leave it running rather than wait. */
    if (fd >= 0 && write(fd, &quit, 1) == 1)
        pthread_join(g.watcher, NULL);
    g.watcher_started = 0;
}

/* In a forked child the watcher thread does not exist and the pipe is the
 * parent's: the child drops both first, so its handler finds no pipe and
 * does nothing (a signal sent to a whole process group does not kill
 * forked workers).  Then, as `fork` says:
 *   follow  the child records on with an empty ring and none of the
 *           parent's allocations, into its own file
 *           (at exit, on its own watcher's signal, on out-of-memory);
 *   stop    the child stops recording; at_exit and on_oom see another pid
 *           and write nothing.
 * g.lock is made anew: a dump in another thread of the parent may have
 * held it at the fork, and that thread is not in the child.  After exec,
 * tidemark (if loaded) starts over from TIDEMARK_CONF. */
static void after_fork_child(void)
{
    int fd = atomic_exchange(&g.pipe_wr, -1);
    if (fd >= 0)
        close(fd);
    if (g.pipe_rd >= 0)
        close(g.pipe_rd);
    g.pipe_rd = -1;
    if (g.reply_rd >= 0)
        close(g.reply_rd);
    if (g.reply_wr >= 0)
        close(g.reply_wr);
    g.reply_rd = g.reply_wr = -1;
    atomic_store(&g.term_pending, 0);
    g.watcher_started = 0;
    pthread_mutex_init(&g.lock, NULL);
    if (!atomic_load(&g.active) || getpid() == g.owner_pid)
        return;
    if (g.cfg.fork == TDM__CONF_FORK_STOP) {
        atomic_store(&g.active, 0);
        tdm__rec_stop();
        return;
    }
    g.owner_pid = getpid();
    g.forked = 1;
    /* The parent's allocations are not the child's: its snapshot starts
     * with no live block, segment or stat (a child that allocates nothing
     * then writes no exit snapshot). */
    tdm__alloc_forget_inherited();
    g.signal_seq = 0;
    g.oom_seq = 0;
    atomic_store(&g.exit_done, 0);
    tdm_history_options opts;
    tdm__config_history_options(&g.cfg, &opts);
    opts.clear_history = 1;
    if (tdm_record_memory_history(&opts) != TDM_OK) {
        atomic_store(&g.active, 0);
        return;
    }
    /* Only for dumps on signal: a thread started in the child of a
     * threaded process is a risk a SIGINT/SIGTERM snapshot is not worth
     * (the child, often about to exec, then dies by them as it would). */
    if (g.cfg.dump_on & TDM__DUMP_ON_SIGNAL) {
        int e = start_signal_watch();
        if (e != 0)
            say("tidemark: cannot watch for SIG%s in child %lld: %s; snapshots "
                "on signal are off there", signal_name(g.cfg.signal),
                (long long)getpid(), strerror(e));
    }
}

/* ---- dump at exit ---------------------------------------------------------- */

static void at_exit(void)
{
    if (getpid() != g.owner_pid)
        return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g.exit_done, &expected, 1)) {
        /* A SIGINT/SIGTERM snapshot may be under way: let it finish. */
        pthread_mutex_lock(&g.lock);
        pthread_mutex_unlock(&g.lock);
        return;
    }
    stop_watcher();
    if (g.cfg.dump_on & TDM__DUMP_ON_EXIT)
        dump_now(DUMP_EXIT);
    else
        tdm__spill_remove(); /* a normal exit that wants no snapshot */
}

/* ---- dump on out-of-memory ------------------------------------------------ */

/* Called by alloc/ in the allocating thread, after an allocation failed
 * for good, with no allocator lock held. */
static void on_oom(int device, size_t requested)
{
    (void)device;
    (void)requested;
    if (atomic_load(&g.active) && getpid() == g.owner_pid)
        dump_now(DUMP_OOM);
}

/* A library loaded with dlopen could be unloaded by dlclose while our
 * handler, thread and exit hook still point into it.  Once any of those
 * exist, the library pins itself: dlclose then leaves it mapped. */
static void pin_self(void)
{
    Dl_info info;
    if (dladdr((void *)&pin_self, &info) && info.dli_fname)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

/* ---- applying a configuration ------------------------------------------------ */

/* Opens the spill file (spill_path.c) and says what it has to say. */
static void start_spill(const char *text)
{
    char tmpl[TDM__CONF_PATH_MAX], line[MESSAGE_MAX];
    const char *spill_tmpl = g.cfg.spill;
    if (spill_tmpl[0] && strcmp(spill_tmpl, "off") != 0 &&
        tdm__dump_template_absolute(spill_tmpl, tmpl, sizeof tmpl) == 0)
        spill_tmpl = tmpl;
    if (tdm__spill_start(&g.cfg, g.tmpl, spill_tmpl, tdm__dump_template_has_pid(g.tmpl),
                         g.start_time_us, text, line, sizeof line))
        say("%s", line);
}

static tdm_status apply_once(const char *text);

tdm_status tdm__autoinit_apply(const char *text)
{
    if (!text || tdm__config_blank(text)) {
        if (!atomic_load(&g.applied))
            atomic_store(&g.decided, 1); /* off, unless later text says else */
        return TDM_OK;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g.applied, &expected, 1))
        return TDM_OK;
    atomic_store(&g.decided, 0);
    tdm_status st = apply_once(text);
    atomic_store(&g.decided, 1);
    return st;
}

TDM_API int tdm__autoinit_hook_mode(void)
{
    if (!atomic_load(&g.applied))
        tdm__autoinit_apply(secure_getenv("TIDEMARK_CONF"));
    /* While another thread (or this one, further up) is applying, the mode
     * is not known yet: the hook passes the call through and asks again
     * next time. */
    if (!atomic_load(&g.decided))
        return -1;
    return atomic_load(&g.hook_mode);
}

/* `ipc_libraries` as given ("" until TIDEMARK_CONF is applied, or when
 * unset): the preload's cache mode reads it once the mode is known
 * (hooks/preload/cuda_ipc.c); the text does not change after that. */
TDM_API const char *tdm__autoinit_ipc_libraries(void)
{
    return atomic_load(&g.decided) ? g.cfg.ipc_libraries : "";
}

static tdm_status apply_once(const char *text)
{
    char err[MESSAGE_MAX];
    g.start_time_us = tdm__now_us();
    g.job_start_us = tdm__dump_path_group_start_us(g.start_time_us);
    tdm_status st = tdm__config_prepare(text, &g.cfg, g.tmpl, g.start_time_us, err, sizeof err);
    if (st != TDM_OK) {
        say("%s", err);
        return st;
    }
    if (g.cfg.help) {
        tdm__config_print_help();
        return TDM_OK;
    }
    tdm_procinfo who;
    tdm__procinfo_read(&who);
    if (!tdm__config_rank_selected(&g.cfg, who.rank, who.local_rank)) {
        /* `ranks` leaves this rank out: it runs untouched.  The devices are
         * set up as for the others (tdm_malloc behaves alike on every
         * rank), but nothing records, the hooks pass through, nothing is
         * written. */
        g.cfg.record = TDM_RECORD_OFF;
        g.cfg.mode = TDM__CONF_MODE_OBSERVE;
    }
    g.owner_pid = getpid();
    if (g.cfg.record != TDM_RECORD_OFF && (g.cfg.dump_on & TDM__DUMP_ON_OOM))
        g.cfg.alloc.on_oom = on_oom;
    st = tdm__alloc_configure(&g.cfg.alloc);
    if (st != TDM_OK) {
        tdm__config_device_error(err, sizeof err, &g.cfg, st);
        say("%s", err);
        return st;
    }
    tdm__rec_set_config_text(text);
    tdm__file_mode_set(g.cfg.file_mode);
    atomic_store(&g.hook_mode, g.cfg.mode == TDM__CONF_MODE_CACHE
                                   ? TDM__HOOK_CACHE
                                   : g.cfg.record == TDM_RECORD_OFF
                                         ? TDM__HOOK_OFF
                                         : TDM__HOOK_OBSERVE);
    if (g.cfg.record == TDM_RECORD_OFF)
        return TDM_OK; /* devices configured; nothing recorded, nothing dumped */

    /* Before recording starts, so that no first event goes unseen. */
    tdm__ring_set_first_event_hook(take_term_at_first_event);
    start_spill(text);
    tdm_history_options opts;
    tdm__config_history_options(&g.cfg, &opts);
    st = tdm_record_memory_history(&opts);
    if (st != TDM_OK) {
        say("tidemark: cannot start recording (max_entries=%zu): %s; recording "
            "is off", g.cfg.max_entries, tdm_strerror(st));
        tdm__spill_remove(); /* nothing will ever be in it */
        return st;
    }

    atomic_store(&g.active, 1);
    pin_self();

    if (wants_watcher()) {
        int e = start_signal_watch();
        if (e != 0) {
            say("tidemark: cannot watch for SIG%s, SIGINT, SIGTERM: %s; snapshots "
                "on those signals are off", signal_name(g.cfg.signal), strerror(e));
        } else if ((g.cfg.dump_on & TDM__DUMP_ON_EXIT) &&
                   g.cfg.stop_signals == TDM__CONF_STOP_SNAPSHOT) {
            /* (an event recorded meanwhile by another thread is seen here) */
            atomic_store(&g.term_ready, 1);
            take_term_once();
        }
    }
    /* After tidemark's own handlers, so that in the child this one runs
     * once their locks are free again.  Once: apply acts once. */
    tdm__alloc_register_atfork();
    pthread_atfork(NULL, NULL, after_fork_child);
    if (atexit(at_exit) != 0)
        say("tidemark: cannot register the exit handler; no snapshot at exit");
    return TDM_OK;
}

/* secure_getenv: a set-user-ID program must not let its caller choose where
 * it writes files. */
__attribute__((constructor)) static void tdm_autoinit_ctor(void)
{
    tdm__autoinit_apply(secure_getenv("TIDEMARK_CONF"));
}
