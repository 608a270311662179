/* tidemark: record the device-memory life of a GPU program.
 *
 * The public C API.  Everything here is prefixed tdm_ / TDM_.  Every call
 * that can fail returns a tdm_status; outputs are trailing out-parameters.
 * Options structs begin with a `size` field (set it to sizeof the struct)
 * so that they can grow without breaking callers built against an older
 * header.
 *
 * The counterpart of PyTorch's
 *   torch.cuda.memory._record_memory_history(...)  ->  tdm_record_memory_history()
 *   torch.cuda.memory._dump_snapshot(path)          ->  tdm_dump_snapshot()
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef TIDEMARK_H
#define TIDEMARK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TDM_BUILDING_LIBRARY)
#define TDM_API __attribute__((visibility("default")))
#else
#define TDM_API
#endif

/* On the calls whose outputs mean nothing when they fail (an allocation,
 * a snapshot, the statistics, starting to record, a settings check): the
 * compiler warns when a caller drops their status.  Marks, tags, frees
 * and synchronizations are best effort and may be called as statements. */
#if defined(__GNUC__) || defined(__clang__)
#define TDM_NODISCARD __attribute__((warn_unused_result))
#else
#define TDM_NODISCARD
#endif

/* ---- version ---------------------------------------------------------- */

#define TDM_VERSION_MAJOR 0
#define TDM_VERSION_MINOR 1
#define TDM_VERSION_PATCH 0
#define TDM_VERSION_HEX \
    ((TDM_VERSION_MAJOR << 16) | (TDM_VERSION_MINOR << 8) | TDM_VERSION_PATCH)
#define TDM_VERSION_STRING "0.1.0"

/* The version of the library actually loaded, as TDM_VERSION_HEX. */
TDM_API unsigned tdm_version(void);
/* The same, as "MAJOR.MINOR.PATCH". */
TDM_API const char *tdm_version_string(void);

/* ---- status codes ------------------------------------------------------ */

/* XX(NAME, message).  TDM_OK is 0; every other status is positive. */
#define TDM_STATUS_MAP(XX)                                                     \
    XX(OK, "success")                                                          \
    XX(INVALID_ARGUMENT, "invalid argument")                                   \
    XX(OUT_OF_MEMORY, "out of device memory")                                  \
    XX(HOST_OUT_OF_MEMORY, "out of host memory")                               \
    XX(NOT_AVAILABLE, "not available in this build or on this machine")        \
    XX(UNKNOWN_POINTER, "pointer was not allocated by tidemark")               \
    XX(NO_SUCH_DEVICE, "no such device")                                       \
    XX(NOT_RECORDING, "memory history is not being recorded")                  \
    XX(BAD_CONFIG, "invalid configuration")                                    \
    XX(IO_ERROR, "input/output error")                                         \
    XX(FORMAT_ERROR, "malformed snapshot file")                                \
    XX(TRUNCATED, "snapshot file is truncated")                                \
    XX(UNSUPPORTED_VERSION, "snapshot format version not supported")           \
    XX(VENDOR_ERROR, "the vendor runtime returned an error")                   \
    XX(INTERNAL, "internal error")

typedef enum tdm_status {
#define TDM__STATUS_ENUM(name, msg) TDM_##name,
    TDM_STATUS_MAP(TDM__STATUS_ENUM)
#undef TDM__STATUS_ENUM
    TDM_STATUS_COUNT_
} tdm_status;

/* "TDM_OUT_OF_MEMORY" etc.; "TDM_UNKNOWN_STATUS" for values out of range. */
TDM_API const char *tdm_status_name(tdm_status status);
/* A short human-readable message; never NULL. */
TDM_API const char *tdm_strerror(tdm_status status);

/* ---- recording ---------------------------------------------------------- */

typedef enum tdm_record_mode {
    TDM_RECORD_OFF = 0,   /* stop recording; history is cleared */
    TDM_RECORD_STATE = 1, /* live blocks keep their stacks; no history ring */
    TDM_RECORD_ALL = 2,   /* keep a ring of the last max_entries events */
} tdm_record_mode;

