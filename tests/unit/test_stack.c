/* tests/unit/test_stack.c: native stack capture and interning.
 *
 * Capture: the frames come back innermost first, start at the caller of
 * the capture, honour `skip`, and a deep recursion is cut at
 * TDM_STACK_MAX_DEPTH keeping the innermost frames; with each unwinder
 * (test_stack_cfi.c compares the .eh_frame walker with libunwind).
 * Interning: the same call site gets the same id and different sites
 * differ; ids are dense from 1; four threads interning at once agree on
 * every id; a full table returns 0 and counts; reset forgets.  Steady-state
 * capture and intern call no malloc (checked by counting malloc calls, in
 * builds without a sanitizer, which owns malloc there).  fork() waits
 * for another thread's capture to end, so a child never inherits a lock
 * taken inside one.
 *
 * Frames are checked with dladdr, which needs the test's functions in the
 * dynamic symbol table: they are global (and the test links -rdynamic). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stack.h"
#include "child_watch.h"

/* Table sizes for this process (the first tdm__stack_init wins). */
#define TEST_MAX_STACKS 4096u
#define TEST_MAX_FRAMES 65536u

/* Not inlined, not cloned under another name, and in the dynamic symbol
 * table (the build's default visibility is hidden) so dladdr finds it. */
#define NOINLINE __attribute__((noinline, noclone, visibility("default")))
/* Keeps the preceding call from being a tail call, so frames stay put. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* ---- counting malloc ----------------------------------------------------- */

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNT_MALLOC 1
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
static __thread unsigned long thread_allocs;
void *malloc(size_t size)
{
    thread_allocs++;
    return __libc_malloc(size);
}
void *calloc(size_t n, size_t size)
{
    thread_allocs++;
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t size)
{
    thread_allocs++;
    return __libc_realloc(p, size);
}
#endif

/* ---- functions whose frames the tests look for --------------------------- */

uint32_t site_a(void);
uint32_t site_b(void);
unsigned recurse(unsigned d, uintptr_t *pcs, unsigned max, unsigned skip);
uint32_t recurse_current(unsigned d);
unsigned capture_here(uintptr_t *pcs, unsigned max, unsigned skip);
unsigned capture_via_inner(uintptr_t *pcs, unsigned max, unsigned skip);

NOINLINE uint32_t site_a(void)
{
    uint32_t id = tdm__stack_current(0);
    KEEP_FRAME();
    return id;
}

NOINLINE uint32_t site_b(void)
{
    uint32_t id = tdm__stack_current(0);
    KEEP_FRAME();
    return id;
}

NOINLINE unsigned recurse(unsigned d, uintptr_t *pcs, unsigned max,
                          unsigned skip)
{
    unsigned n = d ? recurse(d - 1, pcs, max, skip)
                   : tdm__stack_capture(pcs, max, skip);
    KEEP_FRAME();
    return n;
}

NOINLINE uint32_t recurse_current(unsigned d)
{
    uint32_t id = d ? recurse_current(d - 1) : tdm__stack_current(0);
    KEEP_FRAME();
    return id;
}

NOINLINE unsigned capture_here(uintptr_t *pcs, unsigned max, unsigned skip)
{
    unsigned n = tdm__stack_capture(pcs, max, skip);
    KEEP_FRAME();
    return n;
}

NOINLINE unsigned capture_via_inner(uintptr_t *pcs, unsigned max,
                                    unsigned skip)
{
    unsigned n = capture_here(pcs, max, skip);
    KEEP_FRAME();
    return n;
}

/* The dynamic symbol holding the call just before return address pc. */
static const char *fn_of(uintptr_t pc)
{
    Dl_info info;
    if (!dladdr((void *)(pc - 1), &info) || !info.dli_sname)
        return "??";
    return info.dli_sname;
}

/* ---- setup: one group per unwinder --------------------------------------- */

typedef struct unwinder_case {
    tdm__unwinder mode;
    int available; /* set by the setup: this unwinder can be used here */
} unwinder_case;

