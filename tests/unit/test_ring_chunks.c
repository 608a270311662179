/* tests/unit/test_ring_chunks.c: the ring's chunks, one writer each.
 *
 * A thread writes its events into a chunk it holds alone; these tests pin
 * down what that must not cost: a thread idling with a part-used chunk
 * neither loses its events nor lets another thread write over them; a
 * thread that ends gives its chunk back (else a program that starts
 * threads one after another runs out of chunks); a forked child gets back
 * the chunks of the threads that did not come along; a ring made at the
 * address of a destroyed one is not mistaken for it; the packed event
 * words are the struct's layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ring.h"
#include "child_watch.h"

/* An event whose every word says who wrote it and which one it is, so a
 * torn or misplaced copy shows. */
static tdm_event tagged(uint64_t writer, uint64_t i)
{
    tdm_event ev = {
        .time_ns = 1000 + i, .addr = writer << 32 | i, .size = writer, .requested = i,
        .stream = writer ^ i, .stack_id = (uint32_t)i, .phase = (uint32_t)writer,
        .step = (uint32_t)(i * 3), .device = (int16_t)writer, .action = TDM_ACTION_ALLOC,
        .category = (uint8_t)(i & 7),
    };
    return ev;
}

static void assert_tagged(const tdm_event *ev)
{
    uint64_t writer = ev->addr >> 32, i = ev->addr & 0xffffffffu;
    tdm_event want = tagged(writer, i);
    want.time_ns = ev->time_ns; /* raised to the writer's previous, maybe */
    assert_memory_equal(ev, &want, sizeof want);
}

static void packed_words_are_the_struct_layout(void **state)
{
    (void)state;
    tdm_event ev = {
        .stack_id = 0x01020304, .phase = 0x05060708, .step = 0x090a0b0c,
        .device = -2, .action = 0xfa, .category = 0x7e,
    };
    uint64_t w[7];
    memcpy(w, &ev, sizeof w);
    assert_int_equal(w[5], tdm__event_word5(ev.stack_id, ev.phase));
    assert_int_equal(w[6], tdm__event_word6(ev.step, ev.device, ev.action, ev.category));
}

static void thread_time_never_goes_back(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(64, &r), TDM_OK);
    tdm_event a = tagged(6, 0), b = tagged(6, 1);
    a.time_ns = 500;
    b.time_ns = 400; /* stamped earlier, pushed later */
    tdm__ring_push(r, &a);
    tdm__ring_push(r, &b);
    tdm_event out[2];
    assert_int_equal(tdm__ring_copy(r, out, 2, NULL), 2);
    assert_int_equal(out[0].addr, a.addr);
    assert_int_equal(out[1].addr, b.addr);
    assert_int_equal(out[1].time_ns, 500);
    tdm__ring_destroy(r);
}

/* ---- the copy's order ---------------------------------------------------------- */

#define SORT_THREADS 3
#define SORT_EVENTS 3000

typedef struct walker {
    tdm__ring *ring;
    uint64_t writer;
} walker;

static void *walk(void *arg)
{
    walker *w = arg;
    uint64_t t = 1000, seed = w->writer * 7919 + 1;
    for (uint64_t i = 0; i < SORT_EVENTS; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        t += (seed >> 60) * 50; /* steps of 0 to 750 ns, ties included */
        tdm_event ev = tagged(w->writer, i);
        ev.time_ns = t;
        tdm__ring_push(w->ring, &ev);
    }
    return NULL;
}

static void copy_is_in_time_order(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(4 * SORT_THREADS * SORT_EVENTS, &r), TDM_OK);
    pthread_t th[SORT_THREADS];
    walker w[SORT_THREADS];
    for (int k = 0; k < SORT_THREADS; k++) {
        w[k] = (walker){r, (uint64_t)k + 1};
        assert_int_equal(pthread_create(&th[k], NULL, walk, &w[k]), 0);
    }
    for (int k = 0; k < SORT_THREADS; k++)
        pthread_join(th[k], NULL);
    size_t max = SORT_THREADS * SORT_EVENTS;
    tdm_event *out = calloc(max, sizeof *out);
    uint64_t lost = 1;
    assert_int_equal(tdm__ring_copy(r, out, max, &lost), max);
    assert_int_equal(lost, 0);
    uint64_t next[SORT_THREADS + 1] = {0};
    for (size_t k = 0; k < max; k++) {
        assert_tagged(&out[k]);
        if (k > 0)
            assert_true(out[k].time_ns >= out[k - 1].time_ns);
        uint64_t writer = out[k].addr >> 32;
        assert_int_equal(out[k].addr & 0xffffffffu, next[writer]++);
    }
    free(out);
    tdm__ring_destroy(r);
}

