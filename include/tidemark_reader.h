/* tidemark_reader.h: reading snapshots from a program (the Python reader,
 * notebooks, a test suite's own checks), through the same reader and
 * analysis model as the `tidemark` command: a .tdm file, a PyTorch
 * snapshot pickle (torch.cuda.memory._dump_snapshot) or any other format
 * `tidemark import` recognizes; the peak and the sites at it as `tidemark
 * summary` gives them; the bytes per category as `tidemark categories`
 * gives them.
 *
 * It lives in its own library, libtidemark_reader.so, not in
 * libtidemark.so: the recording library is loaded into programs tidemark
 * did not build and carries no reader of other tools' files and no
 * analysis.  The reader never records and needs no recording library.
 *
 * Exports: this header's functions, and tidemark.h's tdm_status_name,
 * tdm_strerror and tdm_category_name (version node TIDEMARK_READER_1,
 * cmake/libtidemark_reader.map).
 *
 * Ownership: a tdm_snapshot owns every row and string its accessors
 * return; they stay valid until tdm_snapshot_free.  Arrays of sites are
 * the caller's (tdm_snapshot_sites_free).
 *
 * Threads: calls are serialized inside the library (the model keeps a
 * little process-wide state: the stack display's caches, the importers'
 * list), so several threads may load and query snapshots; one snapshot's
 * rows may be read by any number of threads.
 *
 * Positions: an event position `seq` means "just after event seq" (an
 * index into the events); -1 is the start of the recorded window.
 * docs/python.md shows the Python side; docs/format.md the file. */
#ifndef TIDEMARK_READER_H
#define TIDEMARK_READER_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_snapshot tdm_snapshot;

/* tdm_snapshot_load flags. */
enum {
    /* A truncated .tdm file is read up to its last whole record (TDM_OK,
     * info.truncated set) instead of failing with TDM_TRUNCATED. */
    TDM_SNAPSHOT_PARTIAL_OK = 1u << 0,
};

/* Reads the snapshot at `path` (a file; a directory of several ranks is
 * the caller's to list: its *.tdm files directly inside) and builds its
 * model.  On failure *out is NULL and `err` (errlen bytes, may be NULL)
 * holds the reader's message, the byte offset included: "x.tdm:
 * malformed snapshot file at byte 1234: ...", "x.tdm is truncated at byte
 * 1234 (...)".  Returns TDM_OK, TDM_IO_ERROR, TDM_FORMAT_ERROR,
 * TDM_TRUNCATED, TDM_UNSUPPORTED_VERSION, TDM_INVALID_ARGUMENT or
 * TDM_HOST_OUT_OF_MEMORY. */
TDM_API TDM_NODISCARD tdm_status tdm_snapshot_load(const char *path, unsigned flags,
                                                   tdm_snapshot **out, char *err,
                                                   size_t errlen);
TDM_API void tdm_snapshot_free(tdm_snapshot *snap);

/* Who recorded it, how, and the size of each table. */
typedef struct tdm_snapshot_info {
    size_t size;              /* sizeof(tdm_snapshot_info), set by the caller */
    const char *host;
    const char *tool_version;
    const char *command;      /* the recorded program's command line */
    const char *config;       /* TIDEMARK_CONF as given */
    const char *metadata;     /* tdm_set_metadata text */
    const char *notes;        /* what the recording could not see, a line each */
    const char *alloc_mode;   /* "passthrough", "cache", "observe" */
    int64_t pid;
    int32_t rank;             /* -1 outside a multi-rank job */
    int32_t local_rank;       /* -1 when unknown */
    int32_t world_size;       /* 0 when unknown */
    uint32_t format_version;
    uint64_t start_time_us;   /* recording start, µs since the epoch */
    uint64_t dump_time_us;
    uint64_t max_entries;
    uint64_t dropped_events;  /* events the ring overwrote before the dump */
    uint64_t time_origin_ns;  /* what every command's times are offsets from */
    int complete;             /* the file's end record was read */
    int truncated;            /* read up to a cut (TDM_SNAPSHOT_PARTIAL_OK) */
    uint64_t truncated_at;    /* byte offset of the cut */
    int torch_segments;       /* PyTorch's caching allocator seen from below:
                                 its segments, not its tensors; the peak is
                                 then of reserved bytes, as in the summary */
    size_t event_count, segment_count, block_count, frame_count, stack_count;
    size_t stack_frame_count, device_count, allocation_count, phase_count;
} tdm_snapshot_info;

/* Fills *info (info->size set by the caller; a smaller size gets the
 * fields that fit).  TDM_INVALID_ARGUMENT when snap or info is NULL. */
