/* snapshot/recorder.c: switching recording on and off, and the hot path
 * that turns an allocator action into a ring entry.
 *
 * Hot path (tdm__rec_event): relaxed loads of the switches and the ring
 * pointer, one clock read, plain stores into this thread's chunk of the
 * ring (ring.h).  No lock, no malloc, no stdio.  Configuration takes tdm__recorder_state.lock and swaps the
 * ring pointer; a ring taken out of service is retired (its pages given
 * back) but never unmapped, so a writer that loaded the old pointer a
 * moment earlier still writes into valid memory.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recorder_internal.h"
#include "procinfo.h"
#include "spare_map.h"
#include "spill.h"
#include "stack.h"
#include "pyframes.h"
#include "clock.h"

tdm__rec_switches tdm__rec;
_Atomic unsigned tdm__rec_notes;

static _Atomic(tdm__rec_refresh_fn) refresh_fns[TDM__REC_REFRESH_MAX];

void tdm__rec_add_refresh(tdm__rec_refresh_fn fn)
{
    for (int i = 0; fn && i < TDM__REC_REFRESH_MAX; i++) {
        tdm__rec_refresh_fn have = atomic_load_explicit(&refresh_fns[i], memory_order_acquire);
        if (have == fn)
            return;
        if (have == NULL) {
            tdm__rec_refresh_fn expected = NULL;
            if (atomic_compare_exchange_strong(&refresh_fns[i], &expected, fn) ||
                expected == fn)
                return;
        }
    }
}

void tdm__rec_run_refresh(void)
{
    for (int i = 0; i < TDM__REC_REFRESH_MAX; i++) {
        tdm__rec_refresh_fn fn = atomic_load_explicit(&refresh_fns[i], memory_order_acquire);
        if (fn == NULL)
            return;
        fn();
    }
}
tdm__recorder tdm__recorder_state = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .alloc_mode = "passthrough",
    .phase_count = 1,
};

/* ---- the lock and fork -------------------------------------------------- */

static void fork_prepare(void) { pthread_mutex_lock(&tdm__recorder_state.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&tdm__recorder_state.lock); }
static void fork_child(void)
{
    pthread_mutex_unlock(&tdm__recorder_state.lock);
    tdm__dump_after_fork_child();
    tdm__spare_maps_fork_child();
    /* The chunks other threads held would stay held for ever. */
    tdm__ring_fork_child(atomic_load(&tdm__rec.ring));
}

static void register_atfork_once(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void tdm__rec_register_atfork(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork_once);
}

/* At load, before the program can start a thread or fork.  alloc.c also
 * calls tdm__rec_register_atfork before registering its own handlers, so
 * the order holds whichever constructor runs first. */
__attribute__((constructor)) static void register_atfork_at_load(void)
{
    tdm__rec_register_atfork();
}

/* Sizes of the stack intern table: unique stacks and total frames. */
#define TDM_MAX_STACKS (1u << 20)
#define TDM_MAX_STACK_FRAMES (1u << 24)

/* tdm__rec_event and tdm__rec_alloc_stack are called by the allocator,
 * which is called by the application (or a hook): skip both. */
#define TDM_REC_SKIP 1

void tdm_history_options_init(tdm_history_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->enabled = TDM_RECORD_ALL;
    opts->context = TDM_CONTEXT_ALL;
    opts->stacks = TDM_STACKS_NATIVE;
    opts->max_entries = 1000000;
    opts->clear_history = 0;
}

/* Copies the caller's options over the defaults, honouring opts->size so
 * that callers built against an older, shorter struct keep working. */
static tdm_status read_options(const tdm_history_options *in,
                               tdm_history_options *out)
{
    tdm_history_options_init(out);
    if (!in)
        return TDM_OK;
    if (in->size < offsetof(tdm_history_options, clear_history) + sizeof(int))
        return TDM_INVALID_ARGUMENT;
    size_t n = in->size < sizeof *out ? in->size : sizeof *out;
    memcpy(out, in, n);
    out->size = sizeof *out;
    if ((unsigned)out->enabled > TDM_RECORD_ALL ||
        (unsigned)out->context > TDM_CONTEXT_ALL ||
        (unsigned)out->stacks > TDM_STACKS_ALL || out->max_entries == 0)
        return TDM_INVALID_ARGUMENT;
    return TDM_OK;
}

tdm_status tdm_record_memory_history(const tdm_history_options *in)
{
    tdm_history_options opts;
    tdm_status st = read_options(in, &opts);
    if (st != TDM_OK)
        return st;
    tdm__recorder *r = &tdm__recorder_state;
    if (opts.enabled != TDM_RECORD_OFF)
        tdm__clock_init();
    int want_stacks = opts.enabled != TDM_RECORD_OFF &&
                      opts.context != TDM_CONTEXT_NONE &&
                      opts.stacks != TDM_STACKS_NONE;
    if (want_stacks) {
        st = tdm__stack_init(TDM_MAX_STACKS, TDM_MAX_STACK_FRAMES);
        if (st != TDM_OK)
            return st;
        /* Looks for an interpreter once; without one (or one it cannot
         * read) python and all capture native stacks. */
        if (opts.stacks != TDM_STACKS_NATIVE)
            tdm__py_setup();
    }

    pthread_mutex_lock(&r->lock);
    tdm__ring *old = atomic_load(&tdm__rec.ring);
    tdm__ring *ring = old;
    int fresh = opts.enabled != TDM_RECORD_ALL || !old || opts.clear_history ||
                old->capacity != opts.max_entries;
    if (fresh) {
        ring = NULL;
        if (opts.enabled == TDM_RECORD_ALL) {
            st = tdm__ring_create(opts.max_entries, &ring);
            if (st != TDM_OK) {
                pthread_mutex_unlock(&r->lock);
                return st;
            }
        }
        if (old && !opts.clear_history && opts.enabled == TDM_RECORD_ALL) {
            /* A resize keeps counting what the old ring had dropped and
             * holds; PyTorch likewise loses history on reconfiguration. */
            atomic_fetch_add(&r->carried_drops, tdm__ring_events(old));
        } else {
            atomic_store(&r->carried_drops, 0);
        }
        atomic_store(&tdm__rec.ring, ring);
        tdm__ring_retire(old);
    }
    if (atomic_load(&tdm__rec.mode) == TDM_RECORD_OFF || fresh)
        r->start_time_us = tdm__now_us();
    r->opts = opts;
    atomic_store(&tdm__rec.context, opts.context);
    atomic_store(&tdm__rec.stacks, want_stacks ? opts.stacks : TDM_STACKS_NONE);
    atomic_store(&tdm__rec.mode, opts.enabled);
    pthread_mutex_unlock(&r->lock);
    if (opts.enabled == TDM_RECORD_OFF)
        tdm__spare_maps_release(); /* no more dumps of this history */
    return TDM_OK;
}