/* ---- a signal handler that records ------------------------------------------ */

static tdm__ring *signal_ring;
static volatile sig_atomic_t signal_events;

static void record_in_handler(int sig)
{
    (void)sig;
    tdm_event ev = tagged(8, (uint64_t)signal_events);
    tdm__ring_push(signal_ring, &ev);
    signal_events = signal_events + 1;
}

/* Pushes interrupted by a timer every 20 us.  ThreadSanitizer delivers a
 * signal only at its own points and runs a push 50 times slower: there
 * a tenth of the pushes still meets thousands of handlers (11,000 here,
 * where the Release build's 400,000 meet 2,500), in 2 s rather than 20. */
#if defined(__SANITIZE_THREAD__)
#define SIGNAL_PUSHES 40000
#else
#define SIGNAL_PUSHES 400000
#endif

static void signal_handler_never_tears_an_event(void **state)
{
    (void)state;
    const uint64_t n = SIGNAL_PUSHES;
    assert_int_equal(tdm__ring_create(1u << 20, &signal_ring), TDM_OK);
    struct sigaction sa = {.sa_handler = record_in_handler};
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
    struct itimerval every = {{0, 20}, {0, 20}}; /* as often as the kernel will */
    assert_int_equal(setitimer(ITIMER_REAL, &every, NULL), 0);
    for (uint64_t i = 0; i < n; i++) {
        tdm_event ev = tagged(7, i);
        tdm__ring_push(signal_ring, &ev);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
    signal(SIGALRM, SIG_DFL);
    uint64_t handled = (uint64_t)signal_events;
    print_message("%llu pushes met %llu handlers\n", (unsigned long long)n,
                  (unsigned long long)handled);
    assert_true(handled > 0);
    tdm_event *out = calloc(1u << 20, sizeof *out);
    uint64_t lost = 1;
    size_t got = tdm__ring_copy(signal_ring, out, 1u << 20, &lost);
    /* A handler that interrupted a push drops its event, counted; every
     * other event is there, whole. */
    uint64_t dropped = atomic_load(&signal_ring->refused);
    assert_true(dropped <= handled);
    assert_int_equal(got, n + handled - dropped);
    assert_int_equal(lost, dropped);
    uint64_t mine = 0;
    for (uint64_t k = 0; k < got; k++) {
        assert_tagged(&out[k]); /* no event written over another */
        mine += out[k].addr >> 32 == 7;
    }
    assert_int_equal(mine, n);
    free(out);
    tdm__ring_destroy(signal_ring);
}

/* ---- an idle holder --------------------------------------------------------- */

typedef struct idle_writer {
    tdm__ring *ring;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stage; /* 1: first event written; 2: go on */
} idle_writer;

static void stage_set(idle_writer *w, int stage)
{
    pthread_mutex_lock(&w->lock);
    w->stage = stage;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static void stage_wait(idle_writer *w, int stage)
{
    pthread_mutex_lock(&w->lock);
    while (w->stage != stage)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

/* Starts fn(w) on ring r and waits for its first event (stage 1). */
static pthread_t start_writer(idle_writer *w, tdm__ring *r, void *(*fn)(void *))
{
    *w = (idle_writer){.ring = r, .lock = PTHREAD_MUTEX_INITIALIZER,
                       .cond = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fn, w), 0);
    stage_wait(w, 1);
    return th;
}

static void *write_then_idle(void *arg)
{
    idle_writer *w = arg;
    tdm_event ev = tagged(9, 1);
    ev.time_ns = 1; /* older than everything main writes */
    tdm__ring_push(w->ring, &ev);
    stage_set(w, 1);
    stage_wait(w, 2);
    ev = tagged(9, 2);
    ev.time_ns = UINT64_C(1) << 62; /* newer than all of main's */
    tdm__ring_push(w->ring, &ev);
    return NULL;
}

static void idle_holder_keeps_its_chunk(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(4096, &r), TDM_OK);
    assert_true(r->chunk > 1);
    idle_writer w;
    pthread_t th = start_writer(&w, r, write_then_idle);

    /* Ten laps of the ring while the other thread holds a chunk with one
     * event in it. */
    const uint64_t laps = 10 * r->chunks * r->chunk;
    for (uint64_t i = 0; i < laps; i++) {
        tdm_event ev = tagged(1, i);
        ev.time_ns = 10 + i;
        tdm__ring_push(r, &ev);
    }
    stage_set(&w, 2);
    pthread_join(th, NULL);

    tdm_event *out = calloc(4096, sizeof *out);
    uint64_t lost = 0;
    size_t n = tdm__ring_copy(r, out, 4096, &lost);
    assert_int_equal(n, 4096);
    assert_int_equal(lost, laps + 2 - n);
    /* Every event is whole: nobody wrote into the idle thread's chunk,
     * and it wrote into nobody's.  Kept: main's newest 4095 in order,
     * then the idle thread's second event, the newest of all; its first
     * (the oldest of all) is gone. */
    int saw_idle_second = 0;
    uint64_t next_main = laps - 4095;
    for (size_t k = 0; k < n; k++) {
        assert_tagged(&out[k]);
        if (out[k].addr >> 32 == 9) {
            assert_int_equal(out[k].addr & 0xffffffffu, 2);
            saw_idle_second = 1;
        } else {
            assert_int_equal(out[k].addr & 0xffffffffu, next_main);
            next_main++;
        }
    }
    assert_true(saw_idle_second);
    assert_int_equal(next_main, laps);
    free(out);
    tdm__ring_destroy(r);
}

static int held_chunks(tdm__ring *r)
{
    int held = 0;
    for (uint64_t c = 0; c < r->chunks; c++)
        held += (int)(atomic_load(&r->chunk_state[c]) & 1);
    return held;
}

/* ---- a chunk given back late ------------------------------------------------ */

/* The idle holder of write_then_idle, but it wakes to fill its chunk with
 * events of "now" (w->now_ns) and gives it back, while the other writer
 * is one chunk short of that chunk's turn in claim order. */
typedef struct late_writer {
    idle_writer sync;
    uint64_t now_ns;
} late_writer;

static void *write_then_fill_late(void *arg)
{
    late_writer *lw = arg;
    idle_writer *w = &lw->sync;
    tdm_event ev = tagged(9, 0);
    ev.time_ns = 5;
    tdm__ring_push(w->ring, &ev);
    stage_set(w, 1);
    stage_wait(w, 2);
    for (uint64_t i = 1; i < w->ring->chunk; i++) {
        ev = tagged(9, i);
        ev.time_ns = lw->now_ns;
        tdm__ring_push(w->ring, &ev); /* the last one gives the chunk back */
    }
    return NULL;
}

static uint64_t held_by_me(tdm__ring *r)
{
    return ((tdm__ring_me.end >> r->chunk_shift) - 1) % r->chunks;
}

/* A chunk held over laps holds events as new as its give-back.  Were it
 * overwritten at its next turn in claim order, which may come a moment
 * later, the copy could keep only what is newer than those (it keeps no
 * event older than one lost): with a busy ring, a handful.  It waits for
 * a later turn, so that a copy keeps at least half the ring throughout. */
static void late_chunk_waits_its_turn(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(4096, &r), TDM_OK);
    assert_int_equal(r->chunk, 64);
    late_writer lw = {0};
    lw.sync = (idle_writer){.ring = r, .lock = PTHREAD_MUTEX_INITIALIZER,
                            .cond = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, write_then_fill_late, &lw), 0);
    stage_wait(&lw.sync, 1);
    assert_int_equal(held_chunks(r), 1);
    uint64_t late = r->chunks;
    for (uint64_t c = 0; c < r->chunks; c++)
        if (atomic_load(&r->chunk_state[c]) & 1)
            late = c;

    /* Three laps, then on until this thread has just begun the chunk
     * before the late one in claim order. */
    uint64_t i = 0, t = 10;
    uint64_t before_late = (late + r->chunks - 1) % r->chunks;
    for (; i < 3 * r->chunks * r->chunk ||
           !(held_by_me(r) == before_late && tdm__ring_me.next + r->chunk == tdm__ring_me.end + 1);
         i++) {
        tdm_event ev = tagged(1, i);
        ev.time_ns = t++;
        tdm__ring_push(r, &ev);
    }
    lw.now_ns = t++;
    stage_set(&lw.sync, 2);
    pthread_join(th, NULL);

    tdm_event *out = calloc(4096, sizeof *out);
    size_t fewest = SIZE_MAX;
    for (uint64_t k = 0; k < 2 * r->chunks * r->chunk; k++, i++) {
        tdm_event ev = tagged(1, i);
        ev.time_ns = t++;
        tdm__ring_push(r, &ev);
        if (k % 16 == 0) {
            size_t n = tdm__ring_copy(r, out, 4096, NULL);
            if (n < fewest)
                fewest = n;
        }
    }
    print_message("fewest kept: %zu of 4096\n", fewest);
    assert_true(fewest >= 2048);
    free(out);
    tdm__ring_destroy(r);
}

