/* snapshot/stack_cfi.h: tidemark's own unwinder over the .eh_frame tables
 * (x86-64), for stack.c.
 *
 * Each frame's rule (where its caller's stack pointer, frame pointer and
 * return address are) is read once from the module's .eh_frame_hdr /
 * .eh_frame, found with glibc's _dl_find_object, and kept in a small
 * per-thread cache keyed by the address; a walk is then a cache lookup
 * and two loads per frame.  It is right through code built without frame
 * pointers, like libunwind, at a third of its cost.  What it does not
 * read (signal frames, rules given as DWARF expressions, code with no
 * .eh_frame entry, a frame whose rule leads off the stack) makes the walk
 * fail, and stack.c asks libunwind for that stack instead.
 */
#ifndef TDM_SNAPSHOT_STACK_CFI_H
#define TDM_SNAPSHOT_STACK_CFI_H

#include <stdint.h>

/* Whether this build has the walker (x86-64 with _dl_find_object). */
int tdm__cfi_available(void);

/* Walks from a frame whose registers are (pc, sp, bp), sp inside the
 * thread's stack, whose base is hi: buf gets the return addresses, innermost first (buf[0]: the
 * return address of the frame at pc), at most cap.  Returns the count, or
 * -1 when a frame could not be unwound (nothing in buf is to be used).
 * Reaching the stack's outermost frame or cap is success.  No lock, no
 * allocation but the thread's cache at its first walk. */
int tdm__cfi_walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t hi, void **buf,
                  unsigned cap);

/* Tests: how many rules this thread read from the tables (cache misses),
 * and how many of its walks ended in the frames of the walk before. */
uint64_t tdm__cfi_rules_read(void);
uint64_t tdm__cfi_walks_reused(void);

#endif
