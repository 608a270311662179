/* tests/unit/test_stack_cfi.c: tidemark's .eh_frame walker
 * (snapshot/stack_cfi.c) gives exactly libunwind's frames.
 *
 * The same call site is captured with the walker alone and with libunwind
 * alone: a deep recursion, a frame whose CFA is rbp-based (alloca), C
 * library code built without frame pointers (qsort calling back), another
 * thread; the second capture of a site reads no rule from the tables (the
 * cache answers); a capture whose outer frames are those of the capture
 * before ends in them (no rule looked up for them) and is still
 * libunwind's, and one whose caller changed at the same depth walks past
 * the frames it no longer shares, and a walk cut at its cap stands in for
 * the next to the same cap; inside a signal handler the walker refuses the signal
 * frame and the default unwinder gets libunwind's whole stack, through
 * the handler into the interrupted code. */
#define _GNU_SOURCE
#include <alloca.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "stack.h"
#include "stack_cfi.h"

#define NOINLINE __attribute__((noinline, noclone))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

typedef struct two_stacks {
    uintptr_t cfi[TDM_STACK_MAX_DEPTH], unw[TDM_STACK_MAX_DEPTH];
    unsigned n_cfi, n_unw;
} two_stacks;

static int have_both(void)
{
    if (tdm__stack_set_unwinder(TDM__UNWIND_CFI) != TDM_OK ||
        tdm__stack_set_unwinder(TDM__UNWIND_LIBUNWIND) != TDM_OK)
        return 0;
    return tdm__stack_set_unwinder(TDM__UNWIND_AUTO) == TDM_OK;
}

#define SKIP_IF_MISSING()                                                      \
    do {                                                                       \
        if (!have_both())                                                      \
            skip();                                                            \
    } while (0)

/* Both captures skip this function's frame: they start at its caller. */
static NOINLINE void capture_both(two_stacks *s)
{
    tdm__stack_set_unwinder(TDM__UNWIND_CFI);
    s->n_cfi = tdm__stack_capture(s->cfi, TDM_STACK_MAX_DEPTH, 1);
    tdm__stack_set_unwinder(TDM__UNWIND_LIBUNWIND);
    s->n_unw = tdm__stack_capture(s->unw, TDM_STACK_MAX_DEPTH, 1);
    tdm__stack_set_unwinder(TDM__UNWIND_AUTO);
    KEEP_FRAME();
}

static void assert_same(const two_stacks *s, unsigned at_least)
{
    assert_true(s->n_cfi >= at_least);
    assert_int_equal(s->n_cfi, s->n_unw);
    assert_memory_equal(s->cfi, s->unw, s->n_cfi * sizeof s->cfi[0]);
}

static NOINLINE void recurse(int depth, two_stacks *s)
{
    if (depth > 0)
        recurse(depth - 1, s);
    else
        capture_both(s);
    KEEP_FRAME();
}

static void deep_recursion(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    two_stacks s;
    recurse(40, &s);
    assert_same(&s, 40);
}

static NOINLINE void with_alloca(size_t n, two_stacks *s)
{
    volatile char *p = alloca(n); /* the CFA is rbp-based below here */
    p[0] = 1;
    p[n - 1] = 2;
    capture_both(s);
    KEEP_FRAME();
}

static void rbp_based_frame(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    two_stacks s;
    size_t n = 100 + (size_t)(rand() % 1000);
    with_alloca(n, &s);
    assert_same(&s, 3);
}

static two_stacks in_qsort;
static int captured_in_qsort;

static int compare(const void *a, const void *b)
{
    if (!captured_in_qsort++)
        capture_both(&in_qsort);
    return *(const int *)a - *(const int *)b;
}

static void through_the_c_library(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    captured_in_qsort = 0;
    qsort(v, 64, sizeof v[0], compare);
    assert_same(&in_qsort, 4);
}

static void *thread_main(void *arg)
{
    recurse(10, arg);
    return NULL;
}

static void another_thread(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    two_stacks s;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_main, &s), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_same(&s, 12);
}

static NOINLINE unsigned capture_cfi(uintptr_t *pcs)
{
    tdm__stack_set_unwinder(TDM__UNWIND_CFI);
    unsigned n = tdm__stack_capture(pcs, TDM_STACK_MAX_DEPTH, 0);
    tdm__stack_set_unwinder(TDM__UNWIND_AUTO);
    KEEP_FRAME();
    return n;
}

static void second_capture_reads_no_rule(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    uintptr_t a[TDM_STACK_MAX_DEPTH], b[TDM_STACK_MAX_DEPTH];
    unsigned n = 0;
    uint64_t before = 0;
    uintptr_t *into[2] = {a, b};
    /* One call site (a volatile count: the loop is not unrolled). */
    for (volatile int i = 0; i < 2; i++) {
        before = tdm__cfi_rules_read();
        n = capture_cfi(into[i]);
    }
    assert_true(n > 3);
    assert_int_equal(tdm__cfi_rules_read(), before);
    assert_memory_equal(a, b, n * sizeof a[0]);
}

