/* snapshot/stack.c: native stack capture and the stack intern table.
 *
 * Capture.  Two unwinders, chosen per call:
 *  - libunwind's unw_backtrace, reached through dlopen(RTLD_LOCAL) and
 *    dlsym, never linked: libunwind.so.8 exports _Unwind_* and would take
 *    over C++ exception unwinding in the host program (DESIGN.md, "Loading
 *    tidemark must not change the program").  It reads the .eh_frame
 *    unwind tables, so it is right through code built without frame
 *    pointers (libc, distro builds, vendor runtimes), and its per-thread
 *    trace cache makes it cheap after the first few calls (~6 ns a frame).
 *  - a frame-pointer walker, bounded by this thread's stack (asked of
 *    pthread_getattr_np once per thread and kept in a __thread variable)
 *    and checked against the loaded objects' code ranges.  About four
 *    times faster, but it misses or stops at frames that keep no frame
 *    pointer.
 * A call uses libunwind when it was loaded, and the walker when libunwind
 * is missing, when it reports nothing, or when this thread is already
 * inside libunwind (a signal handler interrupting a capture must not
 * re-enter libunwind's per-thread cache).  Why libunwind first: at ~220 ns
 * for capture + intern of 30 frames it is well inside the 500 ns budget,
 * and it stays right in the programs tidemark is loaded into, which are
 * mostly built without frame pointers; the walker (~50 ns) would silently
 * drop their frames.  ThreadSanitizer builds use only the walker (see
 * open_libunwind).  docs/stacks.md has the measurements.
 * Neither path calls malloc or stdio once the first call of the process
 * (dlopen, code ranges) and of the thread (stack bounds, TLS, libunwind's
 * cache) are done.
 *
 * Interning.  One anonymous mapping made at tdm__stack_init holds an open
 * addressing hash table (at least twice as many slots as stacks, so probes
 * stay short and always end), a record per id and a pool of frames.  A
 * slot is one 64-bit word: hash tag (high 32 bits) and id (low 32 bits); 0
 * is empty.  Slots only ever go from empty to full, so a lookup without
 * the lock that meets an empty slot knows the stack is absent.  An insert
 * writes the frames and the record, then publishes the count and the slot
 * with release stores; readers use acquire loads.
 *
 * Locks: table.lock serializes inserts, init and reset; text.lock
 * serializes rebuilds of the code ranges (rare: after a dlopen); unw.lock
 * the one-time setup.  No lock of ours is held while unwinding, and
 * lookups take none.
 *
 * Fork.  libunwind takes locks of its own on its slow path (its global
 * cache of register-state records, the dynamic linker's list of objects),
 * and the walker may take text.lock.  A child forked while another thread
 * was inside a capture would find such a lock held forever and hang at its
 * own first capture (a data loader forking workers while other threads
 * allocate).  So fork() waits for the captures in flight: each counts
 * itself in `gate.in_flight` and then checks `gate.fork_pending`; the
 * prepare handler raises fork_pending and waits until no other thread is
 * counted (see capture_enter).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

#include "spill.h"
#include "stack.h"
#include "stack_cfi.h"
#include "stack_text.h"

/* Headroom in the capture buffer above TDM_STACK_MAX_DEPTH: frames the
 * caller asks to skip, and frames libunwind reports above our own. */
#define SKIP_MAX 32u
#define LEAD_MAX 8u
#define CAPTURE_BUF (TDM_STACK_MAX_DEPTH + SKIP_MAX + LEAD_MAX + 2u)

/* Largest table we agree to map, so that ids and frame offsets fit 32 bits
 * and the slot count (a power of two, twice the stacks) fits too. */
#define MAX_STACKS_LIMIT (1u << 30)
#define MAX_FRAMES_LIMIT 0xffffffffu

#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LIKELY(x) __builtin_expect(!!(x), 1)
/* Reading other frames' saved registers is not a memory error. */
#define NO_ASAN __attribute__((no_sanitize_address))

