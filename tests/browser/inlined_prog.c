/* tests/browser/inlined_prog.c: one allocation made from code the compiler
 * inlined, so that its stack holds a frame of kind "inlined"
 * (view_test.js checks the page tags it).  grab_inlined is always inlined
 * into make_buffer, whose frame stays a real one; the file is compiled
 * with -O2 -g whatever the build type.  Recorded with
 * TIDEMARK_CONF=dump=FILE (dumped at exit). */
#if !defined(__OPTIMIZE__)
#pragma GCC optimize("O2")
#endif
#include <stddef.h>

#include "tidemark.h"

static inline __attribute__((always_inline)) void *grab_inlined(size_t bytes)
{
    void *p = NULL;
    if (tdm_malloc(&p, bytes, 0, 0) != TDM_OK)
        return NULL;
    __asm__ volatile("" ::: "memory"); /* the call stays inside this code */
    return p;
}

__attribute__((noinline, noclone)) void *make_buffer(size_t bytes);
void *make_buffer(size_t bytes)
{
    void *p = grab_inlined(bytes);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    return make_buffer(1u << 20) ? 0 : 1;
}
