/* format/snap_model.h: a snapshot held in memory, and the .tdm file
 * writer and reader that move it to and from disk.
 *
 * This is the one shape every consumer sees: the recorder builds a
 * tdm_snap at dump time and hands it to tdm__snap_write(); the reader
 * returns one from a file; the CLI and the exporters work on it.  The
 * writer never keeps pointers into it after returning.
 *
 * Ownership: a tdm_snap returned by tdm__snap_read_* owns every array and
 * string it points to; free it with tdm__snap_free().  A tdm_snap built by
 * hand for tdm__snap_write() is the builder's to free.
 *
 * Stacks: a stack is a list of frame indices, innermost (most recent call)
 * first.  Stack id 0 means "no stack"; stacks[0] exists and is empty, so
 * stack ids index `stacks` directly.
 */
#ifndef TDM_FORMAT_SNAP_MODEL_H
#define TDM_FORMAT_SNAP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "event.h"

/* The .tdm format version this build writes.  Readers accept 1..this. */
#define TDM_FORMAT_VERSION 1

typedef struct tdm_snap_header {
    uint32_t format_version; /* TDM_FORMAT_VERSION when written */
    const char *tool_version; /* "0.1.0" */
    const char *host;
    int64_t pid;
    int32_t rank;       /* -1 when not in a multi-rank job */
    int32_t local_rank; /* -1 when unknown */
    int32_t world_size; /* 0 when unknown */
    uint64_t start_time_us; /* recording start, µs since the Unix epoch */
    uint64_t dump_time_us;  /* when the dump was taken */
    const char *config;     /* TIDEMARK_CONF as given, or "" */
    const char *metadata;   /* tdm_set_metadata text, or "" */
    const char *notes;      /* what the recording could not see, a line
                               each ("" when nothing; format 1.3) */
    const char *command;    /* /proc/self/cmdline, spaces between args */
    uint8_t record_mode;    /* tdm_record_mode */
    uint8_t context_mode;   /* tdm_context_mode */
    uint8_t stacks_mode;    /* tdm_stacks_mode */
    uint64_t max_entries;
    const char *alloc_mode; /* "passthrough", "cache", "observe" */
} tdm_snap_header;

typedef struct tdm_snap_device {
    int32_t index;     /* device ordinal */
    const char *vendor; /* a vendor's name (vendors.def): "sim", "cuda", ... */
    const char *name;   /* e.g. "sim0", "NVIDIA H100 80GB HBM3" */
    uint64_t capacity;  /* bytes */
} tdm_snap_device;

/* What a frame is (format 1.2; older files hold native frames only). */
typedef enum tdm_frame_kind {
    /* The function a return address lies in, as the symbol table names it. */
    TDM_FRAME_NATIVE = 0,
    /* A function the compiler inlined at that address: same pc as the
     * native frame holding it.  An inline chain is stored innermost first,
     * its inlined frames right before the native frame that contains them;
     * each caller's file:line is where it calls the frame before it. */
    TDM_FRAME_INLINED = 1,
    /* A Python frame: function is the qualified name, file the .py path,
     * module "" or "<python>"; pc is whatever identifies the frame. */
    TDM_FRAME_PYTHON = 2,
} tdm_frame_kind;
#define TDM_FRAME_KIND_MAX TDM_FRAME_PYTHON

typedef struct tdm_snap_frame {
    uint64_t pc;          /* return address as captured */
    const char *function; /* "train_step", or "??" when unknown; raw as the
                             symbol table has it (C++ names mangled) */
    const char *file;     /* source path, or "" when unknown */
    uint32_t line;        /* 0 when unknown */
    const char *module;   /* shared object path, or "" */
    uint8_t kind;         /* tdm_frame_kind; last so that positional
                             initializers that omit it make native frames */
} tdm_snap_frame;

typedef struct tdm_snap_stack {
    uint32_t depth;
    const uint32_t *frames; /* indices into tdm_snap.frames */
} tdm_snap_stack;

