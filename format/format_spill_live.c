/* format/format_spill_live.c: a consistent copy of the spill file of a
 * process that is still recording (format_spill.h, tdm__spill_read_live),
 * for `tidemark top`.
 *
 * The owner keeps writing while we read, and must never notice us: the
 * file is opened O_RDONLY and read with pread into a private buffer of the
 * file's size (calloc: the parts never read stay untouched zero pages).
 * No mapping: a read fault on a hole of a tmpfs file allocates the page in
 * the owner's file, where pread of a hole returns zeros.  What is read:
 *   1. the header (the offsets the writer published last), then fstat
 *      again: the file had grown to hold every region the header names
 *      before their offsets were stored;
 *   2. the header area (config, modules, phase names);
 *   3. the ring's header and chunk states, then the slots of the chunks
 *      it had handed out by then, 64 slots at a time, each block three
 *      times: a slot is kept when its sequence word is the same in the
 *      first and the third read, so its data (from the second, which lies
 *      wholly between them) was not being written while read; a slot that
 *      changed is made to read as being written (an odd word), which the
 *      reader counts as torn;
 *   4. the stack records up to the first one never written, and the
 *      frames they use: read after the ring, so every stack an event read
 *      above names was interned before.
 * Then the buffer goes to tdm__spill_read_buffer, which checks it all.
 * No state, no lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format_spill.h"
#include "ring_layout.h"

/* Chunk states read at most (3 words a chunk): past this the ring header
 * alone is read (the reader needs only its claim count). */
#define LIVE_RING_HEAD_MAX ((uint64_t)64 << 20)
/* Ring slots read per step (three reads each, see read_ring). */
#define LIVE_BLOCK_SLOTS 64u
/* Stack records read per step while looking for the table's end. */
#define LIVE_STACK_STEP 8192u

static tdm_status io_fail(tdm_read_error *err, const char *what, int e)
{
    if (err) {
        err->offset = 0;
        snprintf(err->message, sizeof err->message, "%s: %s", what, strerror(e));
    }
    return TDM_IO_ERROR;
}

/* Reads n bytes at file offset off into dst; short when the file ends
 * first (the rest of dst is left as it was).  0, or -1 with errno. */
static int read_into(int fd, unsigned char *dst, uint64_t off, uint64_t n, uint64_t *copied)
{
    while (n) {
        ssize_t got = pread(fd, dst, n, (off_t)off);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (got == 0)
            break;
        dst += got;
        off += (uint64_t)got;
        n -= (uint64_t)got;
        *copied += (uint64_t)got;
    }
    return 0;
}

/* Reads [off, off + n) of the file into buf + off, clipped to len; what
 * the file does not hold (yet) stays zero. */
static int read_at(int fd, unsigned char *buf, size_t len, uint64_t off, uint64_t n,
                   uint64_t *copied)
{
    if (off >= len)
        return 0;
    return read_into(fd, buf + off, off, n < len - off ? n : len - off, copied);
}

