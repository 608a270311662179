/* tests/cli/tdm_conf_prog.c: a small program linked to libtidemark.so for
 * cli/test_env.sh.  It never calls tdm_record_memory_history: whatever it
 * records, TIDEMARK_CONF switched on.  It prints nothing on stderr itself,
 * so the test can count tidemark's lines.
 *
 *   tdm_conf_prog [--allocs N] [--fork] [--oom] [--ready FILE] [--stop FILE]
 *
 * --allocs N   allocate N buffers on sim device 0 (default 8), free them
 * --fork       fork a child that allocates, frees and exit()s normally
 * --oom        ask for more than device 0 holds, twice (must fail with
 *              TDM_OUT_OF_MEMORY), then go on
 * --ready FILE write our pid into FILE once set up
 * --stop FILE  keep allocating and freeing until FILE exists (60 s at most)
 * Exit status 0 on success, 2 on a failed tidemark call, 3 on timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "tidemark.h"

static void churn(int n)
{
    void *ptrs[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++) {
        if (tdm_malloc(&ptrs[i], (size_t)(i + 1) * 4096, 0, 0) != TDM_OK) {
            fprintf(stdout, "tdm_malloc failed\n");
            exit(2);
        }
    }
    for (int i = 0; i < n; i++) {
        if (tdm_free(ptrs[i]) != TDM_OK) {
            fprintf(stdout, "tdm_free failed\n");
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    int allocs = 8, do_fork = 0, do_oom = 0;
    const char *ready = NULL, *stop = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allocs") && i + 1 < argc)
            allocs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fork"))
            do_fork = 1;
        else if (!strcmp(argv[i], "--oom"))
            do_oom = 1;
        else if (!strcmp(argv[i], "--ready") && i + 1 < argc)
            ready = argv[++i];
        else if (!strcmp(argv[i], "--stop") && i + 1 < argc)
            stop = argv[++i];
        else {
            fprintf(stdout, "usage: %s [--allocs N] [--fork] [--oom] [--ready F] "
                    "[--stop F]\n",
                    argv[0]);
            return 64;
        }
    }
    churn(allocs);
    if (do_oom) {
        size_t free_bytes, total;
        if (tdm_mem_get_info(0, &free_bytes, &total) != TDM_OK)
            return 2;
        for (int i = 0; i < 2; i++) {
            void *p = (void *)1;
            if (tdm_malloc(&p, total + 4096, 0, 0) != TDM_OUT_OF_MEMORY || p)
                return 2;
        }
        churn(2); /* and the program goes on */
    }
    if (do_fork) {
        pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            churn(2);
            exit(0); /* normal exit: atexit handlers run in the child */
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            return 2;
    }
    if (ready) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", ready);
        FILE *f = fopen(tmp, "w");
        if (!f)
            return 2;
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        rename(tmp, ready);
    }
    if (stop) {
        /* Keep working while the test sends signals: dumps happen while
         * this thread allocates. */
        for (int ms = 0; access(stop, F_OK) != 0; ms += 10) {
            if (ms > 60000)
                return 3;
            churn(1);
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}