typedef enum tdm_block_state {
    TDM_BLOCK_INACTIVE = 0,
    TDM_BLOCK_ACTIVE_ALLOCATED = 1,
    TDM_BLOCK_ACTIVE_PENDING_FREE = 2,
} tdm_block_state;

typedef enum tdm_pool_kind {
    TDM_POOL_LARGE = 0,
    TDM_POOL_SMALL = 1,
    TDM_POOL_NONE = 2, /* observe/pass-through: one allocation per segment */
} tdm_pool_kind;

typedef struct tdm_snap_block {
    uint64_t address;
    uint64_t size;           /* bytes, rounded */
    uint64_t requested_size; /* bytes asked for (0 for inactive blocks) */
    uint64_t alloc_time_ns;  /* when it was handed out, 0 if inactive */
    uint32_t stack_id;
    uint8_t state;    /* tdm_block_state */
    uint8_t category; /* tdm_category */
} tdm_snap_block;

typedef struct tdm_snap_segment {
    int32_t device;
    uint8_t pool;          /* tdm_pool_kind */
    uint8_t is_expandable;
    uint64_t address;
    uint64_t total_size;   /* bytes; equals the sum of its blocks' sizes */
    uint64_t stream;
    uint32_t stack_id;     /* stack when the segment was made */
    uint32_t first_block;  /* index into tdm_snap.blocks */
    uint32_t block_count;  /* blocks in address order */
} tdm_snap_segment;

/* One statistics row: a device's stats for one pool.  At most one row per
 * (device, pool); every device with stats has a pool-0 ("all") row, and
 * only a caching allocator adds small and large pool rows.  Files written
 * before format 1.1 have no pool column: their rows read as pool 0. */
typedef struct tdm_snap_device_stats {
    int32_t device;
    uint8_t pool;   /* tdm_stat_pool: 0 all, 1 small_pool, 2 large_pool */
    tdm_stats stats;
} tdm_snap_device_stats;

/* What kind of memory an imported mapping is (format 1.3). */
typedef enum tdm_import_kind {
    /* cuIpcOpenMemHandle / cudaIpcOpenMemHandle / hipIpcOpenMemHandle:
     * another process's allocation mapped here. */
    TDM_IMPORT_IPC = 0,
    /* A physical allocation imported from a shareable handle
     * (cuMemImportFromShareableHandle) and mapped here. */
    TDM_IMPORT_SHAREABLE = 1,
    /* A further mapping of a physical allocation this process made, which
     * is counted once, at its first mapping. */
    TDM_IMPORT_PEER_MAPPING = 2,
    /* A multicast object's mapping: memory bound to it is counted where
     * it was made. */
    TDM_IMPORT_MULTICAST = 3,
} tdm_import_kind;
#define TDM_IMPORT_KIND_MAX TDM_IMPORT_MULTICAST
/* source_device of an imported mapping whose exporting device is not
 * known (-1 is the host). */
#define TDM_IMPORT_SOURCE_UNKNOWN (-2)

/* Device memory this process maps but did not allocate (format 1.3):
 * counted apart, never in a device's allocated or reserved bytes. */
typedef struct tdm_snap_imported {
    int32_t device;        /* whose address space maps it (-1 host) */
    int32_t source_device; /* the exporting device as this process numbers
                              it; -1 host; TDM_IMPORT_SOURCE_UNKNOWN */
    uint8_t kind;          /* tdm_import_kind */
    uint64_t address;      /* base of the mapping */
    uint64_t size;         /* bytes mapped */
    uint32_t stack_id;     /* stack of the call that mapped it */
    uint64_t map_time_ns;  /* when it was mapped; 0 when not recording */
} tdm_snap_imported;

/* What a kept PyTorch memory-history annotation is (format 1.4). */
typedef enum tdm_annotation_kind {
    /* The trace entries from this place on carry `text` as their
     * user_metadata (torch.cuda.memory._set_memory_metadata). */
    TDM_ANNOTATION_USER_METADATA = 0,
    /* An `annotate` trace entry (torch.cuda.memory._annotate_tensor):
     * `text` on the block at addr, size bytes, of `device`. */
    TDM_ANNOTATION_TENSOR = 1,
    /* external_annotations entries (record_function with
     * global_record_annotations): `text` is the name. */
    TDM_ANNOTATION_START = 2,
    TDM_ANNOTATION_END = 3,
} tdm_annotation_kind;
#define TDM_ANNOTATION_KIND_MAX TDM_ANNOTATION_END

