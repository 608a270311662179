/* tests/unit/test_symbolize_inline.c: a return address inside inlined code
 * gives its whole inline chain.
 *
 * A capture sits in an always_inline function, inlined into another
 * always_inline function, inlined into a real one: the return address
 * resolves to three frames with the same pc, innermost first, the two
 * inlined ones of kind INLINED with the line of the capture and of the
 * inner call, then the real function (NATIVE) with the line where it calls
 * the outer inlined function; the frame of its caller is one native frame.
 * The symbolizer's own index gives exactly what libdw's dwarf_getscopes
 * gives.  A dump of an allocation made there holds the chain in its stack,
 * inlined frames right before the native frame, so the stack is deeper
 * than what was captured.
 *
 * Inlining is what optimised builds do: the file is compiled with -O2
 * even in a build that optimises nothing. */
#if !defined(__OPTIMIZE__)
#pragma GCC optimize("O2")
#endif
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"
#include "recorder.h"
#include "stack.h"
#include "symbolize.h"

#define NOINLINE __attribute__((noinline, noclone, visibility("default")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

unsigned outer_real(uintptr_t *pcs, unsigned max, unsigned *lines);
void *outer_alloc(unsigned *lines);

/* Keep each call and its __LINE__ on one line. */
ALWAYS_INLINE unsigned inner_inlined(uintptr_t *pcs, unsigned max, unsigned *line)
{
    unsigned n = tdm__stack_capture(pcs, max, 0); *line = __LINE__;
    KEEP_FRAME();
    return n;
}

ALWAYS_INLINE unsigned middle_inlined(uintptr_t *pcs, unsigned max, unsigned *lines)
{
    unsigned n = inner_inlined(pcs, max, &lines[0]); lines[1] = __LINE__;
    KEEP_FRAME();
    return n;
}

NOINLINE unsigned outer_real(uintptr_t *pcs, unsigned max, unsigned *lines)
{
    unsigned n = middle_inlined(pcs, max, lines); lines[2] = __LINE__;
    KEEP_FRAME();
    return n;
}

static int ends_with(const char *s, const char *tail)
{
    size_t ls = strlen(s), lt = strlen(tail);
    return ls >= lt && strcmp(s + ls - lt, tail) == 0;
}

static void inline_chain_is_innermost_first(void **state)
{
    (void)state;
    assert_int_equal(tdm__stack_init(1024, 65536), TDM_OK);
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    uintptr_t pcs[8];
    unsigned lines[3] = {0};
    assert_true(outer_real(pcs, 8, lines) >= 2);
    const tdm_symbol *f;
    size_t n = tdm__symbolize_frames(s, pcs[0], &f);
    assert_int_equal(n, 3);
    const char *want[] = {"inner_inlined", "middle_inlined", "outer_real"};
    const uint8_t kind[] = {TDM_FRAME_INLINED, TDM_FRAME_INLINED, TDM_FRAME_NATIVE};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(f[i].function, want[i]);
        assert_int_equal(f[i].line, lines[i]);
        assert_int_equal(f[i].kind, kind[i]);
        assert_true(ends_with(f[i].file, "tests/unit/test_symbolize_inline.c"));
        assert_ptr_equal(f[i].module, f[0].module);
    }
    /* tdm__symbolize gives the innermost frame. */
    tdm_symbol one;
    tdm__symbolize(s, pcs[0], &one);
    assert_ptr_equal(one.function, f[0].function);
    assert_int_equal(one.line, lines[0]);
    /* The caller of outer_real: this test, one native frame. */
    n = tdm__symbolize_frames(s, pcs[1], &f);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].function, "inline_chain_is_innermost_first");
    assert_int_equal(f[0].kind, TDM_FRAME_NATIVE);
    tdm__symbolizer_close(s);
}

/* A symbolizer opened while another is open gives a loaded library's
 * frames, inline chains included, as the first does: the first one's
 * reading of the library (libdw maps the file) is no module of the
 * process.  The out-of-memory line opens one while the dump's shared one
 * is open; bench/symbolize opens two. */
