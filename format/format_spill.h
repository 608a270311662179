/* format/format_spill.h: reading a spill file back (spill_layout.h).
 *
 * tdm__spill_read_buffer takes the file's bytes, checks the header
 * (signature, version, byte order, word size, every region inside the
 * file) and returns the complete events of the ring, the interned stacks
 * and the module records.  A slot whose sequence word is odd (the event
 * was being written when the process died) or that holds no valid action
 * is skipped and counted, never misread.  Bad input is an error that names
 * the cause and the byte offset; it never crashes.  For fuzzing: bytes in,
 * status and message out.
 */
#ifndef TDM_FORMAT_FORMAT_SPILL_H
#define TDM_FORMAT_FORMAT_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "event.h"
#include "snap_model.h"
#include "spill_layout.h"

typedef struct tdm_spill_stack {
    uint32_t depth;
    const uint64_t *pcs; /* innermost first; into tdm_spill_data.pcs */
} tdm_spill_stack;

typedef struct tdm_spill_data {
    tdm_spill_header header;   /* as read (module_count clamped) */
    char *config;              /* the config text */
    tdm_spill_module *modules; size_t module_count; /* valid records */
    tdm_event *events;         size_t event_count;  /* oldest first, expanded */
    tdm_spill_stack *stacks;   size_t stack_count;  /* [0] empty; ids index it */
    uint64_t *pcs;
    uint64_t torn_slots;       /* being written when the process stopped */
    uint64_t bad_slots;        /* complete but holding no known action */
    uint64_t overwritten;      /* complete slots older than the newest
                                  `capacity` entries */
    int has_ring;              /* the header named a ring */
    char (*phase_names)[TDM_SPILL_PHASE_NAME]; /* by phase id; "" unknown */
    size_t phase_count;        /* 0: the file kept no names */
} tdm_spill_data;

/* Reads a spill file image.  TDM_OK with *out; else TDM_FORMAT_ERROR,
 * TDM_TRUNCATED, TDM_UNSUPPORTED_VERSION or TDM_HOST_OUT_OF_MEMORY with
 * *err (when not NULL) saying where and why, and *out NULL. */
tdm_status tdm__spill_read_buffer(const void *data, size_t len, tdm_spill_data **out,
                                  tdm_read_error *err);
/* The same from a file (mapped read-only). */
tdm_status tdm__spill_read_file(const char *path, tdm_spill_data **out,
                                tdm_read_error *err);
/* The same from the spill file of a process that is still recording
 * (format_spill_live.c, for `tidemark top`): the file opened O_RDONLY and
 * copied with pread, never mapped, so the copy neither writes nor
 * allocates a page of the file (a tmpfs hole read by a mapping would be
 * allocated in the owner's file) and the owner never notices.  Only what
 * holds data is read: the header area, the ring's header and the chunks
 * it handed out, the stack records and the frames they use.  The ring's
 * slots are read three times, and a slot whose sequence word differs
 * between the first and the third read (it was written meanwhile) is
 * taken as being written (torn_slots): its data, from the second read,
 * may be torn.  *copied (may be NULL) gets the bytes read. */
tdm_status tdm__spill_read_live(const char *path, tdm_spill_data **out, tdm_read_error *err,
                                uint64_t *copied);
void tdm__spill_data_free(tdm_spill_data *d);

/* The folder a spill file goes in when TIDEMARK_CONF's `spill` names
 * none (docs/spill.md): $TMPDIR when it is an absolute path, else
 * /dev/shm when it is a folder this user may write, else /tmp; then
 * tidemark-UID.  The writer (runtime/spill_path.c) makes it; `tidemark run`
 * looks in it.  -1 (errno ENAMETOOLONG) when it does not fit in `len`. */
int tdm__spill_default_folder(char *out, size_t len);

#endif