/* One annotation of an imported PyTorch history, kept so that exporting
 * the file gives PyTorch's back (format 1.4).  Rows are in history order. */
typedef struct tdm_snap_annotation {
    uint64_t before_event; /* its place: before event i (event_count: after all) */
    uint64_t time_ns;
    int32_t device;        /* -1 host; the device PyTorch named */
    uint8_t kind;          /* tdm_annotation_kind */
    uint64_t addr, size;   /* of a tensor annotation; else 0 */
    const char *text;
} tdm_snap_annotation;

typedef struct tdm_snap {
    tdm_snap_header header;
    tdm_snap_device *devices;    size_t device_count;
    const char **phase_names;    size_t phase_count;  /* [0] = "" */
    tdm_snap_frame *frames;      size_t frame_count;
    tdm_snap_stack *stacks;      size_t stack_count;  /* [0] = empty */
    tdm_event *events;           size_t event_count;  /* oldest first */
    tdm_snap_segment *segments;  size_t segment_count;
    tdm_snap_block *blocks;      size_t block_count;
    tdm_snap_device_stats *stats; size_t stats_count;
    tdm_snap_imported *imported;  size_t imported_count; /* format 1.3 */
    tdm_snap_annotation *annotations; size_t annotation_count; /* format 1.4 */
    uint64_t dropped_events; /* events the ring overwrote before the dump */
    int complete;            /* reader: the end record was present */
    void *owner_;            /* reader's private arena; do not touch */
} tdm_snap;

/* The index of the stats row of (device, pool) in s, or s->stats_count
 * when there is none (the first, should a file repeat one). */
static inline size_t tdm__snap_stats_index(const tdm_snap *s, int device, int pool)
{
    size_t i = 0;
    while (i < s->stats_count && (s->stats[i].device != device || s->stats[i].pool != pool))
        i++;
    return i;
}

/* Where and why reading stopped. */
typedef struct tdm_read_error {
    uint64_t offset;      /* byte offset into the file */
    char message[256];    /* "truncated record at byte 1234 (events)" ... */
} tdm_read_error;

/* Writes `snap` to `path` atomically (temporary file in the same folder,
 * fsync, rename).  On failure nothing is left at `path` or beside it. */
tdm_status tdm__snap_write(const tdm_snap *snap, const char *path);
/* tdm__snap_write, but with `replace` 0 the file is moved into place only
 * where nothing is: TDM_IO_ERROR with errno EEXIST when something is. */
tdm_status tdm__snap_write_as(const tdm_snap *snap, const char *path, int replace);

/* The first bytes of every .tdm file: a msgpack array of three, then the
 * string "tidemark" (docs/format.md, "file signature"); the format's
 * major and minor version follow. */
#define TDM_SNAP_SIGNATURE "\x93\xa8tidemark"
#define TDM_SNAP_SIGNATURE_LEN 10u

/* Reads a .tdm file.  On TDM_FORMAT_ERROR / TDM_TRUNCATED /
 * TDM_UNSUPPORTED_VERSION / TDM_IO_ERROR, *err (when not NULL) says where
 * and why; *out is NULL.  A file cut after its last whole record is
 * TDM_TRUNCATED, but when `partial_ok` is nonzero the records before the cut
 * are returned in *out with complete == 0 and the status is TDM_OK. */
tdm_status tdm__snap_read_file(const char *path, int partial_ok,
                               tdm_snap **out, tdm_read_error *err);
tdm_status tdm__snap_read_buffer(const void *data, size_t len, int partial_ok,
                                 tdm_snap **out, tdm_read_error *err);
void tdm__snap_free(tdm_snap *snap);

#endif
