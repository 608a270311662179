/* viewer-export/import/import_formats.h: the formats `tidemark import` reads, as
 * one table (import_formats.c), and the importers' entry points.
 *
 * import/ turns files of other tools (PyTorch snapshot pickles, RMM
 * logs, trace CSV) into snapshots, and reads any file a command is given
 * (load.h).  It may include model/ and format/'s reader and builder,
 * never export/, view/, gate/ or cli/.
 *
 * Adding a format: write import/import_NAME.c with a read function
 * of type tdm_import_read_fn (and a sniff function if the format can be
 * recognized from its first bytes), declare them below, and add one row to
 * the table.  cmd_import.c picks the row: --format NAME, else the first
 * row whose sniff() accepts the file's first TDM_IMPORT_SNIFF_BYTES bytes.
 *
 * An importer reads the whole file and returns a tdm_snap that the command
 * writes with tdm__snap_write() and then frees with the row's free().
 * Errors: TDM_FORMAT_ERROR / TDM_TRUNCATED with `err` saying where ("at
 * byte N: …", "line N: …"), TDM_IO_ERROR when the file cannot be read,
 * TDM_HOST_OUT_OF_MEMORY.  Importers may print warnings on stderr as
 * "tidemark import: warning: …" lines, and never exit.  No state, no locks.
 */
#ifndef TDM_VIEWER_IMPORT_FORMATS_H
#define TDM_VIEWER_IMPORT_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "snap_model.h"

/* Bytes of the file's head a sniff function sees (fewer if the file is
 * shorter). */
#define TDM_IMPORT_SNIFF_BYTES 4096

/* Nonzero when `head` (the file's first bytes) looks like this format. */
typedef int (*tdm_import_sniff_fn)(const unsigned char *head, size_t len);
typedef tdm_status (*tdm_import_read_fn)(const char *path, tdm_snap **out,
                                         char *err, size_t errlen);

typedef struct tdm_import_format {
    const char *name;        /* --format NAME */
    const char *description; /* one line for `tidemark help import` */
    tdm_import_sniff_fn sniff; /* NULL: only chosen by --format */
    tdm_import_read_fn read;
    void (*free)(tdm_snap *snap); /* frees what read() returned */
} tdm_import_format;

extern const tdm_import_format tdm__import_formats[];
extern const size_t tdm__import_format_count;

/* The row named `name`, or NULL. */
const tdm_import_format *tdm__import_format_find(const char *name);
/* The first row whose sniff accepts `head`, or NULL. */
const tdm_import_format *tdm__import_format_detect(const unsigned char *head, size_t len);

/* ---- pytorch (import_pytorch.c) ------------------------------------------
 * PyTorch memory snapshot pickles (torch.cuda.memory._dump_snapshot, the
 * C++ _memory_snapshot_pickled, `tidemark export --format pytorch`). */

typedef struct tdm_pt_import_report {
    uint64_t entries;          /* trace entries read (device and host) */
    uint64_t skipped;          /* entries of actions tidemark has no event for */
    char skipped_actions[96];  /* their names, comma-separated (cut if long) */
    uint64_t segments, blocks;
    uint64_t annotations;      /* external annotations that became marks */
    int from_tidemark;         /* allocator_settings carried tidemark's header */
} tdm_pt_import_report;

int tdm__import_pytorch_sniff(const unsigned char *head, size_t len);
tdm_status tdm__import_pytorch(const char *path, tdm_snap **out, char *err,
                               size_t errlen);
/* The same from memory; `source` names it in the header's metadata.
 * report may be NULL.  Prints nothing. */
tdm_status tdm__import_pytorch_buffer(const void *data, size_t len,
                                      const char *source, tdm_snap **out,
                                      tdm_pt_import_report *report, char *err,
                                      size_t errlen);
void tdm__import_pytorch_free(tdm_snap *snap);
/* A regular file's bytes, whole, into *buf (free it) and *len.
 * TDM_IO_ERROR or TDM_HOST_OUT_OF_MEMORY with the reason in err. */
tdm_status tdm__import_read_file(const char *path, unsigned char **buf, size_t *len,
                                 char *err, size_t errlen);

/* ---- rmm, trace (import_rmm_csv.c, import_trace_csv.c; import_csv.h) -----
 * RMM's logging_resource_adaptor CSV log, and the allocation traces of
 * ../shared/traces (their category column becomes explicit tags).  Both
 * snapshots are freed with tdm__ibuild_snap_free (import_build.h). */

int tdm__import_rmm_sniff(const unsigned char *head, size_t len);
int tdm__import_trace_sniff(const unsigned char *head, size_t len);
tdm_status tdm__import_trace(const char *path, tdm_snap **out, char *err,
                             size_t errlen);

#endif
