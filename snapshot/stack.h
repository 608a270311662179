/* snapshot/stack.h: native stack capture and interning.
 *
 * Capture walks the calling thread's stack into a caller-provided array of
 * return addresses (no malloc, no stdio, no lock).  Interning maps a list of
 * addresses to a small integer id, the same id for the same list; the
 * table lives in memory mapped once at init, never in the program's heap.
 * Lookups are lock-free; inserting a stack never seen before takes a short
 * internal lock *after* the unwinding is done.
 *
 * Stack id 0 means "no stack".  Ids are dense: 1, 2, 3, ... in the order
 * stacks were first seen.
 */
#ifndef TDM_SNAPSHOT_STACK_H
#define TDM_SNAPSHOT_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

/* Deepest stack kept; deeper stacks are cut at their outermost frames. */
#define TDM_STACK_MAX_DEPTH 64

/* Prepares the unwinder (dlopens libunwind, RTLD_LOCAL) and maps the
 * intern table sized for `max_stacks` unique stacks and `max_frames` total
 * frames.  Idempotent; later calls keep the first table. */
tdm_status tdm__stack_init(size_t max_stacks, size_t max_frames);

/* Fills pcs[0..max) with return addresses, innermost first, skipping the
 * `skip` innermost frames of tidemark itself (the capture function's own
 * frame is always skipped).  Returns the depth written (0 on failure). */
unsigned tdm__stack_capture(uintptr_t *pcs, unsigned max, unsigned skip);

/* Returns the id of the stack pcs[0..depth), interning it if new; 0 when
 * depth is 0 or the table is full (counted in tdm__stack_overflows()). */
uint32_t tdm__stack_intern(const uintptr_t *pcs, unsigned depth);

/* Capture + intern in one call. */
uint32_t tdm__stack_current(unsigned skip);

/* Number of stacks interned (the largest id in use). */
uint32_t tdm__stack_count(void);
/* The frames of stack `id`: *pcs points into the table (valid until
 * tdm__stack_reset); returns the depth, 0 for unknown ids. */
unsigned tdm__stack_get(uint32_t id, const uintptr_t **pcs);
/* Stacks that could not be interned because the table was full. */
uint64_t tdm__stack_overflows(void);
/* Forgets every stack (only while nothing is recording). */
void tdm__stack_reset(void);

/* Which unwinder captures.  AUTO (the default) uses tidemark's own walker
 * of the .eh_frame tables (stack_cfi.h), libunwind for a stack that walker
 * cannot unwind, and frame pointers when libunwind is missing or gives up;
 * the others force one, for tests and benchmarks (CFI: the walker alone,
 * no stack where it fails).  TDM_NOT_AVAILABLE if the one
 * asked for is not in this build or could not be loaded (the setting is
 * then left unchanged). */
typedef enum tdm__unwinder {
    TDM__UNWIND_AUTO = 0,
    TDM__UNWIND_FRAME_POINTER = 1,
    TDM__UNWIND_LIBUNWIND = 2,
    TDM__UNWIND_CFI = 3,
} tdm__unwinder;
tdm_status tdm__stack_set_unwinder(tdm__unwinder which);

/* Registers, once (also done when the library loads), the fork handlers:
 * fork() waits for captures in flight (see stack.c). */
void tdm__stack_register_atfork(void);

/* Tests only: when set, every capture calls it from inside the part of the
 * capture that fork() waits for (it stands for a lock libunwind holds). */
extern void (*volatile tdm__stack_capture_probe)(void);
/* Tests only: called by a capture that met a pending fork, before it steps
 * out of the count; and by the fork prepare handler after its wait. */
extern void (*volatile tdm__stack_fork_wait_probe)(void);
extern void (*volatile tdm__stack_fork_prepare_probe)(void);

#endif