static unwinder_case modes[] = {{TDM__UNWIND_AUTO, 0},
                                {TDM__UNWIND_FRAME_POINTER, 0},
                                {TDM__UNWIND_LIBUNWIND, 0},
                                {TDM__UNWIND_CFI, 0}};

static int use_unwinder(void **state)
{
    unwinder_case *c = *state;
    assert_int_equal(tdm__stack_init(TEST_MAX_STACKS, TEST_MAX_FRAMES),
                     TDM_OK);
    tdm__stack_reset();
    c->available = tdm__stack_set_unwinder(c->mode) == TDM_OK;
    return 0;
}

static int back_to_auto(void **state)
{
    (void)state;
    assert_int_equal(tdm__stack_set_unwinder(TDM__UNWIND_AUTO), TDM_OK);
    tdm__stack_reset();
    return 0;
}

/* libunwind may be missing on this machine: those cases are skipped. */
#define REQUIRE_UNWINDER(state)                                                \
    do {                                                                       \
        if (!((unwinder_case *)*(state))->available)                           \
            skip();                                                            \
    } while (0)

/* ---- tests --------------------------------------------------------------- */

static void intern_before_init_is_zero(void **state)
{
    (void)state;
    uintptr_t pcs[2] = {0x1234, 0x5678};
    assert_int_equal(tdm__stack_intern(pcs, 2), 0);
    assert_int_equal(tdm__stack_count(), 0);
    assert_int_equal(tdm__stack_init(0, 10), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__stack_init(10, 0), TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__stack_set_unwinder((tdm__unwinder)7),
                     TDM_INVALID_ARGUMENT);
}

static void frames_start_at_caller(void **state)
{
    REQUIRE_UNWINDER(state);
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    unsigned n = capture_via_inner(pcs, TDM_STACK_MAX_DEPTH, 0);
    /* capture_here, capture_via_inner, this test, cmocka's runner... */
    assert_true(n >= 4);
    assert_string_equal(fn_of(pcs[0]), "capture_here");
    assert_string_equal(fn_of(pcs[1]), "capture_via_inner");

    uintptr_t skipped[TDM_STACK_MAX_DEPTH];
    unsigned m = capture_via_inner(skipped, TDM_STACK_MAX_DEPTH, 1);
    assert_int_equal(m, n - 1);
    assert_string_equal(fn_of(skipped[0]), "capture_via_inner");
    /* The same stack less its innermost frame, except where this test
     * made the two calls from different lines. */
    assert_true(skipped[0] == pcs[1]);
    assert_true(skipped[1] != pcs[2]);
    assert_memory_equal(skipped + 2, pcs + 3, (m - 2) * sizeof *pcs);

    /* max is honoured, innermost frames kept. */
    uintptr_t two[2];
    assert_int_equal(capture_via_inner(two, 2, 0), 2);
    assert_string_equal(fn_of(two[0]), "capture_here");
    assert_string_equal(fn_of(two[1]), "capture_via_inner");
    assert_int_equal(capture_via_inner(two, 0, 0), 0);
}

static void recursion_is_counted_exactly(void **state)
{
    REQUIRE_UNWINDER(state);
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    /* recurse(10) .. recurse(0): 11 frames, then this function's. */
    unsigned n = recurse(10, pcs, TDM_STACK_MAX_DEPTH, 0);
    assert_true(n > 11);
    for (unsigned i = 0; i <= 10; i++)
        assert_string_equal(fn_of(pcs[i]), "recurse");
    assert_string_not_equal(fn_of(pcs[11]), "recurse");
    /* The innermost frame is the capture's call site, the others are the
     * recursive call's return address: the same for every level. */
    assert_true(pcs[0] != pcs[1]);
    for (unsigned i = 2; i <= 10; i++)
        assert_true(pcs[i] == pcs[1]);
}

