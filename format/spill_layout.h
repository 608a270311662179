/* format/spill_layout.h: the layout of a spill file (docs/spill.md).
 *
 * A spill file is the recorder's own memory, mapped MAP_SHARED from a file,
 * so that the kernel keeps it whatever way the process dies.  It is read
 * back by `tidemark recover` on the same machine (same byte order and word
 * size, which the header states so a mismatch is refused, not misread).
 *
 *   [0, header_bytes)   tdm_spill_header, then the config text at
 *                       config_offset, the module table at
 *                       modules_offset (module_max records) and the phase
 *                       names at phases_offset
 *   regions             page-aligned, appended as the recorder asks:
 *     ring    the ring mapping as ring.c lays it out: its header, the
 *             chunk states, then chunks * chunk slots of 64 bytes
 *             (ring.h: seq word, then the 7 words of a tdm_event)
 *     stacks  the intern table as stack.c lays it out: hash slots, one
 *             record {off, depth} per id (id 0 unused), then the frames
 *
 * The writer publishes a region by storing its offset last (release); a
 * reader takes offset 0 as "none".  Fields are native-endian.
 */
#ifndef TDM_FORMAT_SPILL_LAYOUT_H
#define TDM_FORMAT_SPILL_LAYOUT_H

#include <stdint.h>

#define TDM_SPILL_MAGIC "TDMSPILL"
#define TDM_SPILL_VERSION 1u
#define TDM_SPILL_ENDIAN_MARK 0x01020304u
#define TDM_SPILL_CONFIG_MAX 8192u
#define TDM_SPILL_MODULE_MAX 2048u
#define TDM_SPILL_BUILD_ID_MAX 64u
#define TDM_SPILL_PATH_MAX 416u
#define TDM_SPILL_PHASE_MAX 1024u   /* the recorder's TDM_MAX_PHASES */
#define TDM_SPILL_PHASE_NAME 64u    /* its TDM_PHASE_NAME_MAX */

typedef struct tdm_spill_module {
    uint64_t bias;         /* load address: dlpi_addr */
    uint64_t lo, hi;       /* its executable range, as loaded */
    uint32_t build_id_len; /* 0 when the object has none */
    uint32_t valid;        /* 1 once the record is whole (stored last) */
    uint8_t build_id[TDM_SPILL_BUILD_ID_MAX];
    char path[TDM_SPILL_PATH_MAX]; /* NUL-terminated; "" = the program */
} tdm_spill_module;

_Static_assert(sizeof(tdm_spill_module) == 512, "module records are 512 bytes");

typedef struct tdm_spill_header {
    char magic[8];          /* TDM_SPILL_MAGIC, no NUL */
    uint32_t version;       /* TDM_SPILL_VERSION */
    uint32_t endian;        /* TDM_SPILL_ENDIAN_MARK as the writer stores it */
    uint32_t word_bytes;    /* sizeof(uintptr_t) */
    uint32_t slot_bytes;    /* 64 */
    uint64_t header_bytes;  /* where regions may start */
    int64_t pid;
    uint64_t start_time_us; /* spill opened, µs since the Unix epoch */
    uint64_t config_offset; /* NUL-terminated text, < TDM_SPILL_CONFIG_MAX */
    uint64_t modules_offset;
    uint32_t module_max;
    uint32_t module_count;  /* records written (each checks `valid`) */
    char host[128];
    char device_kind[32];   /* a vendor's name (vendors.def): "sim", "cuda", ... */
    char command[512];      /* /proc/self/cmdline, spaces between args */
    char alloc_mode[16];    /* "cache", "passthrough", "observe": at open, again
                               when the allocator starts */
    /* The ring in use (0: none).  ring_offset is stored last. */
    uint64_t ring_offset;
    uint64_t ring_slots_offset; /* absolute */
    uint64_t ring_capacity;     /* events kept: the newest `capacity` */
    uint64_t ring_slot_count;   /* chunks * chunk */
    /* The stack intern table (0: none).  stacks_offset is stored last. */
    uint64_t stacks_offset;
    uint64_t stacks_recs_offset;   /* absolute; records [0..stack_max] */
    uint64_t stacks_frames_offset; /* absolute; frame_max words */
    uint64_t stack_max;
    uint64_t frame_max;
    uint8_t record_mode, context_mode, stacks_mode, pad_[5];
    /* Phase names: phase_max slots of phase_name_bytes in the header area,
     * slot i the name of phase id i, NUL-terminated ("" until the phase
     * is first entered while spilling).  Files written before these fields
     * have zeros here (the header area is zero-filled up to config_offset):
     * no names. */
    uint64_t phases_offset;
    uint32_t phase_max;
    uint32_t phase_name_bytes;
} tdm_spill_header;

#endif