static NOINLINE void capture_two_sites(two_stacks *a, two_stacks *b)
{
    capture_both(a);
    capture_both(b);
    KEEP_FRAME();
}

static NOINLINE void recurse_two(int depth, two_stacks *a, two_stacks *b)
{
    if (depth > 0)
        recurse_two(depth - 1, a, b);
    else
        capture_two_sites(a, b);
    KEEP_FRAME();
}

static void outer_frames_of_the_last_walk_are_reused(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    two_stacks a, b;
    uint64_t before = tdm__cfi_walks_reused();
    recurse_two(30, &a, &b);
    assert_same(&a, 30);
    assert_same(&b, 30);
    /* The second's innermost frame returns elsewhere; the 30 outside it
     * are the first's, taken without a lookup. */
    assert_true(a.cfi[0] != b.cfi[0]);
    assert_memory_equal(a.cfi + 1, b.cfi + 1, (a.n_cfi - 1) * sizeof a.cfi[0]);
    assert_true(tdm__cfi_walks_reused() > before);
}

/* Past the cap: a walk cut there stands in for the next one, which it
 * fills to the same cap. */
static void a_walk_cut_at_its_cap_is_reused(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    two_stacks a, b;
    uint64_t before = tdm__cfi_walks_reused();
    recurse_two(TDM_STACK_MAX_DEPTH + 40, &a, &b);
    assert_same(&a, TDM_STACK_MAX_DEPTH);
    assert_same(&b, TDM_STACK_MAX_DEPTH);
    assert_memory_equal(a.cfi + 1, b.cfi + 1, (TDM_STACK_MAX_DEPTH - 1) * sizeof a.cfi[0]);
    assert_true(tdm__cfi_walks_reused() > before);
}

/* Two callers alike but for a constant: their frames lie at the same
 * depths, and only the return address into them differs. */
static volatile int sink;
static NOINLINE void caller_one(two_stacks *s)
{
    sink = 1;
    recurse(8, s);
    KEEP_FRAME();
}

static NOINLINE void caller_two(two_stacks *s)
{
    sink = 2;
    recurse(8, s);
    KEEP_FRAME();
}

static void a_changed_caller_is_walked_again(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    two_stacks one, two;
    for (volatile int i = 0; i < 2; i++) { /* one call site each, twice */
        caller_one(&one);
        caller_two(&two);
        assert_same(&one, 10);
        assert_same(&two, 10);
    }
    /* The frames inside the callers are the same; the callers' are not. */
    assert_memory_equal(one.cfi, two.cfi, 9 * sizeof one.cfi[0]);
    int differ = 0;
    for (unsigned k = 9; k < one.n_cfi && k < two.n_cfi; k++)
        differ |= one.cfi[k] != two.cfi[k];
    assert_true(differ);
}

static two_stacks in_handler;
static uintptr_t auto_in_handler[TDM_STACK_MAX_DEPTH];
static unsigned n_auto_in_handler;

static void handler(int sig)
{
    (void)sig;
    capture_both(&in_handler);
    n_auto_in_handler = tdm__stack_capture(auto_in_handler, TDM_STACK_MAX_DEPTH, 0);
    KEEP_FRAME();
}

static NOINLINE void raise_here(void)
{
    raise(SIGUSR1);
    KEEP_FRAME();
}

static void signal_frame_goes_to_libunwind(void **state)
{
    (void)state;
    SKIP_IF_MISSING();
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    raise_here();
    sigaction(SIGUSR1, &old, NULL);
    /* The walker alone stops at the signal frame and gives nothing... */
    assert_int_equal(in_handler.n_cfi, 0);
    assert_true(in_handler.n_unw > 4);
    /* ...and the default capture is libunwind's, through the handler. */
    assert_int_equal(n_auto_in_handler, in_handler.n_unw);
    assert_memory_equal(auto_in_handler + 1, in_handler.unw + 1,
                        (n_auto_in_handler - 1) * sizeof auto_in_handler[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deep_recursion),
        cmocka_unit_test(rbp_based_frame),
        cmocka_unit_test(through_the_c_library),
        cmocka_unit_test(another_thread),
        cmocka_unit_test(second_capture_reads_no_rule),
        cmocka_unit_test(outer_frames_of_the_last_walk_are_reused),
        cmocka_unit_test(a_changed_caller_is_walked_again),
        cmocka_unit_test(a_walk_cut_at_its_cap_is_reused),
        cmocka_unit_test(signal_frame_goes_to_libunwind),
    };
    if (tdm__stack_init(4096, 65536) != TDM_OK)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
