/* tests/unit/child_watch.h: a forked child that hangs says where.
 *
 * child_watch(seconds) arms an alarm in a forked test child; if it goes
 * off, the child prints its stack on stderr and leaves with status 4
 * (straight to the kernel: ThreadSanitizer's _exit would report the
 * parent's threads, which the child inherits unjoined, as leaked). */
#ifndef TDM_TESTS_CHILD_WATCH_H
#define TDM_TESTS_CHILD_WATCH_H

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
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

#endif