typedef enum tdm_context_mode {
    TDM_CONTEXT_NONE = 0,  /* no stacks anywhere */
    TDM_CONTEXT_STATE = 1, /* stacks on live blocks/segments only */
    TDM_CONTEXT_ALLOC = 2, /* also on alloc events (frees reuse them) */
    TDM_CONTEXT_ALL = 3,   /* also captured at free time */
} tdm_context_mode;

typedef enum tdm_stacks_mode {
    TDM_STACKS_NONE = 0,
    TDM_STACKS_NATIVE = 1, /* native return addresses, symbolized at dump */
    TDM_STACKS_PYTHON = 2, /* the Python frames of the thread (a thread that
                              runs no Python code: native) */
    TDM_STACKS_ALL = 3,    /* native, with the interpreter's frames replaced
                              by the Python frames they ran (docs/stacks.md) */
} tdm_stacks_mode;

typedef struct tdm_history_options {
    size_t size;              /* sizeof(tdm_history_options) */
    tdm_record_mode enabled;  /* default TDM_RECORD_ALL */
    tdm_context_mode context; /* default TDM_CONTEXT_ALL */
    tdm_stacks_mode stacks;   /* default TDM_STACKS_NATIVE */
    size_t max_entries;       /* ring capacity in events; default 1000000 */
    int clear_history;        /* nonzero: drop events recorded so far */
} tdm_history_options;

/* Fills *opts with the defaults above (and opts->size). */
TDM_API void tdm_history_options_init(tdm_history_options *opts);

/* Starts, reconfigures or (enabled == TDM_RECORD_OFF) stops recording.
 * NULL means the defaults.  Safe to call at any time, from any thread. */
TDM_API TDM_NODISCARD tdm_status tdm_record_memory_history(const tdm_history_options *opts);

/* Nonzero while history is being recorded. */
TDM_API int tdm_is_recording(void);

/* Writes a .tdm snapshot: the event ring, the allocator state of every
 * device, stats and symbolized stacks.  The file is written to a temporary
 * name beside `path` and renamed, so `path` is never seen half-written. */
TDM_API TDM_NODISCARD tdm_status tdm_dump_snapshot(const char *path);

/* ---- TIDEMARK_CONF ---------------------------------------------------------
 * Loading libtidemark.so applies the TIDEMARK_CONF environment variable
 * (docs/configuration.md): a comma-separated list of key=value items that
 * turns recording on and says where and when snapshots are written.  A bad
 * setting prints one line on stderr and leaves recording off; the program
 * runs on. */

/* Checks a TIDEMARK_CONF text without applying it: nothing is enabled,
 * configured or printed.  It is checked exactly as loading the library
 * checks it: every key and value (units, ranks, signals, device), and the
 * dump path template, made absolute in the current folder and expanded
 * for this process.  TDM_OK when the library would accept it (NULL or
 * blank text, which leaves tidemark off, and `help` are accepted);
 * otherwise a non-OK status (TDM_BAD_CONFIG), and, when message_len > 0,
 * `message` gets the line the library would print, without the newline
 * ("tidemark: TIDEMARK_CONF: unknown key 'DUMP' (did you mean 'dump'? ...);
 * recording is off"), cut to message_len - 1 bytes (TDM_CONF_MESSAGE_MAX
 * bytes hold any line).  On TDM_OK `message` gets "".
 *
 * Note that loading libtidemark.so (dlopen included) applies the
 * TIDEMARK_CONF of the loading process's own environment; a tool that
 * checks a setting before running a program with it should load the
 * library before it puts the setting into its environment. */
#define TDM_CONF_MESSAGE_MAX 5120
TDM_API TDM_NODISCARD tdm_status tdm_conf_check(const char *conf, char *message, size_t message_len);

/* ---- annotations --------------------------------------------------------- */

/* Memory categories, as shown in timelines. */
#define TDM_CATEGORY_MAP(XX)                                                   \
    XX(UNKNOWN, "unknown")                                                     \
    XX(PARAMETER, "parameter")                                                 \
    XX(OPTIMIZER_STATE, "optimizer_state")                                     \
    XX(GRADIENT, "gradient")                                                   \
    XX(ACTIVATION, "activation")                                               \
    XX(INPUT, "input")                                                         \
    XX(TEMPORARY, "temporary")