typedef int (*unw_backtrace_fn)(void **buffer, int size);

/* ---- unwinder state (process-wide, set once) ---------------------------- */

static struct {
    pthread_mutex_t lock;       /* serializes the one-time setup */
    _Atomic int ready;          /* 1 once the fields below are final */
    unw_backtrace_fn backtrace; /* NULL: libunwind missing or unusable */
    unsigned lead;              /* entries unw_backtrace reports above the
                                   caller of raw_unwind (its own frame and
                                   raw_unwind's), measured at setup */
    _Atomic int mode;           /* tdm__unwinder */
} unw = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Per-thread state of the frame-pointer walker and the re-entry guard. */
typedef struct thread_stack {
    uintptr_t lo, hi;  /* stack bounds, bytes: [lo, hi) */
    int bounds;        /* 0 unknown yet, 1 known, -1 unavailable */
    volatile sig_atomic_t in_libunwind; /* inside unw_backtrace; read by
                                           this thread's signal handlers */
    volatile sig_atomic_t captures; /* captures of this thread in flight
                                       (more than one: signal handlers) */
} thread_stack;
static __thread thread_stack tls;

/* ---- the fork gate (see the head of this file) -------------------------- */

static struct {
    _Atomic unsigned in_flight; /* captures running, all threads */
    _Atomic int fork_pending;   /* a fork() waits for them */
} gate;

void (*volatile tdm__stack_capture_probe)(void);
void (*volatile tdm__stack_fork_wait_probe)(void);
void (*volatile tdm__stack_fork_prepare_probe)(void);

/* A capture that met a pending fork steps out until the fork is done.
 * fork() may run before it has stepped out: the child handler sets the
 * count right (atfork_child). */
static NOINLINE void capture_wait_for_fork(thread_stack *t)
{
    void (*probe_fn)(void) = tdm__stack_fork_wait_probe;
    if (probe_fn)
        probe_fn();
    atomic_fetch_sub_explicit(&gate.in_flight, 1, memory_order_release);
    t->captures--;
    while (atomic_load_explicit(&gate.fork_pending, memory_order_acquire))
        sched_yield();
}

/* The increment and the check are both sequentially consistent, as are the
 * prepare handler's raise and read: either the handler sees this capture
 * counted, or this capture sees the fork pending. */
static ALWAYS_INLINE void capture_enter(thread_stack *t)
{
    for (;;) {
        t->captures++;
        atomic_fetch_add_explicit(&gate.in_flight, 1, memory_order_seq_cst);
        if (LIKELY(!atomic_load_explicit(&gate.fork_pending,
                                         memory_order_seq_cst)))
            return;
        capture_wait_for_fork(t);
    }
}

static ALWAYS_INLINE void capture_leave(thread_stack *t)
{
    atomic_fetch_sub_explicit(&gate.in_flight, 1, memory_order_release);
    t->captures--;
}

/* ---- intern table ------------------------------------------------------- */

typedef struct stack_rec {
    uint32_t off;   /* index of the first frame in table.frames */
    uint32_t depth; /* frames */
} stack_rec;

static struct {
    pthread_mutex_t lock;     /* inserts, init, reset */
    _Atomic int ready;        /* 1 once the mapping exists */
    void *map;                /* the whole table, one mapping */
    size_t map_bytes;
    _Atomic uint64_t *slots;  /* tag << 32 | id; 0 = empty */
    uint64_t slot_mask;       /* slot count - 1 (a power of two) */
    stack_rec *recs;          /* [0..max_stacks], indexed by id */
    uintptr_t *frames;        /* [0..max_frames) */
    uint32_t max_stacks;      /* ids 1..max_stacks */
    uint32_t max_frames;
    uint32_t frames_used;     /* under lock */
    _Atomic uint32_t count;   /* ids in use; release-published */
    _Atomic uint64_t overflows;
    tdm__stack_spill spill;   /* where it lies in the spill file, if any */
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- frame-pointer walker ----------------------------------------------- */

/* Asks glibc once per thread.  pthread_getattr_np may allocate (and reads
 * /proc/self/maps for the main thread): that is the thread's first call,
 * never steady state. */
static NOINLINE void thread_bounds_init(thread_stack *t)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    t->bounds = -1;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr && size) {
        t->lo = (uintptr_t)addr;
        t->hi = (uintptr_t)addr + size;
        t->bounds = 1;
    }
    pthread_attr_destroy(&attr);
}

