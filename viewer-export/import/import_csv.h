/* viewer-export/import/import_csv.h: the two CSV importers, each in its own
 * file: the allocation traces of ../shared/traces (import_trace_csv.c)
 * and RMM's logging_resource_adaptor log (import_rmm_csv.c).  Both give a
 * snapshot built by import_build.h: free it with tdm__ibuild_snap_free().
 *
 * Errors: TDM_FORMAT_ERROR with `err` holding "line N: what is wrong";
 * TDM_IO_ERROR when the file cannot be read; TDM_HOST_OUT_OF_MEMORY.
 * No state, no locks.
 */
#ifndef TDM_VIEWER_IMPORT_CSV_H
#define TDM_VIEWER_IMPORT_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "snap_model.h"

/* One alloc row of a traces CSV, for scoring categories against it. */
typedef struct tdm_trace_alloc {
    uint64_t id;       /* the row's id */
    uint64_t addr;     /* the address the importer gave it (device 0) */
    uint64_t size;     /* bytes */
    uint64_t alloc_ns; /* time_ns of its alloc row */
    uint64_t free_ns;  /* time_ns of its free row; UINT64_MAX = never freed */
    uint8_t truth;     /* category column (tdm_category); UNKNOWN if empty */
} tdm_trace_alloc;

typedef struct tdm_trace_csv_options {
    /* Nonzero: the category column becomes each allocation's explicit tag
     * (what `tidemark import` does: the labels are the framework's own).
     * Zero: the column is ignored (what `categories --trace` does). */
    int tag_with_category;
    /* When not NULL, receives one entry per alloc row in file order
     * (malloc'd; free() it) and *alloc_count their number. */
    tdm_trace_alloc **allocs;
    size_t *alloc_count;
} tdm_trace_csv_options;

/* Reads a traces CSV (../shared/traces/README.md): alloc and free rows
 * become observe-mode alloc/free events on device 0 at addresses the
 * importer assigns (each allocation its own, 512-byte aligned, never
 * reused); phase rows become phase marks, except `step`, which becomes a
 * step mark.  Times stay as the file gives them (ns since its first
 * event).  opts may be NULL. */
tdm_status tdm__import_trace_csv(const char *path,
                                 const tdm_trace_csv_options *opts,
                                 tdm_snap **out, char *err, size_t errlen);
/* The same from `len` bytes in memory; `source` names them in the
 * header's metadata. */
tdm_status tdm__import_trace_csv_buffer(const void *data, size_t len, const char *source,
                                        const tdm_trace_csv_options *opts, tdm_snap **out,
                                        char *err, size_t errlen);

/* Reads an RMM log (`Thread,Time,Action,Pointer,Size,Stream`): allocate
 * and free rows become observe-mode alloc/free events on device 0 at the
 * logged addresses and streams; `allocate failure` rows become oom events.
 * Time is either the adaptor's time of day (HH:MM:SS.ffffff, UTC, a wrap
 * past midnight adds a day) or seconds since the epoch. */
tdm_status tdm__import_rmm_csv(const char *path, tdm_snap **out, char *err,
                               size_t errlen);
/* The same from `len` bytes in memory; `source` names them. */
tdm_status tdm__import_rmm_csv_buffer(const void *data, size_t len, const char *source,
                                      tdm_snap **out, char *err, size_t errlen);

#endif