typedef enum tdm_category {
#define TDM__CATEGORY_ENUM(name, str) TDM_CATEGORY_##name,
    TDM_CATEGORY_MAP(TDM__CATEGORY_ENUM)
#undef TDM__CATEGORY_ENUM
    TDM_CATEGORY_COUNT_
} tdm_category;

/* "parameter", "gradient", ...; "unknown" for out-of-range values. */
TDM_API const char *tdm_category_name(tdm_category category);

/* Marks the start of a named phase ("forward", "backward", "optimizer",
 * ...) on the whole process.  The name is copied. */
TDM_API tdm_status tdm_phase(const char *name);
/* Ends the phase in force: what follows is in no phase until the next
 * tdm_phase (a phase opened as a block, such as Python's
 * `with tidemark.phase("init"):`, ends with its block). */
TDM_API tdm_status tdm_phase_end(void);
/* Marks the start of the next training step (steps count from 1). */
TDM_API tdm_status tdm_step(void);
/* Allocations made by this thread until the matching pop carry `category`.
 * Tags nest up to 16 deep. */
TDM_API tdm_status tdm_tag_push(tdm_category category);
TDM_API tdm_status tdm_tag_pop(void);
/* Tags one live allocation after the fact. */
TDM_API tdm_status tdm_tag_ptr(const void *ptr, tdm_category category);
/* A free-form string stored in the snapshot header (job id, model, ...).
 * The last call wins; NULL clears it. */
TDM_API tdm_status tdm_set_metadata(const char *text);

/* ---- device allocation ---------------------------------------------------- */

/* A stream or queue handle (cudaStream_t, hipStream_t, ...); 0 is the
 * device's default stream. */
typedef uintptr_t tdm_stream;

/* Allocates `size` bytes on `device` (an ordinal of the configured device
 * kind; the `sim` device by default).  *ptr is set to NULL on failure. */
TDM_API TDM_NODISCARD tdm_status tdm_malloc(void **ptr, size_t size, int device,
                              tdm_stream stream);
/* Frees memory from tdm_malloc.  NULL is accepted and ignored. */
TDM_API tdm_status tdm_free(void *ptr);

/* Number of devices tidemark serves. */
TDM_API TDM_NODISCARD tdm_status tdm_device_count(int *count);
/* Free and total bytes of a device, as the provider reports them. */
TDM_API TDM_NODISCARD tdm_status tdm_mem_get_info(int device, size_t *free_bytes,
                                    size_t *total_bytes);

/* One statistic, as torch.cuda.memory_stats keeps them (bytes or counts). */
typedef struct tdm_stat {
    int64_t current;
    int64_t peak;
    int64_t allocated; /* sum of increments */
    int64_t freed;     /* sum of decrements */
} tdm_stat;

typedef struct tdm_stats {
    size_t size;                /* sizeof(tdm_stats), set by the caller */
    tdm_stat allocated_bytes;   /* bytes in blocks handed out (rounded) */
    tdm_stat reserved_bytes;    /* bytes in segments held from the provider */
    tdm_stat active_bytes;      /* allocated + freed-but-pending bytes */
    tdm_stat requested_bytes;   /* bytes the program asked for */
    tdm_stat allocation;        /* live allocations (count) */
    tdm_stat segment;           /* live segments (count) */
    uint64_t num_alloc_retries; /* provider failures retried after freeing cache */
    uint64_t num_ooms;          /* out-of-memory returns */
} tdm_stats;

/* Fills *stats for `device`; stats->size must be set. */
TDM_API TDM_NODISCARD tdm_status tdm_memory_stats(int device, tdm_stats *stats);
/* Resets the peaks of `device` to the current values. */
TDM_API tdm_status tdm_reset_peak_stats(int device);

/* ---- caching allocator: pools, cache, streams ---------------------------
 * With alloc_mode=passthrough there is no cache: tdm_empty_cache does
 * nothing and the small/large pools stay empty. */

