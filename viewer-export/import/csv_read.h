/* viewer-export/import/csv_read.h: the line reader the CSV importers share
 * (import_rmm_csv.c, import_trace_csv.c): a file read one line at a time,
 * each line cut in place at its commas, columns found by their header
 * names, errors written as "line N: what is wrong".
 *
 * Neither format quotes its fields, so neither does this: a comma always
 * ends a field.  A line keeps at most TDM_CSV_MAX_FIELDS fields (the rest
 * are dropped; a row's columns are all among the first ones).  A reader
 * owns its FILE and line buffer until tdm__csv_close; it is used by one
 * thread.
 */
#ifndef TDM_VIEWER_CSV_READ_H
#define TDM_VIEWER_CSV_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidemark.h"

#define TDM_CSV_MAX_FIELDS 16

enum {
    /* Blanks (spaces, tabs) around the line and around each field are
     * dropped, and a blank line is skipped (RMM's log, written by hand in
     * its docs with spaces after the commas). */
    TDM_CSV_TRIM = 1u << 0,
    /* A line that starts with '#' is a comment, skipped. */
    TDM_CSV_COMMENTS = 1u << 1,
};

typedef struct tdm_csv {
    FILE *f;
    unsigned flags;         /* TDM_CSV_* */
    char *line;             /* getline's buffer, cut into the fields */
    size_t cap;             /* its size, bytes */
    unsigned long line_no;  /* the line last read, counted from 1 */
    uint64_t line_at;       /* the byte offset where it starts */
    uint64_t next_at;       /* and where the next one does */
    int cut;                /* it ends without a newline: the file's last
                             * line, most likely cut short */
    char *err;              /* the caller's message buffer (may be NULL) */
    size_t errlen;          /* its size, bytes */
    char *field[TDM_CSV_MAX_FIELDS]; /* the last line's fields, in order */
    int nfield;             /* how many */
} tdm_csv;

/* Opens `path`; TDM_IO_ERROR (err: strerror) when it cannot.  Clears err. */
tdm_status tdm__csv_open(tdm_csv *c, const char *path, unsigned flags,
                         char *err, size_t errlen);

/* The same over `len` bytes in memory (borrowed until tdm__csv_close). */
tdm_status tdm__csv_open_buffer(tdm_csv *c, const void *data, size_t len, unsigned flags,
                                char *err, size_t errlen);

/* Reads the next line that is not skipped into c->field/c->nfield and
 * returns 1; returns 0 at the end of the file, or on a read error with *st
 * set to TDM_IO_ERROR or TDM_HOST_OUT_OF_MEMORY (left as it is at the
 * end).  So: while (st == TDM_OK && tdm__csv_next(&c, &st)) { ... }. */
int tdm__csv_next(tdm_csv *c, tdm_status *st);

/* The header line just read: col[i] becomes the field index of names[i],
 * or -1.  Returns -1 when every name whose bit is clear in `optional` was
 * found, else the index i of the first one missing. */
int tdm__csv_header(const tdm_csv *c, const char *const *names, int count,
                    unsigned optional, int *col);

/* The row just read, by column: v[i] is the field at col[i], or "" where
 * the column is absent or the row is short. */
void tdm__csv_row(const tdm_csv *c, const int *col, int count, const char **v);

/* Writes "line N (at byte B): " and the message to err; returns
 * TDM_FORMAT_ERROR, or TDM_TRUNCATED where the line is the file's last and
 * no newline ends it (a file cut short while it was written or copied:
 * the message says so). */
__attribute__((format(printf, 2, 3)))
tdm_status tdm__csv_fail(tdm_csv *c, const char *fmt, ...);

/* Frees the buffer and closes the file; returns st, after saying where
 * the reading stopped when st is TDM_IO_ERROR and nothing said why yet. */
tdm_status tdm__csv_close(tdm_csv *c, tdm_status st);

#endif