TDM_API TDM_NODISCARD tdm_status tdm_snapshot_get_info(const tdm_snapshot *snap,
                                                       tdm_snapshot_info *info);

/* One event of the history, oldest first (docs/format.md, "events"). */
typedef struct tdm_snapshot_event {
    uint64_t time_ns;   /* ns since the epoch */
    uint64_t address;
    uint64_t size;      /* bytes */
    uint64_t requested; /* bytes asked for */
    uint64_t stream;
    uint32_t stack_id;  /* 0 = none */
    uint32_t phase;     /* phase id in force: tdm_snapshot_phase_name */
    uint32_t step;      /* 0 = before the first step */
    int32_t device;     /* ordinal, -1 host */
    uint8_t action;     /* tdm_snapshot_action_name */
    uint8_t tag;        /* the category tag in force (tdm_category), 0 none */
} tdm_snapshot_event;

/* One segment of the final allocator state. */
typedef struct tdm_snapshot_segment {
    uint64_t address;
    uint64_t total_size;  /* bytes */
    uint64_t allocated;   /* requested bytes of its active blocks */
    uint64_t stream;
    int32_t device;
    uint32_t stack_id;
    uint32_t block_count;
    uint8_t pool;         /* 0 large, 1 small, 2 none (one allocation per segment) */
    uint8_t is_expandable;
} tdm_snapshot_segment;

/* One block of the final allocator state, in its segment's address order. */
typedef struct tdm_snapshot_block {
    uint64_t address;
    uint64_t size;           /* bytes, rounded */
    uint64_t requested_size; /* bytes asked for; 0 inactive */
    uint64_t alloc_time_ns;
    uint32_t segment;        /* index into the segments */
    uint32_t stack_id;
    uint8_t state;           /* 0 inactive, 1 allocated, 2 free pending */
    uint8_t category;        /* tag (tdm_category) */
} tdm_snapshot_block;

/* One frame of the frame table (strings as the summary shows them:
 * demangled). */
typedef struct tdm_snapshot_frame {
    uint64_t pc;
    const char *function;
    const char *file;
    const char *module;
    uint32_t line;
    uint8_t kind;            /* 0 native, 1 inlined, 2 Python */
    uint8_t tidemark;        /* a frame of tidemark itself (sites skip it) */
} tdm_snapshot_frame;

/* The stacks, flattened: one row per frame of every stack, innermost
 * first. */
typedef struct tdm_snapshot_stack_frame {
    uint32_t stack_id;
    uint32_t position;       /* 0 = innermost */
    uint32_t frame;          /* index into the frames */
} tdm_snapshot_stack_frame;

/* One device, with its history's figures. */
typedef struct tdm_snapshot_device {
    int32_t ordinal;
    const char *vendor;      /* "?" when the file does not list it */
    const char *name;        /* "" when not listed */
    const char *label;       /* how every command names it */
    uint64_t capacity;       /* bytes; 0 unknown */
    int64_t peak_allocated;  /* bytes */
    int64_t peak_reserved;   /* bytes; 0 unless reserved_known */
    int64_t end_allocated;   /* bytes live at the dump */
    int64_t end_reserved;
    uint64_t end_blocks;     /* allocations live at the dump */
    uint64_t alloc_events, free_events, oom_events;
    int reserved_known;
} tdm_snapshot_device;

/* One allocation (an interval of the history) and the category decided
 * for it, as `tidemark categories` decides it. */
typedef struct tdm_snapshot_allocation {
    uint64_t address;
    uint64_t size;           /* bytes asked for */
    uint64_t alloc_time_ns;  /* 0 when made before the window */
    uint64_t free_time_ns;   /* 0 when live at the dump */
    int64_t alloc_seq;       /* -1: made before the window */
    int64_t free_seq;        /* -1: live at the dump */
    uint32_t stack_id;       /* its allocation's stack (see stack_of_free) */
    int32_t device;          /* ordinal */
    uint8_t category;        /* tdm_category */
    uint8_t category_source; /* 0 tag, 1 a rule over its stack, 2 phases, 3 a fact of its free */
    uint8_t stack_of_free;   /* stack_id is where it was freed (its alloc
                                was not recorded) */
} tdm_snapshot_allocation;

/* The rows of each table and their count; NULL with *count 0 for an
 * empty table or a NULL snapshot. */
TDM_API const tdm_snapshot_event *tdm_snapshot_events(const tdm_snapshot *snap, size_t *count);
TDM_API const tdm_snapshot_segment *tdm_snapshot_segments(const tdm_snapshot *snap,
                                                          size_t *count);
