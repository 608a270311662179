/* tests/python/pyframes_cthread.c: a thread that never ran Python code
 * allocating through tidemark, started from Python through ctypes: its
 * events must carry native frames only. */
#include <pthread.h>
#include <stddef.h>

#include "tidemark.h"

__attribute__((noinline)) static void *c_thread_alloc(void *arg)
{
    void *p = NULL;
    if (tdm_malloc(&p, *(const size_t *)arg, 0, 0) == TDM_OK)
        tdm_free(p);
    __asm__ volatile("" ::: "memory");
    return NULL;
}

__attribute__((visibility("default"))) int pyframes_run_c_thread(size_t size);

int pyframes_run_c_thread(size_t size)
{
    pthread_t t;
    if (pthread_create(&t, NULL, c_thread_alloc, &size) != 0)
        return -1;
    return pthread_join(t, NULL);
}
