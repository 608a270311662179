/* tests/unit/inline_lib.c: a library loaded with dlopen whose one exported
 * function returns an address inside code inlined into it, for
 * test_symbolize_inline: the inline chain of a library's code, not only of
 * the program's own. */
#include <stdint.h>

uintptr_t inline_lib_probe(int x);

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static inline __attribute__((always_inline)) uintptr_t inline_lib_inner(int x)
{
    __asm__ volatile("" ::"r"(x));
    uintptr_t pc;
    __asm__ volatile("lea 0(%%rip), %0" : "=r"(pc));
    KEEP_FRAME();
    return pc + 1; /* as a return address: the symbolizer looks at pc - 1 */
}

__attribute__((visibility("default"), noinline)) uintptr_t inline_lib_probe(int x)
{
    uintptr_t pc = inline_lib_inner(x);
    KEEP_FRAME();
    return pc;
}
