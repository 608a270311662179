/* tests/unit/test_pycode_fork.c: a child forked while another thread is
 * making the Python code table (the process's first Python stack) gets a
 * table it can use.
 *
 * The fork handlers that take the table's lock around a fork were
 * registered when the table was first made, under that lock; the C
 * library runs only the handlers registered before a fork began.  A fork
 * made while another thread was making the table left the child with the
 * lock held by a thread it does not have, and the child's first Python
 * stack waited for ever.  Here the first use comes exactly then: from a
 * thread this test's own prepare handler starts, held inside the table's
 * mmap (linked with --wrap=mmap) while the fork goes on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "child_watch.h"
#include "pyframes.h"

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t state_cond = PTHREAD_COND_INITIALIZER;
static int in_mmap, in_fork, made = -1;
static __thread int first_user_thread;

/* tidemark's own calls to mmap: the first user's is held for a second
 * (long enough for the fork to be over when nothing waits for it). */
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (first_user_thread) {
        pthread_mutex_lock(&state_lock);
        in_mmap = 1;
        pthread_cond_broadcast(&state_cond);
        pthread_mutex_unlock(&state_lock);
        struct timespec ts = {1, 0};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    return __real_mmap(addr, len, prot, flags, fd, off);
}

static const tdm__py_text_layout layout; /* the table copies it, nothing more */

/* Detached: the child inherits no thread left to join (TSan counts one
 * as leaked at the child's exit). */
static void *first_user(void *arg)
{
    (void)arg;
    first_user_thread = 1;
    int ok = tdm__py_code_init(&layout);
    pthread_mutex_lock(&state_lock);
    made = ok;
    pthread_cond_broadcast(&state_cond);
    pthread_mutex_unlock(&state_lock);
    return NULL;
}

/* Runs inside fork(), after the C library has taken its list of handlers:
 * starts the first use and waits until it holds the table's lock. */
static void prepare(void)
{
    if (!in_fork)
        return;
    pthread_t user;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    assert_int_equal(pthread_create(&user, &attr, first_user, NULL), 0);
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&state_lock);
    while (!in_mmap)
        pthread_cond_wait(&state_cond, &state_lock);
    pthread_mutex_unlock(&state_lock);
}

static void child_gets_a_usable_table(void **state)
{
    (void)state;
    assert_int_equal(pthread_atfork(prepare, NULL, NULL), 0);
    in_fork = 1;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_watch(10); /* a lock held by nobody here: fails, not hangs */
        _exit(tdm__py_code_init(&layout) ? 0 : 3);
    }
    in_fork = 0;
    int status = child_wait(pid, 15);
    pthread_mutex_lock(&state_lock);
    while (made < 0)
        pthread_cond_wait(&state_cond, &state_lock);
    pthread_mutex_unlock(&state_lock);
    assert_int_equal(made, 1); /* (the parent's use went on) */
    char why[64];
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the child failed (%s): its first Python stack waited for the code "
                 "table's lock, held by a thread of the parent",
                 child_describe(status, why, sizeof why));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(child_gets_a_usable_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
