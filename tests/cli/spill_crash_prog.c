/* tests/cli/spill_crash_prog.c: allocates and frees a fixed sequence of
 * device memory through tdm_malloc (recorded under TIDEMARK_CONF), then
 * ends as argv[1] says: "exit" (normally), "segv" (a write to a page with no access), "abort",
 * "term" / "int" (raises SIGTERM / SIGINT), or "handler-term" (installs its
 * own SIGTERM handler first, which prints a line and exits 42).
 * "int-busy" allocates and frees in a loop while a second thread sends
 * the main thread SIGINT after 50 ms (likely inside tidemark, holding the
 * device's lock).  "ahead
 * FILE" records 20,000 more pairs, waits 300 ms, prints how many bytes the
 * file system has allocated to FILE (its spill file) and exits.
 * "probe" prints the dispositions of SIGINT and SIGTERM as the program
 * sees them (sigaction) before its first allocation and after its last,
 * then exits. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tidemark.h"

static void own_term(int sig)
{
    (void)sig;
    static const char line[] = "spill_crash_prog: own SIGTERM handler ran\n";
    if (write(STDOUT_FILENO, line, sizeof line - 1) < 0)
        _exit(43);
    _exit(42);
}

static pthread_t main_thread;

static void *send_int(void *arg)
{
    (void)arg;
    struct timespec wait = {0, 50 * 1000000};
    nanosleep(&wait, NULL);
    pthread_kill(main_thread, SIGINT);
    return NULL;
}

static const char *disposition(int sig)
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0)
        return "unknown";
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
        return "default";
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
        return "ignored";
    return "handled";
}

static void probe(const char *when)
{
    printf("%s: SIGINT %s, SIGTERM %s\n", when, disposition(SIGINT), disposition(SIGTERM));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "exit";
    if (strcmp(how, "probe") == 0)
        probe("before");
    if (strcmp(how, "handler-term") == 0)
        signal(SIGTERM, own_term);
    void *p[8];
    for (int i = 0; i < 8; i++) {
        if (tdm_malloc(&p[i], (size_t)(i + 1) << 20, 0, 0) != TDM_OK) {
            fprintf(stderr, "spill_crash_prog: tdm_malloc failed\n");
            return 2;
        }
    }
    for (int i = 0; i < 8; i += 2)
        tdm_free(p[i]);
    if (strcmp(how, "segv") == 0) {
        /* A page with no access (not address 0: some sandboxes map it). */
        volatile int *nowhere = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        *nowhere = 1;
    }
    if (strcmp(how, "int-busy") == 0) {
        main_thread = pthread_self();
        pthread_t t;
        if (pthread_create(&t, NULL, send_int, NULL) != 0)
            return 4;
        for (;;) {
            void *q;
            if (tdm_malloc(&q, 4096, 0, 0) != TDM_OK)
                return 2;
            tdm_free(q);
        }
    }
    if (strcmp(how, "ahead") == 0 && argc > 2) {
        for (int i = 0; i < 20000; i++) {
            void *q;
            if (tdm_malloc(&q, 4096, 0, 0) != TDM_OK)
                return 2;
            tdm_free(q);
        }
        struct timespec wait = {0, 300 * 1000000};
        nanosleep(&wait, NULL);
        struct stat st;
        if (stat(argv[2], &st) != 0) {
            perror(argv[2]);
            return 3;
        }
        printf("%lld\n", (long long)st.st_blocks * 512);
        return 0;
    }
    if (strcmp(how, "probe") == 0)
        probe("after");
    if (strcmp(how, "abort") == 0)
        abort();
    if (strcmp(how, "term") == 0 || strcmp(how, "handler-term") == 0)
        raise(SIGTERM);
    if (strcmp(how, "int") == 0)
        raise(SIGINT);
    return 0;
}