/* The pool a statistic is kept for, as torch.cuda.memory_stats splits
 * them ("all", "small_pool", "large_pool"). */
typedef enum tdm_stat_pool {
    TDM_STAT_POOL_ALL = 0,
    TDM_STAT_POOL_SMALL = 1, /* blocks of <= 1 MiB, from 2 MiB segments */
    TDM_STAT_POOL_LARGE = 2,
} tdm_stat_pool;

/* Like tdm_memory_stats, for one pool.  num_alloc_retries and num_ooms
 * are per device and the same in every pool. */
TDM_API TDM_NODISCARD tdm_status tdm_memory_stats_pool(int device, tdm_stat_pool pool,
                                         tdm_stats *stats);
/* Gives every cached segment with no live block back to the device
 * (torch.cuda.empty_cache).  device -1: every device. */
TDM_API tdm_status tdm_empty_cache(int device);
/* Marks `ptr` as used by work queued on `stream` (a stream other than the
 * one it was allocated on): a later tdm_free only completes once that
 * stream's work is done (torch's Tensor.record_stream). */
TDM_API tdm_status tdm_record_stream(void *ptr, tdm_stream stream);
/* Waits for the work queued on `stream` (on every device).  On the sim
 * device there is no real work: frees waiting on `stream` complete. */
TDM_API tdm_status tdm_stream_synchronize(tdm_stream stream);
/* Waits for all work on `device` (-1: every device); frees waiting on any
 * of its streams complete. */
TDM_API tdm_status tdm_device_synchronize(int device);

/* ==== PyTorch without preloading ==========================================
 *
 * libtidemark.so serves PyTorch's CUDA memory as a pluggable allocator:
 *
 *   a = torch.cuda.memory.CUDAPluggableAllocator(
 *           "libtidemark.so", "tdm_torch_alloc", "tdm_torch_free")
 *   torch.cuda.memory.change_current_allocator(a)
 *
 * (python/tidemark.py wraps this: tidemark.pluggable_allocator()).  Memory
 * comes from tidemark's allocator (TIDEMARK_CONF's `alloc_mode`, `cache`
 * by default) over the configured device kind; the sim device by default,
 * but when the allocator has not started yet and the kind is the default
 * sim, the first call switches to the CUDA devices if there are any
 * (torch needs real device memory).  Every allocation is recorded with
 * the caller's stack, as tdm_malloc's are.
 *
 * `stream` is a cudaStream_t (hipStream_t on ROCm builds), passed as a
 * pointer so that no vendor header is needed.  Failures return NULL
 * (torch then raises its out-of-memory error); frees of pointers tidemark
 * did not hand out are ignored.  The optional hooks take the types of
 * CUDAPluggableAllocator's set_init_fn, set_reset_fn,
 * set_memory_fraction_fn, set_base_alloc_fn and set_record_stream_fn. */

TDM_API void *tdm_torch_alloc(size_t size, int device, void *stream);
TDM_API void tdm_torch_free(void *ptr, size_t size, int device, void *stream);
/* Starts the allocator (torch passes its device count, which may be 0). */
TDM_API void tdm_torch_init(int device_count);
/* torch.cuda.empty_cache(): tdm_empty_cache on every device. */
TDM_API void tdm_torch_reset(void);
/* torch.cuda.set_per_process_memory_fraction(fraction, device): the bytes
 * tidemark holds on `device` stay under fraction x its capacity. */
TDM_API void tdm_torch_memory_fraction(double fraction, int device);
/* getBaseAllocation(ptr, &size), what torch shares a CUDA tensor by
 * (cudaIpcGetMemHandle of the base, plus ptr's offset in it): the device
 * allocation that holds block `ptr` -- its segment's base, *size its bytes.
 * A block of an expandable segment (no one allocation holds more) and a
 * pointer tidemark did not hand out are their own base; *size is then the
 * block's bytes, or 0.  `size` may be NULL. */
TDM_API void *tdm_torch_base_alloc(void *ptr, size_t *size);
/* Tensor.record_stream(stream): tdm_record_stream. */
TDM_API void tdm_torch_record_stream(void *ptr, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* TIDEMARK_H */
