/* tests/hooks/infra/dlclose_prog.c: dlclose() of libtidemark.so.
 *
 *   dlclose_prog LIB pinned    TIDEMARK_CONF is set by the caller: the
 *                              library records from its constructor, so
 *                              dlclose must leave it loaded; the exit
 *                              snapshot is still written.
 *   dlclose_prog LIB api       no TIDEMARK_CONF: the program records
 *                              through the API, dumps, dlcloses; the
 *                              library may go; fork(), thread creation and
 *                              the end of a thread that recorded (its ring
 *                              chunk) afterwards must not run any of its
 *                              code.
 * Prints "pinned" or "unloaded" and exits 0, or 1 with a message. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* A thread that records (so it holds a chunk of the ring), then waits
 * until the library is gone before it ends. */
typedef struct recorder_thread {
    tdm_status (*mal)(void **, size_t, int, tdm_stream);
    tdm_status (*fre)(void *);
    int go_on[2]; /* pipe: main writes a byte after dlclose */
    _Atomic int ok;
} recorder_thread;

static void *record_then_wait(void *arg)
{
    recorder_thread *r = arg;
    void *p = NULL;
    r->ok = r->mal(&p, 512, 0, 0) == TDM_OK && r->fre(p) == TDM_OK;
    char c;
    if (read(r->go_on[0], &c, 1) != 1)
        r->ok = 0;
    return NULL;
}

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
    int api = strcmp(argv[2], "api") == 0;
    recorder_thread rt = {.mal = mal, .fre = fre};
    pthread_t recording;
    if (api) {
        check(pipe(rt.go_on) == 0, "pipe");
        check(pthread_create(&recording, NULL, record_then_wait, &rt) == 0, "thread");
        for (int i = 0; i < 5000 && !rt.ok; i++) /* its events are in */
            usleep(1000);
        check(rt.ok, "recording thread");
    }
    check(dlclose(h) == 0, "dlclose");
    if (api) {
        check(write(rt.go_on[1], "x", 1) == 1, "wake");
        pthread_join(recording, NULL); /* its end runs no code of the library */
    }
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
