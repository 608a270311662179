/* snapshot/stack_text.h: where code is loaded, for the frame-pointer
 * walker of stack.c. */
#ifndef TDM_SNAPSHOT_STACK_TEXT_H
#define TDM_SNAPSHOT_STACK_TEXT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "visibility.h"

/* The executable segments of every loaded object, sorted, so that the
 * walker can stop at the first "return address" that points at no code:
 * that is what a frame pointer chain looks like once it has run through a
 * frame built without one (its %rbp held data).  Without the check such
 * junk would make every capture from that thread a new stack.
 *
 * Built at setup with dl_iterate_phdr (no malloc) into mmap'd memory and
 * rebuilt when a return address is found nowhere and the dynamic linker
 * has loaded something since.  Readers take no lock: a sequence count
 * (odd while a rebuild writes) tells them to look again, and every field
 * they read is atomic. */
#define TDM_TEXT_MAX 4096u

typedef struct tdm__text_range {
    _Atomic uintptr_t lo, hi; /* [lo, hi), bytes */
} tdm__text_range;

typedef struct tdm__text_table {
    pthread_mutex_t lock;   /* rebuilds */
    _Atomic unsigned seq;   /* odd while a rebuild rewrites ranges */
    _Atomic unsigned count; /* ranges in use */
    tdm__text_range *ranges;     /* TDM_TEXT_MAX, sorted by lo; NULL: no checking */
    uintptr_t (*scratch)[2];/* TDM_TEXT_MAX pairs, rebuild workspace (lock) */
    unsigned long long adds;/* dlpi_adds of the last rebuild (lock) */
} tdm__text_table;
extern tdm__text_table tdm__text TDM__HIDDEN;

/* Maps the table and fills it; once, from the unwinder's setup. */
void tdm__text_setup(void);
/* Rebuilds if the dynamic linker loaded anything since the last build;
 * returns whether it did. */
int tdm__text_refresh(void);

/* Whether pc lies in loaded code; [*lo, *hi) gets the range that held it,
 * which the caller tries first for the next frame. */
static inline __attribute__((always_inline)) int
tdm__text_find(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
    if (!tdm__text.ranges)
        return 1;
    for (;;) {
        unsigned seq = atomic_load_explicit(&tdm__text.seq, memory_order_acquire);
        if (seq & 1)
            return 1; /* mid-rebuild (maybe under us, in a signal): accept */
        /* Acquire loads keep the second look at seq after them (x86: plain
         * moves). */
        unsigned a = 0, b = atomic_load_explicit(&tdm__text.count,
                                                 memory_order_acquire);
        while (a < b) { /* first range with lo > pc */
            unsigned m = (a + b) / 2;
            if (atomic_load_explicit(&tdm__text.ranges[m].lo,
                                     memory_order_acquire) <= pc)
                a = m + 1;
            else
                b = m;
        }
        uintptr_t rlo = 0, rhi = 0;
        if (a > 0) {
            rlo = atomic_load_explicit(&tdm__text.ranges[a - 1].lo,
                                       memory_order_acquire);
            rhi = atomic_load_explicit(&tdm__text.ranges[a - 1].hi,
                                       memory_order_acquire);
        }
        if (atomic_load_explicit(&tdm__text.seq, memory_order_relaxed) != seq)
            continue;
        *lo = rlo;
        *hi = rhi;
        return pc >= rlo && pc < rhi;
    }
}


#endif
