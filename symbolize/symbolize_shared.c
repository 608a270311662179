/* symbolize/symbolize_shared.c: one symbolizer kept for successive dumps.
 *
 * Opening a symbolizer reads the process's maps, and the first lookups in
 * a module read (and inflate, for compressed debug files such as glibc's)
 * its symbol and line tables: most of a dump's time, paid again at every
 * dump when each made its own.  Dumps now share one: each snapshot holds a
 * reference (its frames' strings live in the symbolizer) and the last one
 * gone closes it.  A new one replaces it when the dynamic linker has
 * unloaded an object since it was made (a cached answer could name code
 * that is no longer there; objects loaded later are read on demand by the
 * symbolizer itself), and in a forked child, which forgets the parent's.
 *
 * Lock: `lock` is held from tdm__symbolizer_acquire to
 * tdm__symbolizer_unlock (the symbolizer serves one user at a time) and
 * around the reference counts.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "symbolize.h"

struct tdm__symbolizer_ref {
    tdm_symbolizer *sym;
    unsigned refs;                /* snapshots, plus 1 while current */
    unsigned long long unloads;   /* the dynamic linker's count then */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tdm__symbolizer_ref *current;

/* The child of a fork: another thread may have held the lock, and the
 * parent's symbolizer (its open files, its libdwfl state) is not ours to
 * use; forgotten, not freed. */
static void forget_in_child(void)
{
    pthread_mutex_init(&lock, NULL);
    current = NULL;
}

/* At load, before any thread can hold the lock: the C library runs in a
 * child only the handlers registered before its fork began, so one
 * registered at the first use (as this was) missed a fork that was
 * running its other handlers meanwhile, and the child kept the lock of a
 * thread it does not have (its exit dump waited for ever). */
__attribute__((constructor)) static void register_at_load(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

/* One reference fewer; the lock held. */
static void drop(tdm__symbolizer_ref *r)
{
    if (--r->refs == 0) {
        tdm__symbolizer_close(r->sym);
        free(r);
    }
}

tdm__symbolizer_ref *tdm__symbolizer_acquire(void)
{
    pthread_mutex_lock(&lock);
    unsigned long long unloads;
    tdm__dl_counts(NULL, &unloads);
    if (current != NULL && current->unloads != unloads) {
        drop(current);
        current = NULL;
    }
    if (current == NULL) {
        tdm__symbolizer_ref *r = calloc(1, sizeof *r);
        if (r == NULL || tdm__symbolizer_open(&r->sym) != TDM_OK) {
            free(r);
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        r->refs = 1;
        r->unloads = unloads;
        current = r;
    }
    current->refs++;
    return current;
}

tdm_symbolizer *tdm__symbolizer_of(const tdm__symbolizer_ref *r)
{
    return r->sym;
}

void tdm__symbolizer_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

void tdm__symbolizer_release(tdm__symbolizer_ref *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&lock);
    drop(r);
    pthread_mutex_unlock(&lock);
}

void tdm__symbolizer_forget_shared(void)
{
    pthread_mutex_lock(&lock);
    if (current != NULL)
        drop(current);
    current = NULL;
    pthread_mutex_unlock(&lock);
}
