/* base/seqlock.h: the memory orders of tidemark's seqlocks (the event
 * ring's slots, the clock's anchor).
 *
 * The classic C11 seqlock writes data with relaxed stores behind a release
 * fence and reads it with relaxed loads before an acquire fence.
 * ThreadSanitizer does not model standalone fences (gcc warns, -Werror
 * fails), so TSan builds make each data store a release and each data load
 * an acquire instead: stronger, slower, and checkable. */
#ifndef TDM_BASE_SEQLOCK_H
#define TDM_BASE_SEQLOCK_H

#include <stdatomic.h>

#if defined(__SANITIZE_THREAD__)
#define TDM_SEQ_DATA_STORE memory_order_release
#define TDM_SEQ_DATA_LOAD memory_order_acquire
#define TDM_SEQ_FENCE_RELEASE() ((void)0)
#define TDM_SEQ_FENCE_ACQUIRE() ((void)0)
#else
#define TDM_SEQ_DATA_STORE memory_order_relaxed
#define TDM_SEQ_DATA_LOAD memory_order_relaxed
#define TDM_SEQ_FENCE_RELEASE() atomic_thread_fence(memory_order_release)
#define TDM_SEQ_FENCE_ACQUIRE() atomic_thread_fence(memory_order_acquire)
#endif

#endif
