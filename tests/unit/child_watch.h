/* tests/unit/child_watch.h: a forked child that hangs says where, and
 * fails the test instead of hanging it.
 *
 * child_watch(seconds) arms an alarm in a forked test child; if it goes
 * off, the child prints its stack on stderr and leaves with status 4
 * (straight to the kernel: ThreadSanitizer's _exit would report the
 * parent's threads, which the child inherits unjoined, as leaked).
 * ThreadSanitizer runs a signal handler only when the thread next enters
 * its runtime, never while it is blocked on a lock, so the parent also
 * waits with a limit: child_wait kills a child that outlives it. */
#ifndef TDM_TESTS_CHILD_WATCH_H
#define TDM_TESTS_CHILD_WATCH_H

#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void child_hung(int sig)
{
    (void)sig;
    static const char msg[] = "forked child hung; its stack:\n";
    if (write(2, msg, sizeof msg - 1) < 0) { /* nothing more to say */ }
    void *pcs[64];
    backtrace_symbols_fd(pcs, backtrace(pcs, 64), 2);
    syscall(SYS_exit_group, 4);
}

static __attribute__((unused)) void child_watch(unsigned seconds)
{
    signal(SIGALRM, child_hung);
    alarm(seconds);
}

/* Waits up to `seconds` for child `pid`: its wait status, or -1 after
 * killing it when it took longer (or could not be waited for). */
static __attribute__((unused)) int child_wait(pid_t pid, unsigned seconds)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (unsigned long waited = 0; waited < seconds * 100ul; waited++) {
        int status = 0;
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return status;
        if (got < 0)
            return -1;
        nanosleep(&tick, NULL);
    }
    static const char msg[] = "forked child hung: killed\n";
    if (write(2, msg, sizeof msg - 1) < 0) { /* the failure says enough */ }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* What a child_wait status says, for a failure message. */
static __attribute__((unused)) const char *child_describe(int status, char *buf, size_t n)
{
    if (status == -1)
        snprintf(buf, n, "hung, killed after its time");
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "signal %d", WTERMSIG(status));
    else
        snprintf(buf, n, "exit %d", WEXITSTATUS(status));
    return buf;
}

#endif
