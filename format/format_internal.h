/* format/format_internal.h: what the .tdm writer (format_write.c) and
 * reader (format_read.c) must agree on, and nothing else: the file
 * signature, record type ids, map keys, the positions of fields in row
 * arrays, chunk limits and the record checksum.  docs/format.md is the
 * normative description; every number here appears there.
 *
 * Invariants: ids and positions are on-disk values and never change within
 * a major format version; new record types and new map keys may be added
 * in a minor version (readers skip what they do not know).  No state, no
 * lock.
 */
#ifndef TDM_FORMAT_FORMAT_INTERNAL_H
#define TDM_FORMAT_FORMAT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "snap_model.h"

/* The file starts with the msgpack array ["tidemark", major, minor].
 * major is TDM_FORMAT_VERSION; minor counts compatible additions. */
#define TDM_FMT_MAGIC "tidemark"
#define TDM_FMT_MINOR 5

/* events_zstd (since 1.5): an events payload compressed as one zstd frame
 * that states its size.  A reader decompresses at most this many bytes
 * per record, whatever the frame says (a 65536-event chunk is at most
 * about 7 MiB unpacked), and at most MAX_RATIO times the record's
 * compressed bytes, so what a file makes a reader allocate stays bounded
 * by its size; the writer stores a chunk that compresses better than
 * that plain. */
#define TDM_FMT_ZSTD_MAX_PLAIN ((size_t)64 << 20)
#define TDM_FMT_ZSTD_MAX_RATIO 256
/* The writer's zstd level: a fast one.  On a training loop's history
 * (train_sim, 9.45M events) level 1 gives 0.62 bytes per event, -5 0.82,
 * both far below the 4 a long job's history may take, and -5 costs a dump
 * the least (bench/dump, bench/long_history.sh: docs/format.md §4.7a). */
#define TDM_FMT_ZSTD_LEVEL (-5)

/* Largest number of entries the writer puts in one table/events record, so
 * that a cut file loses at most one chunk and records stay a few MiB. */
#define TDM_FMT_CHUNK 65536u

/* XX(NAME, id, "name"): record types.  Id 0 is never used. */
#define TDM_FMT_RECORD_MAP(XX)                                                 \
    XX(HEADER, 1, "header")                                                    \
    XX(DEVICES, 2, "devices")                                                  \
    XX(STRINGS, 3, "strings")                                                  \
    XX(FRAMES, 4, "frames")                                                    \
    XX(STACKS, 5, "stacks")                                                    \
    XX(PHASES, 6, "phases")                                                    \
    XX(EVENTS, 7, "events")                                                    \
    XX(SEGMENTS, 8, "segments")                                                \
    XX(STATS, 9, "stats")                                                      \
    XX(DROPPED, 10, "dropped")                                                 \
    XX(END, 11, "end")                                                        \
    XX(IMPORTED, 12, "imported")                                               \
    XX(ANNOTATIONS, 13, "annotations")                                         \
    XX(EVENTS_ZSTD, 14, "events_zstd")

enum tdm_fmt_record {
#define TDM__FMT_REC_ENUM(name, id, str) TDM_REC_##name = id,
    TDM_FMT_RECORD_MAP(TDM__FMT_REC_ENUM)
#undef TDM__FMT_REC_ENUM
    TDM_REC_MAX_ = TDM_REC_EVENTS_ZSTD
};

/* XX(NAME, "key"): every map key any record uses.  One list for all
 * records: a key is looked up once and each record reads the ones it
 * defines (a known key in the wrong record is skipped like an unknown one). */
