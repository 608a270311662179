/* tests/hooks/infra/fork_sim_app.c: a program of tidemark's own API on
 * the sim device that forks, for test_fork_sim.sh.  Run under
 * TIDEMARK_CONF (dump=...%p..., fork=follow).
 *
 * The parent keeps 64 MiB, then forks two children:
 *   A  allocates 1 MiB, frees the parent's pointer (must be
 *      TDM_UNKNOWN_POINTER: the child forgot the parent's blocks), frees
 *      its own, allocates 1 MiB again and keeps it; exit(0);
 *   B  allocates nothing; exit(0).
 * Prints "parent PID", "a PID", "b PID"; exit status 0, or 1 with a line
 * on stderr naming the step that failed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tidemark.h"

#define MIB ((size_t)1 << 20)

static void die(const char *what, int v)
{
    fprintf(stderr, "fork_sim_app: %s (%d)\n", what, v);
    exit(1);
}

static int child_a(void *parents)
{
    void *p = NULL, *q = NULL;
    if (tdm_malloc(&p, MIB, 0, 0) != TDM_OK)
        return 2;
    tdm_status st = tdm_free(parents);
    if (st != TDM_UNKNOWN_POINTER) {
        fprintf(stderr, "fork_sim_app: child's free of the parent's pointer: %s\n",
                tdm_strerror(st));
        return 3;
    }
    if (tdm_free(p) != TDM_OK)
        return 4;
    if (tdm_malloc(&q, MIB, 0, 0) != TDM_OK)
        return 5;
    printf("a %d\n", (int)getpid());
    return 0;
}

static pid_t spawn(int which, void *parents)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", -1);
    if (pid == 0) {
        if (which == 'a')
            exit(child_a(parents));
        printf("b %d\n", (int)getpid());
        exit(0);
    }
    return pid;
}

int main(void)
{
    void *big = NULL;
    tdm_status st = tdm_malloc(&big, 64 * MIB, 0, 0);
    if (st != TDM_OK)
        die("parent's tdm_malloc", (int)st);
    pid_t a = spawn('a', big);
    pid_t b = spawn('b', big);
    int status = 0;
    if (waitpid(a, &status, 0) != a || !WIFEXITED(status) || WEXITSTATUS(status))
        die("child a failed", status);
    if (waitpid(b, &status, 0) != b || !WIFEXITED(status) || WEXITSTATUS(status))
        die("child b failed", status);
    printf("parent %d\n", (int)getpid());
    return 0;
}
