/* format/format_stream.h: a .tdm byte stream checked as it arrives, for
 * readers that must copy a stream (standard input, a pipe) before they
 * can read it whole: the signature, each record's envelope, checksum and
 * order (header first, nothing after the end record) are checked byte by
 * byte, so junk after a valid start is refused where it begins, not
 * after the stream was copied whole.  What is copied past the last good
 * byte is bounded by one record (its payload is checked when its
 * checksum arrives).
 *
 * Only framing: payloads are the reader's (format_read.c), which says
 * the same thing at the same byte once given the bytes up to the first
 * bad one.  No state beyond the struct; no lock (one per stream). */
#ifndef TDM_FORMAT_FORMAT_STREAM_H
#define TDM_FORMAT_FORMAT_STREAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct tdm__snap_stream {
    uint64_t off;      /* bytes taken so far */
    uint64_t rec_off;  /* where the record being read starts */
    uint64_t left;     /* payload bytes still to come */
    uint64_t type;     /* the record's type */
    uint32_t crc;      /* its payload's checksum so far */
    int stage;         /* signature, envelope head, payload, checksum, done */
    int records;       /* whole records so far */
    size_t held;       /* bytes of a field not yet whole */
    uint8_t hold[32];
    uint64_t bad_at;   /* the byte where the stream stopped being a snapshot */
    char why[160];     /* and why */
} tdm__snap_stream;

void tdm__snap_stream_init(tdm__snap_stream *s);

/* Takes the next `n` bytes.  Returns 0 while they may still be (the
 * start of) a snapshot; -1 once they cannot: s->bad_at and s->why say
 * where and why, and every later call returns -1. */
int tdm__snap_stream_feed(tdm__snap_stream *s, const void *data, size_t n);

#endif