/* Whether this thread's stack bounds are known (asked the first time). */
static ALWAYS_INLINE int thread_bounds(thread_stack *t)
{
    if (UNLIKELY(t->bounds == 0))
        thread_bounds_init(t);
    return t->bounds > 0;
}

/* Follows the chain of saved frame pointers from `fp`: each frame record
 * is {caller's frame pointer, return address}.  Stops at a link that
 * leaves the stack, is misaligned or does not move toward the stack's
 * base, and at a return address that points at no loaded code: the ways a
 * chain that ran into a frame without a frame pointer shows. */
static ALWAYS_INLINE NO_ASAN unsigned fp_walk(uintptr_t fp, void **buf,
                                              unsigned cap)
{
    thread_stack *t = &tls;
    if (!thread_bounds(t))
        return 0;
    const uintptr_t lo = t->lo, hi = t->hi;
    uintptr_t code_lo = 1, code_hi = 0; /* the last code range hit */
    int refreshed = 0;
    unsigned n = 0;
    while (n < cap) {
        if (fp < lo || fp > hi - 2 * sizeof(uintptr_t) ||
            (fp & (sizeof(uintptr_t) - 1)))
            break;
        const uintptr_t *rec = (const uintptr_t *)fp;
        uintptr_t ret = rec[1], next = rec[0];
        if (ret < code_lo || ret >= code_hi) {
            if (!tdm__text_find(ret, &code_lo, &code_hi) &&
                (refreshed++ || !tdm__text_refresh() ||
                 !tdm__text_find(ret, &code_lo, &code_hi)))
                break;
        }
        buf[n++] = (void *)ret;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

enum { WALK_FRAME_POINTER, WALK_LIBUNWIND, WALK_CFI };

/* Unwinds into buf from the caller of this function: with the walkers,
 * buf[0] is the return address into our caller; libunwind reports
 * `unw.lead` more entries first.  noinline and the barrier keep this frame
 * real (not inlined, not a tail call) so that those counts hold.  -1: the
 * CFI walker met a frame it cannot unwind. */
static NOINLINE NO_ASAN int raw_unwind(void **buf, unsigned cap, int how)
{
    int n;
    if (how == WALK_LIBUNWIND) {
        n = unw.backtrace(buf, (int)cap);
        n = n > 0 ? n : 0;
    } else if (how == WALK_CFI) {
        n = -1;
#if defined(__x86_64__)
        thread_stack *t = &tls;
        if (thread_bounds(t)) {
            /* This frame's registers at one instruction: the walk starts
             * from the rule of that instruction. */
            uintptr_t pc, sp, bp;
            __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                             : "=r"(pc), "=r"(sp), "=r"(bp));
            if (sp >= t->lo && sp < t->hi)
                n = tdm__cfi_walk(pc, sp, bp, t->hi, buf, cap);
        }
#endif
    } else {
        n = (int)fp_walk((uintptr_t)__builtin_frame_address(0), buf, cap);
    }
    __asm__ volatile("" ::: "memory");
    return n;
}

/* Finds how many entries unw_backtrace puts before the frame the walker
 * starts at, by unwinding the same place both ways.  If libunwind's answer
 * does not contain our caller's return address, it is not trusted. */
static NOINLINE unsigned calibrate_lead(unw_backtrace_fn fn)
{
    void *a[LEAD_MAX + 4], *b[4];
    unw.backtrace = fn;
    int na = raw_unwind(a, LEAD_MAX + 4, WALK_LIBUNWIND);
    int nb = raw_unwind(b, 4, WALK_FRAME_POINTER);
    __asm__ volatile("" ::: "memory");
    if (nb < 2)
        return ~0u;
    /* b[0] is our return address from the second call; b[1] is the return
     * into our caller, which both calls share. */
    for (int i = 1; i < na; i++)
        if (a[i] == b[1])
            return i - 1;
    return ~0u;
}

static void *open_libunwind(void)
{
#if defined(__SANITIZE_THREAD__)
    /* libunwind frees its per-thread cache from a thread-specific-data
     * destructor that it defers to the last round, after ThreadSanitizer
     * has torn down the exiting thread's state; the mutex it then takes
     * crashes the TSan runtime.  TSan builds walk frame pointers. */
    return NULL;
#else
    /* RTLD_LOCAL keeps libunwind's _Unwind_* out of the global scope. */
    return dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
#endif
}

static NOINLINE void unwinder_setup(void)
{
    pthread_mutex_lock(&unw.lock);
    if (!atomic_load_explicit(&unw.ready, memory_order_relaxed)) {
        tdm__text_setup();
        void *h = open_libunwind();
        unw_backtrace_fn fn =
            h ? (unw_backtrace_fn)dlsym(h, "unw_backtrace") : NULL;
        unw.backtrace = NULL;
        if (fn) {
            unsigned lead = calibrate_lead(fn);
            if (lead <= LEAD_MAX) {
                unw.backtrace = fn;
                unw.lead = lead;
            } else {
                unw.backtrace = NULL;
            }
        }
        /* The handle stays open for the life of the process: captures may
         * be running in other threads at any time. */
        atomic_store_explicit(&unw.ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&unw.lock);
}

static ALWAYS_INLINE void unwinder_ready(void)
{
    if (UNLIKELY(!atomic_load_explicit(&unw.ready, memory_order_acquire)))
        unwinder_setup();
}

/* The body of both public capture functions, inlined into each so that
 * raw_unwind's caller is the public function itself: `drop` counts that
 * function's frame plus the frames the caller asked to skip. */
static ALWAYS_INLINE unsigned capture(uintptr_t *pcs, unsigned max,
                                      unsigned drop)
{
    void *buf[CAPTURE_BUF];
    if (max > TDM_STACK_MAX_DEPTH)
        max = TDM_STACK_MAX_DEPTH;
    if (max == 0 || drop > SKIP_MAX + 1)
        return 0;
    unwinder_ready();
    thread_stack *t = &tls;
    capture_enter(t);
    void (*probe_fn)(void) = tdm__stack_capture_probe;
    if (UNLIKELY(probe_fn != NULL))
        probe_fn();

    int mode = atomic_load_explicit(&unw.mode, memory_order_relaxed);
    unsigned lead = 0, n = 0;
    int done = 0;
    if (mode == TDM__UNWIND_AUTO || mode == TDM__UNWIND_CFI) {
        int r = raw_unwind(buf, drop + max, WALK_CFI);
        if (r > (int)drop) {
            n = (unsigned)r;
            done = 1;
        }
    }
    int use_libunwind = !done && unw.backtrace && mode != TDM__UNWIND_FRAME_POINTER &&
                        mode != TDM__UNWIND_CFI && !t->in_libunwind;
    if (use_libunwind) {
        lead = unw.lead;
        t->in_libunwind = 1;
        n = (unsigned)raw_unwind(buf, lead + drop + max, WALK_LIBUNWIND);
        t->in_libunwind = 0;
        if (n > lead + drop)
            done = 1;
    }
    if (!done && mode != TDM__UNWIND_CFI) { /* libunwind missing or gave up */
        lead = 0;
        n = (unsigned)raw_unwind(buf, drop + max, WALK_FRAME_POINTER);
    }
    capture_leave(t);
    if (n <= lead + drop)
        return 0;
    n -= lead + drop;
    for (unsigned i = 0; i < n; i++)
        pcs[i] = (uintptr_t)buf[lead + drop + i];
    return n;
}

NOINLINE unsigned tdm__stack_capture(uintptr_t *pcs, unsigned max,
                                     unsigned skip)
{
    if (!pcs)
        return 0;
    unsigned n = capture(pcs, max, skip + 1);
    __asm__ volatile("" ::: "memory");
    return n;
}

tdm_status tdm__stack_set_unwinder(tdm__unwinder which)
{
    if ((unsigned)which > TDM__UNWIND_CFI)
        return TDM_INVALID_ARGUMENT;
    unwinder_ready();
    if ((which == TDM__UNWIND_LIBUNWIND && !unw.backtrace) ||
        (which == TDM__UNWIND_CFI && !tdm__cfi_available()))
        return TDM_NOT_AVAILABLE;
    atomic_store_explicit(&unw.mode, (int)which, memory_order_relaxed);
    return TDM_OK;
}

/* ---- interning ---------------------------------------------------------- */

/* Multiply-add over the frames in four independent lanes (a single chain
 * would cost a multiply's latency per frame, a third of the walker's
 * cost), then a full avalanche so that both the slot index (low bits) and
 * the tag (high bits) are well mixed. */
static ALWAYS_INLINE uint64_t hash_pcs(const uintptr_t *pcs, unsigned depth)
{
    const uint64_t k = 0xff51afd7ed558ccdull;
    uint64_t h0 = 0x9e3779b97f4a7c15ull + depth, h1 = 0x6a09e667f3bcc909ull,
             h2 = 0xbb67ae8584caa73bull, h3 = 0x3c6ef372fe94f82bull;
    unsigned i = 0;
    for (; i + 4 <= depth; i += 4) {
        h0 = h0 * k + pcs[i];
        h1 = h1 * k + pcs[i + 1];
        h2 = h2 * k + pcs[i + 2];
        h3 = h3 * k + pcs[i + 3];
    }
    for (; i < depth; i++)
        h0 = h0 * k + pcs[i];
    uint64_t h = h0 ^ (h1 * 0xc2b2ae3d27d4eb4full) ^
                 ((h2 ^ (h2 >> 31)) * 0x165667b19e3779f9ull) ^
                 ((h3 ^ (h3 >> 29)) * k);
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

/* Lock-free probe.  Returns the id if the stack is present; otherwise 0,
 * with *empty set to the first empty slot of its probe sequence. */
static ALWAYS_INLINE uint32_t probe(uint64_t h, const uintptr_t *pcs,
                                   unsigned depth, uint64_t *empty)
{
    const uint64_t tag = h >> 32, mask = table.slot_mask;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t s = atomic_load_explicit(&table.slots[i],
                                          memory_order_acquire);
        if (s == 0) {
            *empty = i;
            return 0;
        }
        if ((s >> 32) == tag) {
            uint32_t id = (uint32_t)s;
            const stack_rec *r = &table.recs[id];
            if (r->depth == depth &&
                memcmp(table.frames + r->off, pcs, depth * sizeof *pcs) == 0)
                return id;
        }
    }
}

static NOINLINE uint32_t insert(uint64_t h, const uintptr_t *pcs,
                                unsigned depth)
{
    uint64_t slot = 0;
    pthread_mutex_lock(&table.lock);
    /* Another thread may have inserted it (or filled our empty slot)
     * between our lock-free probe and the lock: probe again. */
    uint32_t id = probe(h, pcs, depth, &slot);
    if (id == 0) {
        uint32_t count = atomic_load_explicit(&table.count,
                                              memory_order_relaxed);
        if (count >= table.max_stacks ||
            depth > table.max_frames - table.frames_used ||
            tdm__stack_spill_room(&table.spill, (count + 2) * sizeof(stack_rec),
                                  (table.frames_used + depth) * sizeof *pcs) != 0) {
            atomic_fetch_add_explicit(&table.overflows, 1,
                                      memory_order_relaxed);
        } else {
            id = count + 1;
            memcpy(table.frames + table.frames_used, pcs,
                   depth * sizeof *pcs);
            table.recs[id].off = table.frames_used;
            table.recs[id].depth = depth;
            table.frames_used += depth;
            atomic_store_explicit(&table.count, id, memory_order_release);
            atomic_store_explicit(&table.slots[slot],
                                  ((h >> 32) << 32) | id,
                                  memory_order_release);
        }
    }
    int spilled = table.spill.offset != 0;
    pthread_mutex_unlock(&table.lock);
    /* A pc in code loaded since the spill's last look (dlopen) gets its
     * module recorded, for symbolizing after a crash. */
    if (spilled && id)
        tdm__spill_note_pcs(pcs, depth);
    return id;
}

uint32_t tdm__stack_intern(const uintptr_t *pcs, unsigned depth)
{
    if (depth == 0 || !pcs)
        return 0;
    /* Not initialized: nothing to intern into (the recorder initializes
     * before it asks for stacks). */
    if (UNLIKELY(!atomic_load_explicit(&table.ready, memory_order_acquire)))
        return 0;
    if (depth > TDM_STACK_MAX_DEPTH)
        depth = TDM_STACK_MAX_DEPTH;
    uint64_t h = hash_pcs(pcs, depth), slot;
    uint32_t id = probe(h, pcs, depth, &slot);
    return id ? id : insert(h, pcs, depth);
}

NOINLINE uint32_t tdm__stack_current(unsigned skip)
{
    uintptr_t pcs[TDM_STACK_MAX_DEPTH];
    unsigned depth = capture(pcs, TDM_STACK_MAX_DEPTH, skip + 1);
    uint32_t id = tdm__stack_intern(pcs, depth);
    __asm__ volatile("" ::: "memory");
    return id;
}

/* ---- table life --------------------------------------------------------- */

/* Before fork(): no capture of another thread in flight (the gate), then
 * our three locks held (the setup's, the code ranges', the insert lock),
 * so that the child finds neither libunwind's locks nor ours taken.  The
 * forking thread's own captures (a signal handler that forks) are not
 * waited for.  A thread in the one-time setup holds unw.lock outside the
 * gate: taking that lock here waits for it. */
static void atfork_prepare(void)
{
    atomic_store_explicit(&gate.fork_pending, 1, memory_order_seq_cst);
    unsigned own = (unsigned)tls.captures;
    while (atomic_load_explicit(&gate.in_flight, memory_order_seq_cst) > own)
        sched_yield();
    void (*probe_fn)(void) = tdm__stack_fork_prepare_probe;
    if (probe_fn)
        probe_fn();
    pthread_mutex_lock(&unw.lock);
    pthread_mutex_lock(&tdm__text.lock);
    pthread_mutex_lock(&table.lock);
}

static void atfork_release(void)
{
    pthread_mutex_unlock(&table.lock);
    pthread_mutex_unlock(&tdm__text.lock);
    pthread_mutex_unlock(&unw.lock);
    atomic_store_explicit(&gate.fork_pending, 0, memory_order_release);
}

/* The child: the only thread is the one that forked, so the captures in
 * flight are its own.  Another thread that met the pending fork after the
 * prepare handler's wait and had not yet stepped out is still counted in
 * the copy of the counter: left so, it would hold up the child's own next
 * fork() for good. */
static void atfork_child(void)
{
    /* The child never writes the parent's spill file. */
    tdm__spill_fork_child();
    tdm__stack_spill_detach(&table.spill, table.map, table.map_bytes,
                            (atomic_load(&table.count) + 1) * sizeof(stack_rec),
                            table.frames_used * sizeof(uintptr_t));
    atomic_store_explicit(&gate.in_flight, (unsigned)tls.captures, memory_order_relaxed);
    atfork_release();
}

static void atfork_register(void)
{
    pthread_atfork(atfork_prepare, atfork_release, atfork_child);
}

void tdm__stack_register_atfork(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, atfork_register);
}

/* At load, before the program can start a thread or fork: registered at
 * the first capture instead, a fork() at the same moment as that capture
 * in another thread would not wait for it. */
__attribute__((constructor)) static void atfork_register_at_load(void)
{
    tdm__stack_register_atfork();
}

tdm_status tdm__stack_init(size_t max_stacks, size_t max_frames)
{
    if (max_stacks == 0 || max_frames == 0)
        return TDM_INVALID_ARGUMENT;
    unwinder_ready();
    if (atomic_load_explicit(&table.ready, memory_order_acquire))
        return TDM_OK;
    if (max_stacks > MAX_STACKS_LIMIT)
        max_stacks = MAX_STACKS_LIMIT;
    if (max_frames > MAX_FRAMES_LIMIT)
        max_frames = MAX_FRAMES_LIMIT;

    uint64_t nslots = 1;
    while (nslots < 2 * (uint64_t)max_stacks)
        nslots <<= 1;
    size_t slot_bytes = nslots * sizeof(uint64_t);
    size_t rec_bytes = (max_stacks + 1) * sizeof(stack_rec);
    size_t frame_bytes = max_frames * sizeof(uintptr_t);
    size_t bytes = slot_bytes + rec_bytes + frame_bytes;

    tdm_status st = TDM_OK;
    pthread_mutex_lock(&table.lock);
    if (!atomic_load_explicit(&table.ready, memory_order_relaxed)) {
        /* Reserved, not committed: pages are touched as stacks arrive. */
        void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        /* Records and frames (not the hash slots) from the spill file. */
        if (map != MAP_FAILED)
            tdm__stack_spill_attach(&table.spill, map, bytes, slot_bytes,
                                    slot_bytes + rec_bytes, max_stacks, max_frames);
        if (map == MAP_FAILED) {
            st = TDM_HOST_OUT_OF_MEMORY;
        } else {
            table.map = map;
            table.map_bytes = bytes;
            table.slots = (_Atomic uint64_t *)map;
            table.slot_mask = nslots - 1;
            table.recs = (stack_rec *)((char *)map + slot_bytes);
            table.frames = (uintptr_t *)((char *)map + slot_bytes + rec_bytes);
            table.max_stacks = (uint32_t)max_stacks;
            table.max_frames = (uint32_t)max_frames;
            table.frames_used = 0;
            atomic_store_explicit(&table.count, 0, memory_order_relaxed);
            atomic_store_explicit(&table.ready, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&table.lock);
    return st;
}

uint32_t tdm__stack_count(void)
{
    return atomic_load_explicit(&table.count, memory_order_acquire);
}

unsigned tdm__stack_get(uint32_t id, const uintptr_t **pcs)
{
    if (pcs)
        *pcs = NULL;
    if (id == 0 || id > atomic_load_explicit(&table.count,
                                             memory_order_acquire))
        return 0;
    const stack_rec *r = &table.recs[id];
    if (pcs)
        *pcs = table.frames + r->off;
    return r->depth;
}

uint64_t tdm__stack_overflows(void)
{
    return atomic_load_explicit(&table.overflows, memory_order_relaxed);
}

void tdm__stack_reset(void)
{
    pthread_mutex_lock(&table.lock);
    if (atomic_load_explicit(&table.ready, memory_order_relaxed)) {
        /* Unpublish first, then hand the pages back: they read as zeros
         * (every slot empty) and stop counting toward the resident set. */
        atomic_store_explicit(&table.count, 0, memory_order_release);
        if (table.spill.offset)
            tdm__stack_spill_reset(&table.spill, table.map, table.map_bytes);
        madvise(table.map, table.spill.offset ? table.spill.recs_at : table.map_bytes,
                MADV_DONTNEED);
        table.frames_used = 0;
    }
    atomic_store_explicit(&table.overflows, 0, memory_order_relaxed);
    pthread_mutex_unlock(&table.lock);
}
