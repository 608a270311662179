/* snapshot/stack_text.c: the table of loaded code ranges (stack_text.h). */
#define _GNU_SOURCE
#include <link.h>
#include <sys/mman.h>

#include "stack_text.h"

tdm__text_table tdm__text = {.lock = PTHREAD_MUTEX_INITIALIZER};

typedef struct text_collect {
    uintptr_t (*out)[2];
    unsigned n;
    unsigned long long adds;
} text_collect;

static int text_collect_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    text_collect *c = data;
    c->adds = info->dlpi_adds;
    for (unsigned i = 0; i < info->dlpi_phnum && c->n < TDM_TEXT_MAX; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        c->out[c->n][0] = info->dlpi_addr + ph->p_vaddr;
        c->out[c->n][1] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        c->n++;
    }
    return 0;
}

static int text_adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* every entry carries the same count */
}

/* Caller holds tdm__text.lock. */
static void text_rebuild_locked(void)
{
    text_collect c = {.out = tdm__text.scratch};
    dl_iterate_phdr(text_collect_cb, &c);
    /* Shell sort: no malloc (qsort may allocate), input is often reversed. */
    static const unsigned gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (unsigned g = 0; g < sizeof gaps / sizeof *gaps; g++) {
        for (unsigned i = gaps[g]; i < c.n; i++) {
            uintptr_t lo = c.out[i][0], hi = c.out[i][1];
            unsigned j = i;
            for (; j >= gaps[g] && c.out[j - gaps[g]][0] > lo; j -= gaps[g]) {
                c.out[j][0] = c.out[j - gaps[g]][0];
                c.out[j][1] = c.out[j - gaps[g]][1];
            }
            c.out[j][0] = lo;
            c.out[j][1] = hi;
        }
    }
    /* Release stores (not a fence: TSan has no fences) keep the odd count
     * ahead of every range a reader could see. */
    unsigned seq = atomic_load_explicit(&tdm__text.seq, memory_order_relaxed);
    atomic_store_explicit(&tdm__text.seq, seq + 1, memory_order_relaxed);
    for (unsigned i = 0; i < c.n; i++) {
        atomic_store_explicit(&tdm__text.ranges[i].lo, c.out[i][0],
                              memory_order_release);
        atomic_store_explicit(&tdm__text.ranges[i].hi, c.out[i][1],
                              memory_order_release);
    }
    atomic_store_explicit(&tdm__text.count, c.n, memory_order_release);
    atomic_store_explicit(&tdm__text.seq, seq + 2, memory_order_release);
    tdm__text.adds = c.adds;
}

/* Once, from unwinder_setup.  Without memory the walker checks nothing. */
void tdm__text_setup(void)
{
    size_t bytes = TDM_TEXT_MAX * (sizeof(tdm__text_range) + 2 * sizeof(uintptr_t));
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED)
        return;
    pthread_mutex_lock(&tdm__text.lock);
    tdm__text.scratch = (uintptr_t(*)[2])((char *)map +
                                     TDM_TEXT_MAX * sizeof(tdm__text_range));
    tdm__text.ranges = map;
    text_rebuild_locked();
    pthread_mutex_unlock(&tdm__text.lock);
}

__attribute__((noinline)) int tdm__text_refresh(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(text_adds_cb, &adds);
    int rebuilt = 0;
    pthread_mutex_lock(&tdm__text.lock);
    if (tdm__text.ranges && adds != tdm__text.adds) {
        text_rebuild_locked();
        rebuilt = 1;
    }
    pthread_mutex_unlock(&tdm__text.lock);
    return rebuilt;
}