TDM_API const tdm_snapshot_block *tdm_snapshot_blocks(const tdm_snapshot *snap, size_t *count);
TDM_API const tdm_snapshot_frame *tdm_snapshot_frames(const tdm_snapshot *snap, size_t *count);
TDM_API const tdm_snapshot_stack_frame *tdm_snapshot_stack_frames(const tdm_snapshot *snap,
                                                                  size_t *count);
TDM_API const tdm_snapshot_device *tdm_snapshot_devices(const tdm_snapshot *snap,
                                                        size_t *count);
TDM_API const tdm_snapshot_allocation *tdm_snapshot_allocations(const tdm_snapshot *snap,
                                                                size_t *count);

/* "alloc", "free_completed", ... for an event's action; "?" past them. */
TDM_API const char *tdm_snapshot_action_name(unsigned action);
/* A phase id's name: "" for 0, "#N" for an id the table lacks (written
 * into buf). */
TDM_API const char *tdm_snapshot_phase_name(const tdm_snapshot *snap, uint32_t phase,
                                            char *buf, size_t len);

/* The peak `tidemark summary` reports for the device at index `device`
 * of tdm_snapshot_devices: of allocated bytes, or of reserved bytes when
 * info.torch_segments. */
typedef struct tdm_snapshot_peak {
    int32_t device;          /* ordinal */
    int of_reserved;         /* the peak is of reserved bytes */
    int64_t bytes;           /* the peak's value */
    int64_t allocated;       /* allocated bytes at that moment */
    int64_t reserved;        /* reserved bytes at that moment (0 unknown) */
    int64_t seq;             /* position of the peak (-1 the window's start) */
    uint64_t time_ns;        /* ns since the epoch */
    uint32_t step;
    uint32_t phase;
    int history;             /* 0: no events; bytes from the allocator's
                                stats, sites are those live at the end */
} tdm_snapshot_peak;

TDM_API TDM_NODISCARD tdm_status tdm_snapshot_get_peak(const tdm_snapshot *snap, size_t device,
                                                       tdm_snapshot_peak *peak);

/* The same peak over the part of the history from position `since` on
 * (the state just after event `since` included; -1 is the whole window):
 * what a test's limit holds its own stretch of a longer recording to.
 * TDM_INVALID_ARGUMENT past the last event. */
TDM_API TDM_NODISCARD tdm_status tdm_snapshot_get_peak_since(const tdm_snapshot *snap,
                                                             size_t device, int64_t since,
                                                             tdm_snapshot_peak *peak);

/* An allocation site at a position: the allocations of one stack. */
typedef struct tdm_snapshot_site {
    uint32_t stack_id;
    int stack_of_free;       /* named by where its allocations were freed */
    uint64_t live_bytes;     /* requested bytes live at the position */
    uint64_t live_count;
    uint64_t total_bytes;    /* every allocation of the window at this site */
    uint64_t total_count;
} tdm_snapshot_site;

/* The sites of device index `device` at position `seq`, as the summary
 * lists them: by live bytes, then live count, then total bytes (largest
 * first), then stack id; every site of the window, live or not.  *sites
 * is the caller's (tdm_snapshot_sites_free). */
TDM_API TDM_NODISCARD tdm_status tdm_snapshot_sites_at(const tdm_snapshot *snap, size_t device,
                                                       int64_t seq, tdm_snapshot_site **sites,
                                                       size_t *count);
TDM_API void tdm_snapshot_sites_free(tdm_snapshot_site *sites);

/* A site's frames as the summary writes them, "function (file.c:12)",
 * from the first frame that is not tidemark's (a Python site by its
 * Python frames), at most `frames`, one per line, into buf (always
 * terminated; cut when short).  "(no stack recorded)" for stack 0.
 * Returns the length the whole text needs, as snprintf does. */
TDM_API size_t tdm_snapshot_site_text(const tdm_snapshot *snap, uint32_t stack_id,
                                      unsigned frames, char *buf, size_t len);

/* out[i * TDM_CATEGORY_COUNT_ + c]: bytes of category c live on device
 * index `device` just after event seqs[i] (seqs ascending, -1 the start),
 * the categories decided as `tidemark categories` decides them.
 * TDM_INVALID_ARGUMENT when seqs are not ascending or the device is not
 * one. */
TDM_API TDM_NODISCARD tdm_status tdm_snapshot_category_bytes(const tdm_snapshot *snap,
                                                             size_t device, const int64_t *seqs,
                                                             size_t n, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif
