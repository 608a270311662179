/* tests/hooks/infra/dlclose_prog.c: dlclose() of libtidemark.so.
 *
 *   dlclose_prog LIB pinned    TIDEMARK_CONF is set by the caller: the
 *                              library records from its constructor, so
 *                              dlclose must leave it loaded; the exit
 *                              snapshot is still written.
 *   dlclose_prog LIB api       no TIDEMARK_CONF: the program records
 *                              through the API, dumps, dlcloses; the
 *                              library may go; fork() and thread creation
 *                              afterwards must not run any of its code.
 * Prints "pinned" or "unloaded" and exits 0, or 1 with a message. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tidemark.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("dlclose_prog: %s\n", what);
        exit(1);
    }
}

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    check(h != NULL, "dlopen");
    tdm_status (*mal)(void **, size_t, int, tdm_stream) =
        (tdm_status(*)(void **, size_t, int, tdm_stream))dlsym(h, "tdm_malloc");
    tdm_status (*fre)(void *) = (tdm_status(*)(void *))dlsym(h, "tdm_free");
    check(mal && fre, "dlsym");
    if (strcmp(argv[2], "api") == 0) {
        tdm_status (*rec)(const tdm_history_options *) =
            (tdm_status(*)(const tdm_history_options *))dlsym(h, "tdm_record_memory_history");
        tdm_status (*dump)(const char *) =
            (tdm_status(*)(const char *))dlsym(h, "tdm_dump_snapshot");
        check(rec && dump, "dlsym api");
        check(rec(NULL) == TDM_OK, "record");
    }
    void *p = NULL, *q = NULL;
    check(mal(&p, 4096, 0, 0) == TDM_OK && mal(&q, 8192, 0, 0) == TDM_OK, "tdm_malloc");
    check(fre(p) == TDM_OK, "tdm_free");
    check(dlclose(h) == 0, "dlclose");
    void *again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    printf("%s\n", again ? "pinned" : "unloaded");
    if (again)
        dlclose(again);
    fflush(stdout); /* once, not once more by the child */
    /* Whatever the library registered must not fire into unmapped code. */
    pid_t pid = fork();
    check(pid >= 0, "fork");
    if (pid == 0)
        _exit(0);
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
    pthread_t t;
    check(pthread_create(&t, NULL, nothing, NULL) == 0, "thread");
    pthread_join(t, NULL);
    return 0;
}