/* ---- threads that end --------------------------------------------------------- */

static void *write_one(void *arg)
{
    tdm__ring *r = arg;
    static _Atomic uint64_t serial;
    tdm_event ev = tagged(2, atomic_fetch_add(&serial, 1));
    tdm__ring_push(r, &ev);
    return NULL;
}

static void ended_threads_give_their_chunks_back(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(2000, &r), TDM_OK);
    uint64_t chunks = r->chunks;
    assert_true(r->chunk > 1);
    /* More threads than chunks, one after another, one event each. */
    uint64_t threads = chunks + chunks / 2;
    for (uint64_t t = 0; t < threads; t++) {
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, write_one, r), 0);
        pthread_join(th, NULL);
    }
    /* Every event found a chunk; each chunk's next turn starts at its
     * first slot, so the newest `chunks` events are the ones kept. */
    assert_int_equal(atomic_load(&r->refused), 0);
    assert_int_equal(tdm__ring_events(r), threads);
    tdm_event *out = calloc(2000, sizeof *out);
    uint64_t lost = 1;
    size_t n = tdm__ring_copy(r, out, 2000, &lost);
    assert_int_equal(n, chunks);
    assert_int_equal(lost, threads - chunks);
    for (size_t k = 0; k < n; k++) {
        assert_tagged(&out[k]);
        assert_int_equal(out[k].addr & 0xffffffffu, threads - chunks + k);
    }
    free(out);
    tdm__ring_destroy(r);
}