#define TDM_FMT_KEY_MAP(XX)                                                    \
    /* header */                                                               \
    XX(TOOL_VERSION, "tool_version")                                           \
    XX(HOST, "host")                                                           \
    XX(PID, "pid")                                                             \
    XX(RANK, "rank")                                                           \
    XX(LOCAL_RANK, "local_rank")                                               \
    XX(WORLD_SIZE, "world_size")                                               \
    XX(START_TIME_US, "start_time_us")                                         \
    XX(DUMP_TIME_US, "dump_time_us")                                           \
    XX(CONFIG, "config")                                                       \
    XX(METADATA, "metadata")                                                   \
    XX(COMMAND, "command")                                                     \
    XX(RECORD_MODE, "record_mode")                                             \
    XX(CONTEXT_MODE, "context_mode")                                           \
    XX(STACKS_MODE, "stacks_mode")                                             \
    XX(MAX_ENTRIES, "max_entries")                                             \
    XX(ALLOC_MODE, "alloc_mode")                                               \
    XX(NOTES, "notes")                                                         \
    /* tables: devices, strings, frames, stacks, phases, segments, stats */    \
    XX(FIRST, "first")                                                         \
    XX(ROWS, "rows")                                                           \
    /* events: count and one column per event field */                         \
    XX(COUNT, "count")                                                         \
    XX(TIME_NS, "time_ns")                                                     \
    XX(ACTION, "action")                                                       \
    XX(DEVICE, "device")                                                       \
    XX(ADDR, "addr")                                                           \
    XX(SIZE, "size")                                                           \
    XX(REQUESTED, "requested")                                                 \
    XX(STREAM, "stream")                                                       \
    XX(STACK, "stack")                                                         \
    XX(PHASE, "phase")                                                         \
    XX(STEP, "step")                                                           \
    XX(CATEGORY, "category")                                                   \
    /* dropped, end */                                                         \
    XX(DROPPED_EVENTS, "dropped_events")                                       \
    XX(EVENTS, "events")

enum tdm_fmt_key {
#define TDM__FMT_KEY_ENUM(name, str) TDM_KEY_##name,
    TDM_FMT_KEY_MAP(TDM__FMT_KEY_ENUM)
#undef TDM__FMT_KEY_ENUM
    TDM_KEY_COUNT_
};

/* Row arrays: positions of the fields.  Readers ignore extra trailing
 * elements, so a minor version may append fields. */
#define TDM_FMT_DEVICE_ROW(XX)                                                 \
    XX(INDEX, "index") XX(VENDOR, "vendor") XX(NAME, "name")                   \
    XX(CAPACITY, "capacity")
#define TDM_FMT_FRAME_ROW(XX)                                                  \
    XX(PC, "pc") XX(FUNCTION, "function") XX(FILE, "file") XX(LINE, "line")    \
    XX(MODULE, "module")
#define TDM_FMT_SEGMENT_ROW(XX)                                                \
    XX(DEVICE, "device") XX(POOL, "pool") XX(EXPANDABLE, "is_expandable")      \
    XX(ADDRESS, "address") XX(TOTAL_SIZE, "total_size") XX(STREAM, "stream")   \
    XX(STACK_ID, "stack_id") XX(BLOCKS, "blocks")
#define TDM_FMT_BLOCK_ROW(XX)                                                  \
    XX(ADDRESS, "address") XX(SIZE, "size")                                    \
    XX(REQUESTED_SIZE, "requested_size") XX(ALLOC_TIME_NS, "alloc_time_ns")    \
    XX(STACK_ID, "stack_id") XX(STATE, "state") XX(CATEGORY, "category")
#define TDM_FMT_STATS_ROW(XX)                                                  \
    XX(DEVICE, "device") XX(ALLOCATED_BYTES, "allocated_bytes")                \
    XX(RESERVED_BYTES, "reserved_bytes") XX(ACTIVE_BYTES, "active_bytes")      \
    XX(REQUESTED_BYTES, "requested_bytes") XX(ALLOCATION, "allocation")        \
    XX(SEGMENT, "segment") XX(NUM_ALLOC_RETRIES, "num_alloc_retries")          \
    XX(NUM_OOMS, "num_ooms")
