/* tests/unit/test_symbolize_fork.c: a child forked while another thread
 * holds the shared symbolizer gets a symbolizer of its own, also when that
 * thread's use was the process's first.
 *
 * The fork handler that resets the symbolizer's lock in the child was
 * registered at the first use (pthread_once), and the C library runs in a
 * child only the handlers registered before its fork began: a fork whose
 * handlers were running (tidemark's own take locks) while another thread
 * made the first dump left the child with the lock held by a thread it
 * does not have, and its exit dump waited for ever (seen once in 60 forks
 * of a program with a thread dumping in a loop).  Here the first use comes
 * exactly then: from this test's own prepare handler, which the C library
 * runs after it has noted which handlers the child will run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "symbolize.h"

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cond = PTHREAD_COND_INITIALIZER;
static int held, in_fork;
static tdm__symbolizer_ref *held_ref;

/* The other thread: the process's first use of the symbolizer, kept (its
 * lock held) until the test lets it go. */
static void *first_user(void *arg)
{
    (void)arg;
    tdm__symbolizer_ref *r = tdm__symbolizer_acquire();
    pthread_mutex_lock(&held_lock);
    held_ref = r;
    held = 1;
    pthread_cond_broadcast(&held_cond);
    while (held == 1)
        pthread_cond_wait(&held_cond, &held_lock);
    pthread_mutex_unlock(&held_lock);
    if (r != NULL) {
        tdm__symbolizer_unlock();
        tdm__symbolizer_release(r);
    }
    return NULL;
}

static pthread_t user;

/* Runs inside fork(), after the C library has taken its list of handlers:
 * starts the first use and waits until it holds the symbolizer. */
static void prepare(void)
{
    if (!in_fork)
        return;
    assert_int_equal(pthread_create(&user, NULL, first_user, NULL), 0);
    pthread_mutex_lock(&held_lock);
    while (!held)
        pthread_cond_wait(&held_cond, &held_lock);
    pthread_mutex_unlock(&held_lock);
}

static void child_gets_its_own_symbolizer(void **state)
{
    (void)state;
    assert_int_equal(pthread_atfork(prepare, NULL, NULL), 0);
    in_fork = 1;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10); /* a lock held by nobody here: killed, not hung */
        tdm__symbolizer_ref *r = tdm__symbolizer_acquire();
        if (r == NULL)
            _exit(3);
        tdm__symbolizer_unlock();
        tdm__symbolizer_release(r);
        _exit(0);
    }
    in_fork = 0;
    assert_non_null(held_ref); /* (the parent's use went on) */
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pthread_mutex_lock(&held_lock);
    held = 2;
    pthread_cond_broadcast(&held_cond);
    pthread_mutex_unlock(&held_lock);
    pthread_join(user, NULL);
    if (WIFSIGNALED(status))
        fail_msg("the child was killed by signal %d (SIGALRM: it waited for the "
                 "parent thread's symbolizer lock)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(child_gets_its_own_symbolizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
