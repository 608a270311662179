/* tests/unit/test_fork.c: a child forked while other threads are inside
 * the recorder can record and dump.
 *
 * Data loaders and launchers fork while other threads of the program go
 * on; a lock one of those threads held at fork() stays held in the child
 * for good.  Here one thread dumps snapshots and marks phases without a
 * pause (sanitizer builds: see PARENT_DUMPS) while the main thread forks;
 * every child then marks a phase, records and writes a snapshot of its
 * own.  A child that hangs prints its stack and is ended, which fails the
 * test (child_watch.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tidemark.h"
#include "child_watch.h"

#define FORKS 12

/* The sanitizers' own allocators (GCC 12) are not made safe across fork():
 * a child forked while another thread was inside their malloc hangs at its
 * first malloc, whatever tidemark does.  A dump mallocs, so in sanitizer
 * builds the other thread marks phases and allocates, which take
 * tidemark's locks but call no malloc, and only the children dump. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PARENT_DUMPS 0
#else
#define PARENT_DUMPS 1
#endif

static char dir[] = "/tmp/tdm_test_fork_XXXXXX";
static _Atomic int stop;
/* The other thread's first round is over: what a thread does once (its
 * stack bounds, the unwinder's per-thread cache, the phase names) mallocs,
 * which a sanitizer build's child must not inherit half done. */
static _Atomic int warmed;

static void *dump_without_pause(void *arg)
{
    (void)arg;
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/parent.tdm", dir);
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        tdm_phase(i % 2 ? "forward" : "backward");
        void *p = NULL;
        if (tdm_malloc(&p, 4096, 0, 0) == TDM_OK)
            tdm_free(p);
        if (PARENT_DUMPS && tdm_dump_snapshot(path) != TDM_OK) {
            fprintf(stderr, "test_fork: the parent's dump to %s failed\n", path);
            abort();
        }
        if (i == 1)
            atomic_store(&warmed, 1);
    }
    return NULL;
}

/* What a child does; its exit status says which step failed. */
static int child_work(int k)
{
    child_watch(60);
    if (tdm_phase("child") != TDM_OK)
        return 1;
    void *p = NULL;
    if (tdm_malloc(&p, 1 << 20, 0, 0) != TDM_OK)
        return 2;
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/child-%d.tdm", dir, k);
    if (tdm_dump_snapshot(path) != TDM_OK)
        return 3;
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0)
        return 5;
    return tdm_free(p) == TDM_OK ? 0 : 6;
}

static void fork_while_another_thread_dumps(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = 4096;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);

    pthread_t t;
    atomic_store(&stop, 0);
    atomic_store(&warmed, 0);
    assert_int_equal(pthread_create(&t, NULL, dump_without_pause, NULL), 0);
    while (!atomic_load(&warmed))
        usleep(1000);
    int bad_status = 0, forks_failed = 0;
    for (int k = 0; k < FORKS; k++) {
        usleep(2000); /* let the other thread get well inside a dump */
        pid_t pid = fork();
        if (pid < 0) {
            forks_failed++;
            continue;
        }
        if (pid == 0)
            /* Straight to the kernel: ThreadSanitizer's _exit would report
             * the parent's thread, unjoined in the child, as leaked. */
            syscall(SYS_exit_group, child_work(k));
        int status = child_wait(pid, 90);
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad_status = status;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);

    char cmd[sizeof dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) { /* a leftover temporary folder is harmless */ }
    assert_int_equal(forks_failed, 0);
    char why[64];
    if (bad_status)
        fail_msg("a forked child failed: %s", child_describe(bad_status, why, sizeof why));
}

/* Phases alone, from two threads, with no pause and no spill file: a
 * phase takes the recorder's lock and then the spill's, and the spill's
 * lock is taken even when there is no spill file.  A fork that caught a
 * thread between the two left the child's spill lock held for good: its
 * first tdm_phase hung (seen in CI, 1 run in about 20).  Many quick forks
 * make that window likely. */
#define PHASE_FORKS 300

static void *mark_phases_without_pause(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&stop); i++)
        tdm_phase(i % 2 ? "forward" : "backward");
    return NULL;
}

static void fork_while_other_threads_mark_phases(void **state)
{
    (void)state;
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.max_entries = 4096;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    atomic_store(&stop, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, mark_phases_without_pause, NULL), 0);
    int bad_status = 0;
    for (int k = 0; k < PHASE_FORKS && !bad_status; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            child_watch(20);
            int a = tdm_phase("child-a") == TDM_OK, b = tdm_phase("child-b") == TDM_OK;
            syscall(SYS_exit_group, a && b ? 0 : 1);
        }
        int status = child_wait(pid, 30);
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad_status = status ? status : -1;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    char why[64];
    if (bad_status)
        fail_msg("a forked child failed: %s", child_describe(bad_status, why, sizeof why));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fork_while_another_thread_dumps),
        cmocka_unit_test(fork_while_other_threads_mark_phases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