static void deep_recursion_is_cut(void **state)
{
    REQUIRE_UNWINDER(state);
    uintptr_t pcs[TDM_STACK_MAX_DEPTH + 8];
    /* Asking for more than the maximum still gets the maximum. */
    unsigned n = recurse(200, pcs, TDM_STACK_MAX_DEPTH + 8, 0);
    assert_int_equal(n, TDM_STACK_MAX_DEPTH);
    for (unsigned i = 0; i < n; i++)
        assert_string_equal(fn_of(pcs[i]), "recurse");
    uintptr_t innermost_site = pcs[0];

    /* Skipping cuts the same number of frames at the inner end. */
    n = recurse(200, pcs, TDM_STACK_MAX_DEPTH, 5);
    assert_int_equal(n, TDM_STACK_MAX_DEPTH);
    assert_true(pcs[0] != innermost_site);

    /* And it interns at full depth. */
    uint32_t id = recurse_current(200);
    assert_int_not_equal(id, 0);
    const uintptr_t *got;
    assert_int_equal(tdm__stack_get(id, &got), TDM_STACK_MAX_DEPTH);
    for (unsigned i = 0; i < TDM_STACK_MAX_DEPTH; i++)
        assert_string_equal(fn_of(got[i]), "recurse_current");
}

static void same_site_same_id(void **state)
{
    REQUIRE_UNWINDER(state);
    uint32_t a[3], b[3];
#pragma GCC unroll 1 /* one call site per function, however often called */
    for (int i = 0; i < 3; i++) {
        a[i] = site_a();
        b[i] = site_b();
    }
    assert_int_not_equal(a[0], 0);
    assert_int_not_equal(b[0], 0);
    assert_int_not_equal(a[0], b[0]);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(a[i], a[0]);
        assert_int_equal(b[i], b[0]);
    }
    /* Dense from 1 in the order first seen (the table was just reset). */
    assert_int_equal(a[0], 1);
    assert_int_equal(b[0], 2);
    assert_int_equal(tdm__stack_count(), 2);

    const uintptr_t *pa, *pb;
    unsigned na = tdm__stack_get(a[0], &pa), nb = tdm__stack_get(b[0], &pb);
    assert_true(na >= 3);
    assert_int_equal(na, nb);
    assert_string_equal(fn_of(pa[0]), "site_a");
    assert_string_equal(fn_of(pb[0]), "site_b");
    /* Both were called from the same loop, one line apart. */
    assert_true(pa[1] != pb[1]);
    assert_memory_equal(pa + 2, pb + 2, (na - 2) * sizeof *pa);

    /* Different depths of the same function are different stacks; the
     * same depth from the same call site is the same. */
    static const unsigned depths[4] = {3, 4, 3, 4};
    uint32_t r[4];
#pragma GCC unroll 1 /* one call site, not four */
    for (int i = 0; i < 4; i++)
        r[i] = recurse_current(depths[i]);
    assert_int_not_equal(r[0], r[1]);
    assert_int_equal(r[2], r[0]);
    assert_int_equal(r[3], r[1]);
    assert_int_equal(tdm__stack_count(), 4);
    assert_int_equal(tdm__stack_get(0, &pa), 0);
    assert_int_equal(tdm__stack_get(5, &pa), 0);
    assert_null(pa);
}

static void intern_matches_exactly(void **state)
{
    (void)state;
    uintptr_t x[3] = {0x400100, 0x400200, 0x400300};
    uintptr_t y[3] = {0x400100, 0x400200, 0x400301};
    uint32_t ix = tdm__stack_intern(x, 3);
    assert_int_equal(ix, 1);
    assert_int_equal(tdm__stack_intern(y, 3), 2);     /* one frame differs */
    assert_int_equal(tdm__stack_intern(x, 2), 3);     /* a prefix */
    assert_int_equal(tdm__stack_intern(x + 1, 2), 4); /* a suffix */
    assert_int_equal(tdm__stack_intern(x, 3), ix);
    assert_int_equal(tdm__stack_intern(x, 0), 0);
    const uintptr_t *got;
    assert_int_equal(tdm__stack_get(2, &got), 3);
    assert_memory_equal(got, y, sizeof y);
    assert_int_equal(tdm__stack_get(3, &got), 2);
    assert_memory_equal(got, x, 2 * sizeof *x);

    tdm__stack_reset();
    assert_int_equal(tdm__stack_count(), 0);
    assert_int_equal(tdm__stack_get(1, &got), 0);
    assert_int_equal(tdm__stack_intern(y, 3), 1);
}

static void full_table_returns_zero_and_counts(void **state)
{
    (void)state;
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    /* Run out of stacks: depth-1 stacks, one per id. */
    for (uint32_t i = 1; i <= TEST_MAX_STACKS; i++) {
        pcs[0] = 0x10000 + i;
        assert_int_equal(tdm__stack_intern(pcs, 1), i);
    }
    assert_int_equal(tdm__stack_overflows(), 0);
    pcs[0] = 0x10000 + TEST_MAX_STACKS + 1;
    assert_int_equal(tdm__stack_intern(pcs, 1), 0);
    assert_int_equal(tdm__stack_intern(pcs, 1), 0);
    assert_int_equal(tdm__stack_overflows(), 2);
    assert_int_equal(tdm__stack_current(0), 0);
    assert_int_equal(tdm__stack_overflows(), 3);
    /* Known stacks are still found when the table is full. */
    pcs[0] = 0x10000 + 17;
    assert_int_equal(tdm__stack_intern(pcs, 1), 17);
    assert_int_equal(tdm__stack_count(), TEST_MAX_STACKS);

    /* Run out of frames: full-depth stacks. */
    tdm__stack_reset();
    assert_int_equal(tdm__stack_overflows(), 0);
    const uint32_t fit = TEST_MAX_FRAMES / TDM_STACK_MAX_DEPTH;
    for (uint32_t i = 1; i <= fit; i++) {
        for (unsigned j = 0; j < TDM_STACK_MAX_DEPTH; j++)
            pcs[j] = 0x20000 + i * 0x100 + j;
        assert_int_equal(tdm__stack_intern(pcs, TDM_STACK_MAX_DEPTH), i);
    }
    pcs[0] = 0x1;
    assert_int_equal(tdm__stack_intern(pcs, TDM_STACK_MAX_DEPTH), 0);
    assert_int_equal(tdm__stack_overflows(), 1);
    /* An empty stack is "no stack", not an overflow. */
    assert_int_equal(tdm__stack_intern(pcs, 0), 0);
    assert_int_equal(tdm__stack_overflows(), 1);
    tdm__stack_reset();
    assert_int_equal(tdm__stack_intern(pcs, 1), 1);
}

/* ---- four threads -------------------------------------------------------- */

#define THREADS 4
#define SYNTH 2000u
#define REAL_DEPTHS 8u

#define ROUNDS 3u

typedef struct worker {
    unsigned index;
    pthread_barrier_t *barrier;
    /* Ids by round; stored without looking at the round, so that the
     * compiler has no reason to make a second copy of the calls (a second
     * call site is a different stack). */
    uint32_t synth[ROUNDS][SYNTH];
    uint32_t real[ROUNDS][REAL_DEPTHS];
} worker;

static unsigned synth_stack(unsigned k, uintptr_t *pcs)
{
    unsigned depth = 1 + k % 20;
    for (unsigned j = 0; j < depth; j++)
        pcs[j] = 0x7000000 + (uintptr_t)k * 64 + j;
    return depth;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    /* Each thread walks the keys in its own order (strides prime to
     * SYNTH, so each visits every key). */
    static const unsigned stride[THREADS] = {1, 3, 7, 11};
    pthread_barrier_wait(w->barrier);
#pragma GCC unroll 1
    for (unsigned round = 0; round < ROUNDS; round++) {
        for (unsigned i = 0; i < SYNTH; i++) {
            unsigned k = (i * stride[w->index] + w->index * 517) % SYNTH;
            w->synth[round][k] = tdm__stack_intern(pcs, synth_stack(k, pcs));
        }
#pragma GCC unroll 1
        for (unsigned d = 0; d < REAL_DEPTHS; d++)
            w->real[round][d] = recurse_current(d);
    }
    return NULL;
}