void tdm__rec_stop(void)
{
    tdm_history_options off;
    tdm_history_options_init(&off);
    off.enabled = TDM_RECORD_OFF;
    tdm_status st = tdm_record_memory_history(&off);
    (void)st; /* options of this build's size, recording off: always TDM_OK */
}

int tdm_is_recording(void) { return tdm__rec_on(); }

/* Captures with this function's caller's frame still on the stack: the
 * barrier after the call stops the compiler from turning it into a tail
 * call, which would remove our frame and make `skip` drop one frame of the
 * program's own. */
static inline __attribute__((always_inline)) uint32_t capture_here(unsigned skip)
{
    int stacks = atomic_load_explicit(&tdm__rec.stacks, memory_order_relaxed);
    uint32_t id = stacks == TDM_STACKS_NATIVE
                      ? tdm__stack_current(skip)
                      : tdm__stack_current_python(skip, stacks == TDM_STACKS_ALL);
    __asm__ __volatile__("" ::: "memory");
    return id;
}

uint32_t tdm__rec_capture(unsigned skip)
{
    return capture_here(skip + TDM_REC_SKIP);
}

/* This thread's tag stack (tdm_tag_push).  Default (dynamic) TLS model on
 * purpose: initial-exec would flag the library STATIC_TLS and make dlopen
 * fail (Python ctypes, PyTorch's pluggable allocator). */
#define TDM_TAG_DEPTH 16
static __thread uint8_t tag_stack[TDM_TAG_DEPTH];
static __thread int tag_depth;
/* Set at the first tdm_tag_push of any thread (recorder.h). */
_Atomic int tdm__rec_tags_used;

uint8_t tdm__rec_tagged_category(void)
{
    int d = tag_depth;
    return d > 0 ? tag_stack[(d > TDM_TAG_DEPTH ? TDM_TAG_DEPTH : d) - 1]
                 : TDM_CATEGORY_UNKNOWN;
}

tdm_status tdm_tag_push(tdm_category category)
{
    if ((unsigned)category >= TDM_CATEGORY_COUNT_)
        return TDM_INVALID_ARGUMENT;
    if (tag_depth >= TDM_TAG_DEPTH)
        return TDM_INVALID_ARGUMENT;
    if (!atomic_load_explicit(&tdm__rec_tags_used, memory_order_relaxed))
        atomic_store_explicit(&tdm__rec_tags_used, 1, memory_order_relaxed);
    tag_stack[tag_depth++] = (uint8_t)category;
    return TDM_OK;
}

tdm_status tdm_tag_pop(void)
{
    if (tag_depth == 0)
        return TDM_INVALID_ARGUMENT;
    tag_depth--;
    return TDM_OK;
}

void tdm__rec_event_now(unsigned action, int device, uint64_t addr, uint64_t size,
                        uint64_t requested, uint64_t stream, uint32_t stack_id)
{
    tdm__rec_event_inline(0, tdm__rec_current_category(), action, device, addr, size,
                          requested, stream, stack_id);
}

void tdm__rec_set_state_source(tdm__state_source_fn source)
{
    atomic_store(&tdm__recorder_state.state_source, source);
}

void tdm__rec_set_tag_listener(tdm__tag_listener_fn listener)
{
    atomic_store(&tdm__recorder_state.tag_listener, listener);
}

void tdm__rec_set_alloc_mode(const char *mode)
{
    pthread_mutex_lock(&tdm__recorder_state.lock);
    tdm__recorder_state.alloc_mode = mode;
    pthread_mutex_unlock(&tdm__recorder_state.lock);
    tdm__spill_set_alloc_mode(mode);
}

/* Replaces *slot with a copy of text (NULL clears).  Caller holds the lock. */
static tdm_status replace_string(char **slot, const char *text)
{
    char *copy = NULL;
    if (text && !(copy = strdup(text)))
        return TDM_HOST_OUT_OF_MEMORY;
    free(*slot);
    *slot = copy;
    return TDM_OK;
}

void tdm__rec_set_config_text(const char *text)
{
    pthread_mutex_lock(&tdm__recorder_state.lock);
    replace_string(&tdm__recorder_state.config_text, text);
    pthread_mutex_unlock(&tdm__recorder_state.lock);
}

tdm_status tdm_set_metadata(const char *text)
{
    pthread_mutex_lock(&tdm__recorder_state.lock);
    tdm_status st = replace_string(&tdm__recorder_state.metadata, text);
    pthread_mutex_unlock(&tdm__recorder_state.lock);
    return st;
}