/* ---- fork ---------------------------------------------------------------------- */

static void *write_one_and_wait(void *arg)
{
    idle_writer *w = arg;
    tdm_event ev = tagged(3, 0);
    tdm__ring_push(w->ring, &ev);
    stage_set(w, 1);
    stage_wait(w, 2);
    return NULL;
}

static void forked_child_gets_other_threads_chunks_back(void **state)
{
    (void)state;
    tdm__ring *r;
    assert_int_equal(tdm__ring_create(4096, &r), TDM_OK);
    idle_writer w;
    pthread_t th = start_writer(&w, r, write_one_and_wait);
    tdm_event ev = tagged(4, 0);
    tdm__ring_push(r, &ev); /* this thread holds one too */
    assert_int_equal(held_chunks(r), 2);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tdm__ring_fork_child(r);
        /* Only this thread's chunk stays held; both events still count. */
        int ok = held_chunks(r) == 1 && tdm__ring_events(r) == 2;
        _exit(ok ? 0 : 1);
    }
    int status = child_wait(pid, 30);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    stage_set(&w, 2);
    pthread_join(th, NULL);
    assert_int_equal(held_chunks(r), 1); /* the ended thread's came back */
    tdm__ring_destroy(r);
}

/* ---- a new ring where an old one was ---------------------------------------- */

static void new_ring_is_not_the_destroyed_one(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        tdm__ring *r;
        assert_int_equal(tdm__ring_create(4096, &r), TDM_OK);
        for (uint64_t i = 0; i <= (uint64_t)round; i++) {
            tdm_event ev = tagged(5, i);
            tdm__ring_push(r, &ev);
        }
        tdm_event out[8];
        uint64_t lost = 1;
        assert_int_equal(tdm__ring_copy(r, out, 8, &lost), round + 1);
        assert_int_equal(lost, 0);
        assert_int_equal(held_chunks(r), 1);
        tdm__ring_destroy(r); /* the next one may well get its address */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(packed_words_are_the_struct_layout),
        cmocka_unit_test(thread_time_never_goes_back),
        cmocka_unit_test(copy_is_in_time_order),
        cmocka_unit_test(signal_handler_never_tears_an_event),
        cmocka_unit_test(idle_holder_keeps_its_chunk),
        cmocka_unit_test(late_chunk_waits_its_turn),
        cmocka_unit_test(ended_threads_give_their_chunks_back),
        cmocka_unit_test(forked_child_gets_other_threads_chunks_back),
        cmocka_unit_test(new_ring_is_not_the_destroyed_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