static void threads_agree_on_ids(void **state)
{
    REQUIRE_UNWINDER(state);
    static worker w[THREADS];
    pthread_t t[THREADS];
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    memset(w, 0, sizeof w);
    for (unsigned i = 0; i < THREADS; i++) {
        w[i].index = i;
        w[i].barrier = &barrier;
        assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);

    /* Every thread, every round, saw the same id for the same stack. */
    for (unsigned i = 0; i < THREADS; i++) {
        for (unsigned round = 0; round < ROUNDS; round++) {
            assert_memory_equal(w[i].synth[round], w[0].synth[0],
                                sizeof w[0].synth[0]);
            assert_memory_equal(w[i].real[round], w[0].real[0],
                                sizeof w[0].real[0]);
        }
    }
    /* Different stacks got different ids, and the ids are exactly
     * 1..count: dense, none lost, none given twice. */
    uint32_t count = tdm__stack_count();
    assert_int_equal(count, SYNTH + REAL_DEPTHS);
    static unsigned char seen[SYNTH + REAL_DEPTHS + 1];
    memset(seen, 0, sizeof seen);
    for (unsigned k = 0; k < SYNTH + REAL_DEPTHS; k++) {
        uint32_t id = k < SYNTH ? w[0].synth[0][k] : w[0].real[0][k - SYNTH];
        assert_true(id >= 1 && id <= count);
        assert_false(seen[id]);
        seen[id] = 1;
    }
    /* And the table holds what was interned. */
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    for (unsigned k = 0; k < SYNTH; k++) {
        const uintptr_t *got;
        unsigned depth = synth_stack(k, pcs);
        assert_int_equal(tdm__stack_get(w[0].synth[0][k], &got), depth);
        assert_memory_equal(got, pcs, depth * sizeof *pcs);
    }
}

/* ---- no malloc in steady state ------------------------------------------- */

static void steady_state_does_not_malloc(void **state)
{
    REQUIRE_UNWINDER(state);
#ifdef COUNT_MALLOC
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    /* First calls may set things up (thread stack bounds, libunwind). */
    recurse_current(20);
    recurse(20, pcs, TDM_STACK_MAX_DEPTH, 0);
    unsigned long before = thread_allocs;
    uint32_t sum = 0;
    for (unsigned i = 0; i < 1000; i++) {
        sum += recurse_current(20);                 /* capture + lookup */
        sum += recurse(i % 30, pcs, TDM_STACK_MAX_DEPTH, 0);
        pcs[0] = 0x9000000 + i;                     /* a new stack: insert */
        sum += tdm__stack_intern(pcs, 5);
    }
    assert_int_equal(thread_allocs, before);
    assert_int_not_equal(sum, 0);
    /* The counter does count. */
    void *volatile p = malloc(16);
    free(p);
    assert_int_equal(thread_allocs, before + 1);
#else
    skip();
#endif
}

/* ---- fork waits for captures in flight ---------------------------------- */

/* The probe stands for a lock libunwind holds on its slow path: it is
 * taken inside the capture and let go when the capture ends.  A child
 * forked while it is held would hang at its first capture. */
static pthread_mutex_t unwinder_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int probe_inside;

static void hold_lock_inside_capture(void)
{
    pthread_mutex_lock(&unwinder_lock);
    atomic_store(&probe_inside, 1);
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    pthread_mutex_unlock(&unwinder_lock);
}

static void *capture_once(void *arg)
{
    (void)arg;
    uintptr_t pcs[8];
    tdm__stack_capture(pcs, 8, 0);
    return NULL;
}

static void fork_waits_for_captures_in_flight(void **state)
{
    REQUIRE_UNWINDER(state);
    atomic_store(&probe_inside, 0);
    tdm__stack_capture_probe = hold_lock_inside_capture;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, capture_once, NULL), 0);
    while (!atomic_load(&probe_inside))
        sched_yield();
    pid_t pid = fork();
    if (pid == 0) {
        /* The other thread's capture had ended before fork() ran. */
        int free_now = pthread_mutex_trylock(&unwinder_lock) == 0;
        /* Straight to the kernel: ThreadSanitizer's _exit would report the
         * parent's thread, which the child inherits unjoined, as leaked. */
        syscall(SYS_exit_group, free_now ? 0 : 1);
    }
    tdm__stack_capture_probe = NULL;
    pthread_join(t, NULL);
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* Captures go on in the parent after the fork. */
    uintptr_t pcs[8];
    assert_true(tdm__stack_capture(pcs, 8, 0) > 0);
}