/* imported rows (format 1.3). */
#define TDM_FMT_IMPORTED_ROW(XX)                                               \
    XX(DEVICE, "device") XX(SOURCE_DEVICE, "source_device") XX(KIND, "kind")   \
    XX(ADDRESS, "address") XX(SIZE, "size") XX(STACK_ID, "stack_id")           \
    XX(MAP_TIME_NS, "map_time_ns")
/* annotations rows (format 1.4). */
#define TDM_FMT_ANNOTATION_ROW(XX)                                             \
    XX(KIND, "kind") XX(BEFORE_EVENT, "before_event") XX(TIME_NS, "time_ns")   \
    XX(DEVICE, "device") XX(ADDRESS, "address") XX(SIZE, "size")               \
    XX(TEXT, "text")
/* Optional trailing stats column (format 1.1): the tdm_stat_pool of the
 * row.  A row that ends before it is pool 0 (all). */
#define TDM_STATS_POOL TDM_STATS_FIELDS
/* Optional trailing frames column (format 1.2): the tdm_frame_kind of the
 * frame.  A row that ends before it is a native frame. */
#define TDM_FRM_KIND TDM_FRM_FIELDS
/* A tdm_stat on disk: [current, peak, allocated, freed]. */
#define TDM_FMT_STAT_FIELDS 4

#define TDM__FMT_ROW_ENUM(name, str) TDM_DEV_##name,
enum { TDM_FMT_DEVICE_ROW(TDM__FMT_ROW_ENUM) TDM_DEV_FIELDS };
#undef TDM__FMT_ROW_ENUM
#define TDM__FMT_ROW_ENUM(name, str) TDM_FRM_##name,
enum { TDM_FMT_FRAME_ROW(TDM__FMT_ROW_ENUM) TDM_FRM_FIELDS };
#undef TDM__FMT_ROW_ENUM
#define TDM__FMT_ROW_ENUM(name, str) TDM_SEG_##name,
enum { TDM_FMT_SEGMENT_ROW(TDM__FMT_ROW_ENUM) TDM_SEG_FIELDS };
#undef TDM__FMT_ROW_ENUM
#define TDM__FMT_ROW_ENUM(name, str) TDM_BLK_##name,
enum { TDM_FMT_BLOCK_ROW(TDM__FMT_ROW_ENUM) TDM_BLK_FIELDS };
#undef TDM__FMT_ROW_ENUM
#define TDM__FMT_ROW_ENUM(name, str) TDM_STATS_##name,
enum { TDM_FMT_STATS_ROW(TDM__FMT_ROW_ENUM) TDM_STATS_FIELDS };
#undef TDM__FMT_ROW_ENUM
#define TDM__FMT_ROW_ENUM(name, str) TDM_IMP_##name,
enum { TDM_FMT_IMPORTED_ROW(TDM__FMT_ROW_ENUM) TDM_IMP_FIELDS };
#undef TDM__FMT_ROW_ENUM
#define TDM__FMT_ROW_ENUM(name, str) TDM_ANN_##name,
enum { TDM_FMT_ANNOTATION_ROW(TDM__FMT_ROW_ENUM) TDM_ANN_FIELDS };
#undef TDM__FMT_ROW_ENUM

/* The record checksum: CRC-32 (IEEE 802.3, reflected, the one zlib and
 * Python's zlib.crc32 compute) continued from `crc`.  A record stores
 * tdm__format_crc32(type, payload, len), i.e. zlib.crc32(payload, type). */
uint32_t tdm__format_crc32(uint32_t crc, const void *data, size_t len);

/* format_validate.c: TDM_OK when the reader would accept the snapshot's
 * header, tables and stacks (tables), its allocator state and stats
 * (state), and its events first..first+n (events: the writer checks each
 * chunk as it packs it, while it is in the cache); TDM_INVALID_ARGUMENT
 * otherwise. */
tdm_status tdm__format_validate_tables(const tdm_snap *s);
tdm_status tdm__format_validate_state(const tdm_snap *s);
tdm_status tdm__format_validate_events(const tdm_snap *s, size_t first, size_t n);

#endif
