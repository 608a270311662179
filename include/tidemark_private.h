/* include/tidemark_private.h: libtidemark's private interface, what the
 * command-line tool and the preload library use of it beyond tidemark.h.
 * Never installed: programs use tidemark.h alone.
 *
 * libtidemark.so exports two version nodes (cmake/libtidemark.map):
 * TIDEMARK_1, the functions of tidemark.h, kept compatible across
 * releases of one SONAME; and TIDEMARK_PRIVATE_<TDM_PRIVATE_ABI_VERSION>,
 * the tdm__* functions, which change whenever this header does.  The
 * preload library links the private node by version, so the loader
 * refuses a mismatched pair; the tool loads the library with dlopen and
 * asks tdm__private_abi() before it calls anything by name.
 *
 * What is here: replaying a recorded request stream through the caching
 * allocator on a fresh sim device (`tidemark replay`), which the tool
 * reaches by name, so this part holds only plain types.
 */
#ifndef TIDEMARK_PRIVATE_H
#define TIDEMARK_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

/* Raised, with the version node in cmake/libtidemark.map, at every change
 * of what this header declares. */
#define TDM_PRIVATE_ABI_VERSION 1u

/* unsigned tdm__private_abi(void): the TDM_PRIVATE_ABI_VERSION the library
 * was built with. */
typedef unsigned (*tdm_private_abi_fn)(void);
#define TDM_PRIVATE_ABI_SYMBOL "tdm__private_abi"

/* What a request does (tdm_replay_op.kind). */
enum tdm_replay_kind {
    TDM_REPLAY_ALLOC = 0, /* allocate `size` bytes on `stream` as `id` */
    TDM_REPLAY_FREE = 1,  /* free `id`, its block reusable at once */
    /* Free `id` while another stream may still use it (tdm_record_stream):
     * the block waits, unusable, until its completion below. */
    TDM_REPLAY_FREE_DEFERRED = 2,
    /* A deferred free of `id` completes here (a stream or device sync). */
    TDM_REPLAY_COMPLETE = 3,
    /* A deferred free of `id` completed inside the next allocation: its
     * out-of-memory path waited for pending frees before giving cached
     * memory back.  The replay leaves it to that allocation's own path
     * and completes it after the allocation if it is still waiting. */
    TDM_REPLAY_COMPLETE_IN_ALLOC = 4,
};

/* One request of the stream: an allocation of `size` bytes on `stream`
 * known afterwards as `id` (dense, < the id count given), or a free or
 * free completion of allocation `id` (enum tdm_replay_kind). */
typedef struct tdm_replay_op {
    uint64_t id;
    uint64_t size;
    uint64_t stream;
    uint32_t kind; /* enum tdm_replay_kind */
    uint32_t reserved_;
} tdm_replay_op;

typedef struct tdm_replay_result {
    uint64_t peak_reserved;    /* bytes held from the device, at most */
    uint64_t peak_allocated;   /* bytes in live blocks (rounded), at most */
    uint64_t reserved_at_peak; /* reserved when allocated was at its peak */
    uint64_t segments;         /* device allocations that succeeded */
    uint64_t device_calls;     /* device allocation calls, failed ones too */
    uint64_t device_frees;     /* segments given back to the device */
    uint64_t retries;          /* allocations retried after freeing cache */
    uint64_t ooms;             /* allocations that failed for good */
    uint64_t first_oom_op;     /* index of the first of them in the ops */
    uint64_t first_oom_size;   /* its bytes */
} tdm_replay_result;

/* Called for each device allocation (freed 0) and free (freed 1) of a
 * segment, in order, with its bytes: the replay's segment timeline. */
typedef void (*tdm_replay_segment_fn)(void *ctx, int freed, uint64_t size);

/* Replays ops[0..n) (allocation ids below `ids`) in cache mode on one sim
 * device of `capacity` bytes, with the caching-allocator settings of
 * `conf` (TIDEMARK_CONF syntax; only max_split_size,
 * roundup_power2_divisions and garbage_collection_threshold are used,
 * NULL or "" = defaults).  What is still live at the end is freed.
 * TDM_BAD_CONFIG with the parser's line in why[0..why_len) for a bad
 * `conf`.  Not thread-safe: it owns the process's allocator meanwhile. */
typedef int (*tdm_replay_fn)(const char *conf, uint64_t capacity,
                             const tdm_replay_op *ops, size_t n, uint64_t ids,
                             tdm_replay_segment_fn on_segment, void *ctx,
                             tdm_replay_result *out, char *why, size_t why_len);
#define TDM_REPLAY_SYMBOL "tdm__replay"

/* What tdm__replay_save writes besides: the replayed run as a .tdm, made
 * by tidemark's recorder (events without stacks, the allocator's state
 * where the ops end, stats), with the header's configuration the
 * setting replayed. */
typedef struct tdm_replay_save {
    const char *path;         /* the .tdm to write */
    const uint64_t *op_times; /* [n] each op's recorded time (ns); every
                               * event the op caused is stamped with it.
                               * NULL: the replay's own clock */
    int replace;              /* replace a file at path; else refused */
    /* Told, for each event of the file in order, the op that caused it
     * (before the file is written; NULL: not told), so that the caller
     * can give the events their recording's stacks, phases and
     * categories (the replay itself records none). */
    void (*on_event_op)(void *ctx, size_t event, size_t op);
    void *op_ctx;
} tdm_replay_save;

/* tdm__replay, and `save` (NULL: nothing) written once the ops are done.
 * A failed write returns its status (TDM_IO_ERROR with errno set) and
 * leaves nothing at save->path; *out is complete either way. */
typedef int (*tdm_replay_save_fn)(const char *conf, uint64_t capacity,
                                  const tdm_replay_op *ops, size_t n, uint64_t ids,
                                  tdm_replay_segment_fn on_segment, void *ctx,
                                  tdm_replay_result *out, char *why, size_t why_len,
                                  const tdm_replay_save *save);
#define TDM_REPLAY_SAVE_SYMBOL "tdm__replay_save"

#endif