static uint64_t u64_at(const unsigned char *p, uint64_t off)
{
    uint64_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

/* The slots of the chunks handed out so far (every slot once the ring has
 * gone round), as ring.h's tdm__ring_used_chunks counts them from the
 * copy of the ring's header; 0 when that header does not add up (the
 * reader then says what is wrong). */
static uint64_t used_slots(const unsigned char *buf, size_t len, const tdm_spill_header *h)
{
    uint64_t at = h->ring_offset;
    if (at > len || sizeof(tdm__ring) > len - at)
        return 0;
    uint64_t claims = u64_at(buf, at + offsetof(tdm__ring, claims));
    uint64_t chunk = u64_at(buf, at + offsetof(tdm__ring, chunk));
    uint64_t chunks = u64_at(buf, at + offsetof(tdm__ring, chunks));
    if (chunk == 0 || chunks == 0 || h->ring_slot_count / chunk != chunks)
        return h->ring_slot_count;
    return (claims < chunks ? claims : chunks) * chunk;
}

static int read_ring(int fd, unsigned char *buf, size_t len, const tdm_spill_header *h,
                     uint64_t *copied)
{
    uint64_t head = h->ring_slots_offset > h->ring_offset
                        ? h->ring_slots_offset - h->ring_offset : 0;
    if (head > LIVE_RING_HEAD_MAX || head < sizeof(tdm__ring))
        head = sizeof(tdm__ring);
    if (read_at(fd, buf, len, h->ring_offset, head, copied) != 0)
        return -1;
    uint64_t slots = used_slots(buf, len, h), at = h->ring_slots_offset;
    if (slots == 0 || at >= len)
        return 0;
    if (slots > (len - at) / 64)
        slots = (len - at) / 64;
    /* Block by block, so that the three reads of a slot are microseconds
     * apart: a slot counts as torn only when it was written in them, not
     * whenever it was written during the whole copy (a program recording
     * millions of events a second rewrites a small ring meanwhile). */
    unsigned char first[LIVE_BLOCK_SLOTS * 64], third[LIVE_BLOCK_SLOTS * 64];
    for (uint64_t b = 0; b < slots; b += LIVE_BLOCK_SLOTS) {
        uint64_t n = slots - b < LIVE_BLOCK_SLOTS ? slots - b : LIVE_BLOCK_SLOTS;
        uint64_t off = at + b * 64, bytes = n * 64;
        memset(first, 0, bytes);
        memset(third, 0, bytes);
        if (read_into(fd, first, off, bytes, copied) != 0 ||
            read_at(fd, buf, len, off, bytes, copied) != 0 ||
            read_into(fd, third, off, bytes, copied) != 0)
            return -1;
        for (uint64_t s = 0; s < n; s++) {
            uint64_t a = u64_at(first, s * 64), c = u64_at(third, s * 64);
            uint64_t kept = a == c ? a : c | 1; /* odd: being written, left out */
            memcpy(buf + off + s * 64, &kept, sizeof kept);
        }
    }
    return 0;
}

static int read_stacks(int fd, unsigned char *buf, size_t len, const tdm_spill_header *h,
                       uint64_t *copied)
{
    uint64_t recs = h->stacks_recs_offset, count = h->stack_max + 1, frames_used = 0;
    for (uint64_t id = 0; id < count; id += LIVE_STACK_STEP) {
        uint64_t n = count - id < LIVE_STACK_STEP ? count - id : LIVE_STACK_STEP;
        if (recs + id * 8 >= len)
            break;
        if (read_at(fd, buf, len, recs + id * 8, n * 8, copied) != 0)
            return -1;
        int ended = 0;
        for (uint64_t k = id ? id : 1; k < id + n && recs + k * 8 + 8 <= len; k++) {
            uint32_t rec[2];
            memcpy(rec, buf + recs + k * 8, sizeof rec);
            if (rec[1] == 0) {
                ended = 1;
                break;
            }
            if ((uint64_t)rec[0] + rec[1] > frames_used)
                frames_used = (uint64_t)rec[0] + rec[1];
        }
        if (ended)
            break;
    }
    if (frames_used > h->frame_max)
        frames_used = h->frame_max;
    return read_at(fd, buf, len, h->stacks_frames_offset, frames_used * 8, copied);
}

tdm_status tdm__spill_read_live(const char *path, tdm_spill_data **out, tdm_read_error *err,
                                uint64_t *copied)
{
    *out = NULL;
    uint64_t scratch = 0, *n = copied ? copied : &scratch;
    *n = 0;
    /* (O_NONBLOCK: a FIFO named by mistake must not hang the reader.) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return io_fail(err, "cannot open", errno);
    struct stat sb;
    tdm_spill_header h;
    ssize_t got;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return io_fail(err, "cannot read", e);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        if (err) {
            err->offset = 0;
            snprintf(err->message, sizeof err->message, "not a regular file");
        }
        return TDM_IO_ERROR;
    }
    while ((got = pread(fd, &h, sizeof h, 0)) < 0 && errno == EINTR)
        ;
    if (got < 0 || fstat(fd, &sb) != 0) { /* (again: the size after the header) */
        int e = errno;
        close(fd);
        return io_fail(err, "cannot read", e);
    }
    size_t len = (size_t)sb.st_size;
    if ((size_t)got < sizeof h || memcmp(h.magic, TDM_SPILL_MAGIC, 8) != 0 ||
        h.header_bytes < sizeof h || h.header_bytes > len) {
        /* Too short or no spill file: the reader says which, from what
         * the file holds. */
        unsigned char small[sizeof h];
        size_t have = got > 0 ? (size_t)got : 0;
        memcpy(small, &h, have);
        close(fd);
        return tdm__spill_read_buffer(small, have < len ? have : len, out, err);
    }
    unsigned char *buf = calloc(1, len + 1);
    if (!buf) {
        close(fd);
        return io_fail(err, "cannot copy", ENOMEM);
    }
    int rc = read_at(fd, buf, len, 0, h.header_bytes, n);
    memcpy(&h, buf, sizeof h); /* the header as the area was read */
    if (rc == 0 && h.ring_offset)
        rc = read_ring(fd, buf, len, &h, n);
    if (rc == 0 && h.stacks_offset)
        rc = read_stacks(fd, buf, len, &h, n);
    int e = errno;
    close(fd);
    tdm_status st = rc == 0 ? tdm__spill_read_buffer(buf, len, out, err)
                            : io_fail(err, "cannot read", e);
    free(buf);
    return st;
}