static void second_symbolizer_reads_a_library(void **state)
{
    (void)state;
    void *lib = dlopen(TDM_INLINE_LIB, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    uintptr_t (*probe)(int) = (uintptr_t (*)(int))dlsym(lib, "inline_lib_probe");
    assert_non_null(probe);
    uintptr_t pc = probe(7);
    tdm_symbolizer *s[3];
    for (int i = 0; i < 3; i++) {
        /* Each opened while the ones before it are open and have read it. */
        assert_int_equal(tdm__symbolizer_open(&s[i]), TDM_OK);
        const tdm_symbol *f;
        size_t n = tdm__symbolize_frames(s[i], pc, &f);
        if (n != 2 || strcmp(f[0].function, "inline_lib_inner") != 0 ||
            strcmp(f[1].function, "inline_lib_probe") != 0 || !ends_with(f[1].module, "inline_lib.so"))
            fail_msg("symbolizer %d of 3: %zu frames, innermost %s, outermost %s in '%s'; want "
                     "inline_lib_inner, inline_lib_probe in libtdm_inline_lib.so",
                     i + 1, n, f[0].function, f[n - 1].function, f[n - 1].module);
    }
    for (int i = 2; i >= 0; i--)
        tdm__symbolizer_close(s[i]);
    dlclose(lib);
}

/* The per-unit index and libdw's dwarf_getscopes agree on every frame of
 * this program's own stacks (inlined or not). */
static void index_matches_dwarf_getscopes(void **state)
{
    (void)state;
    tdm_symbolizer *fast, *ref;
    assert_int_equal(tdm__symbolizer_open(&fast), TDM_OK);
    assert_int_equal(tdm__symbolizer_open(&ref), TDM_OK);
    tdm__symbolizer_use_reference(ref, 1);
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    unsigned lines[3];
    unsigned depth = outer_real(pcs, TDM_STACK_MAX_DEPTH, lines);
    /* And every 16th byte of outer_real and of this function. */
    uintptr_t extra[64];
    unsigned nextra = 0;
    for (unsigned k = 1; k <= 32; k++) {
        extra[nextra++] = (uintptr_t)&outer_real + 4 * k;
        extra[nextra++] = (uintptr_t)&index_matches_dwarf_getscopes + 4 * k;
    }
    for (unsigned i = 0; i < depth + nextra; i++) {
        uintptr_t pc = i < depth ? pcs[i] : extra[i - depth];
        const tdm_symbol *a, *b;
        size_t na = tdm__symbolize_frames(fast, pc, &a);
        size_t nb = tdm__symbolize_frames(ref, pc, &b);
        if (na != nb)
            fail_msg("pc %#lx (%s): %zu frames, dwarf_getscopes %zu", (unsigned long)pc,
                     a[0].function, na, nb);
        for (size_t k = 0; k < na; k++) {
            assert_string_equal(a[k].function, b[k].function);
            assert_string_equal(a[k].file, b[k].file);
            assert_int_equal(a[k].line, b[k].line);
            assert_int_equal(a[k].kind, b[k].kind);
        }
    }
    tdm__symbolizer_close(fast);
    tdm__symbolizer_close(ref);
}

ALWAYS_INLINE void *alloc_inlined(unsigned *line)
{
    void *p = NULL;
    assert_int_equal(tdm_malloc(&p, 4096, 0, 0), TDM_OK); *line = __LINE__;
    KEEP_FRAME();
    return p;
}

NOINLINE void *outer_alloc(unsigned *lines)
{
    void *p = alloc_inlined(&lines[0]); lines[1] = __LINE__;
    KEEP_FRAME();
    return p;
}

static void dump_stack_holds_the_chain(void **state)
{
    (void)state;
    tdm__alloc_reset_for_tests();
    tdm__alloc_config cfg;
    tdm__alloc_config_defaults(&cfg);
    strcpy(cfg.mode, "passthrough");
    cfg.device_capacity = 64u << 20;
    cfg.device_count = 1;
    assert_int_equal(tdm__alloc_configure(&cfg), TDM_OK);
    tdm_history_options o;
    tdm_history_options_init(&o);
    o.clear_history = 1;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    unsigned lines[2];
    void *p = outer_alloc(lines);
    tdm_snap *snap = NULL;
    assert_int_equal(tdm__rec_build_snapshot(&snap), TDM_OK);
    const tdm_event *alloc = NULL;
    for (size_t i = 0; i < snap->event_count; i++)
        if (snap->events[i].action == TDM_ACTION_ALLOC)
            alloc = &snap->events[i];
    assert_non_null(alloc);
    const tdm_snap_stack *st = &snap->stacks[alloc->stack_id];
    /* Find alloc_inlined; outer_alloc follows it, at the same pc. */
    uint32_t k = 0;
    while (k < st->depth && strcmp(snap->frames[st->frames[k]].function, "alloc_inlined"))
        k++;
    assert_true(k + 1 < st->depth);
    const tdm_snap_frame *inl = &snap->frames[st->frames[k]];
    const tdm_snap_frame *nat = &snap->frames[st->frames[k + 1]];
    assert_int_equal(inl->kind, TDM_FRAME_INLINED);
    assert_int_equal(inl->line, lines[0]);
    assert_string_equal(nat->function, "outer_alloc");
    assert_int_equal(nat->kind, TDM_FRAME_NATIVE);
    assert_int_equal(nat->line, lines[1]);
    assert_int_equal(inl->pc, nat->pc);
    /* The same frame index wherever the pc appears: one entry per frame. */
    for (size_t i = 0; i < snap->frame_count; i++)
        if (i != st->frames[k] && snap->frames[i].pc == inl->pc)
            assert_int_equal(i, st->frames[k + 1]);
    /* Deeper than captured: one pc gave two frames. */
    const uintptr_t *pcs;
    unsigned captured = tdm__stack_get(alloc->stack_id, &pcs);
    assert_true(st->depth >= captured + 1);
    tdm__rec_snapshot_free(snap);
    assert_int_equal(tdm_free(p), TDM_OK);
    o.enabled = TDM_RECORD_OFF;
    assert_int_equal(tdm_record_memory_history(&o), TDM_OK);
    tdm__alloc_reset_for_tests();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inline_chain_is_innermost_first),
        cmocka_unit_test(second_symbolizer_reads_a_library),
        cmocka_unit_test(index_matches_dwarf_getscopes),
        cmocka_unit_test(dump_stack_holds_the_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