/* A thread that meets the pending fork after the prepare handler's wait is
 * still counted when fork() runs: the child must not keep that count, or
 * its own next fork() waits for a thread it does not have.  The probes put
 * the other thread exactly there: the prepare handler starts it and waits
 * until it is parked in its step-out, and it stays parked until fork() has
 * returned in the parent. */
static _Atomic int ghost_go, ghost_parked, ghost_released;

static void ghost_start_and_wait(void)
{
    atomic_store(&ghost_go, 1);
    for (int i = 0; i < 5000 && !atomic_load(&ghost_parked); i++) {
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
}

static void ghost_park(void)
{
    atomic_store(&ghost_parked, 1);
    for (int i = 0; i < 5000 && !atomic_load(&ghost_released); i++) {
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
}

static void *ghost_capture(void *arg)
{
    (void)arg;
    while (!atomic_load(&ghost_go))
        sched_yield();
    uintptr_t pcs[8];
    tdm__stack_capture(pcs, 8, 0);
    return NULL;
}

static void child_of_a_ghost_forks_again(void **state)
{
    REQUIRE_UNWINDER(state);
    uintptr_t warm[8];
    tdm__stack_capture(warm, 8, 0); /* handlers registered */
    atomic_store(&ghost_go, 0);
    atomic_store(&ghost_parked, 0);
    atomic_store(&ghost_released, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ghost_capture, NULL), 0);
    tdm__stack_fork_wait_probe = ghost_park;
    tdm__stack_fork_prepare_probe = ghost_start_and_wait;
    pid_t pid = fork();
    if (pid == 0) {
        tdm__stack_fork_wait_probe = NULL;
        tdm__stack_fork_prepare_probe = NULL;
        pid_t grandchild = fork(); /* hangs if the ghost is still counted */
        if (grandchild == 0)
            syscall(SYS_exit_group, 0);
        int st = grandchild > 0 ? child_wait(grandchild, 10) : -1;
        syscall(SYS_exit_group, st == 0 ? 0 : 1);
    }
    tdm__stack_fork_wait_probe = NULL;
    tdm__stack_fork_prepare_probe = NULL;
    int parked = atomic_load(&ghost_parked);
    atomic_store(&ghost_released, 1);
    pthread_join(t, NULL);
    assert_true(pid > 0);
    assert_true(parked); /* the ghost was where the test means it to be */
    int status = child_wait(pid, 30);
    char why[64];
    if (status != 0)
        fail_msg("the child's own fork: %s", child_describe(status, why, sizeof why));
}

#define FOR_EACH_UNWINDER(fn)                                                  \
    cmocka_unit_test_prestate_setup_teardown(fn, use_unwinder, back_to_auto,  \
                                             &modes[0]),                       \
        cmocka_unit_test_prestate_setup_teardown(fn, use_unwinder,            \
                                                 back_to_auto, &modes[1]),     \
        cmocka_unit_test_prestate_setup_teardown(fn, use_unwinder,            \
                                                 back_to_auto, &modes[2]),     \
        cmocka_unit_test_prestate_setup_teardown(fn, use_unwinder,            \
                                                 back_to_auto, &modes[3])

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(intern_before_init_is_zero),
        FOR_EACH_UNWINDER(frames_start_at_caller),
        FOR_EACH_UNWINDER(recursion_is_counted_exactly),
        FOR_EACH_UNWINDER(deep_recursion_is_cut),
        FOR_EACH_UNWINDER(same_site_same_id),
        cmocka_unit_test_prestate_setup_teardown(
            intern_matches_exactly, use_unwinder, back_to_auto, &modes[0]),
        cmocka_unit_test_prestate_setup_teardown(
            full_table_returns_zero_and_counts, use_unwinder, back_to_auto,
            &modes[0]),
        FOR_EACH_UNWINDER(threads_agree_on_ids),
        FOR_EACH_UNWINDER(steady_state_does_not_malloc),
        FOR_EACH_UNWINDER(fork_waits_for_captures_in_flight),
        FOR_EACH_UNWINDER(child_of_a_ghost_forks_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
