/* format/format_spill.c: the spill file reader (format_spill.h).
 *
 * Every offset and count taken from the file is checked against the
 * file's length before it is used, in 64-bit arithmetic that cannot wrap
 * (counts are bounded first), so a corrupt or cut file gives an error and
 * never a read outside the buffer.  No state, no lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format_spill.h"
#include "ring_layout.h" /* the ring's header, for its claim count */

/* Stack depth the recorder keeps (stack.h's TDM_STACK_MAX_DEPTH). */
#define SPILL_STACK_DEPTH_MAX 64u
/* Sanity bounds: far above what the recorder makes, low enough that
 * products below cannot overflow 64 bits. */
#define SPILL_SLOTS_MAX ((uint64_t)1 << 36)
#define SPILL_STACKS_MAX ((uint64_t)1 << 31)
/* Phase ids the recorder hands out: 0 (none) to its table's size. */
#define SPILL_PHASES_MAX (TDM_SPILL_PHASE_MAX + 1u)
#define SPILL_FRAMES_MAX ((uint64_t)1 << 33)

static tdm_status fail(tdm_read_error *err, tdm_status st, uint64_t offset,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static tdm_status fail(tdm_read_error *err, tdm_status st, uint64_t offset,
                       const char *fmt, ...)
{
    if (err) {
        char why[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        err->offset = offset;
        snprintf(err->message, sizeof err->message, "%s at byte %llu", why,
                 (unsigned long long)offset);
    }
    return st;
}

/* Whether [offset, offset + bytes) lies inside a buffer of len bytes. */
static int inside(uint64_t offset, uint64_t bytes, size_t len)
{
    return offset <= len && bytes <= len - offset;
}

static uint64_t u64_at(const unsigned char *p, uint64_t off)
{
    uint64_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

typedef struct spill_key {
    uint64_t time_ns, index, slot;
} spill_key;

static int key_cmp(const void *a, const void *b)
{
    const spill_key *x = a, *y = b;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int action_known(unsigned action)
{
    return action < TDM_ACTION_COUNT_ || action == TDM__ACTION_SEGMENT_ALLOC_ALLOC ||
           action == TDM__ACTION_FREE_SEGMENT_FREE || action == TDM__ACTION_FREE_FREE;
}

/* How many of the ring's slots can hold events: those of the chunks
 * claimed so far while the first lap lasts (claim n takes chunk n, ring.h),
 * read from the ring's own header in the file; every slot otherwise.  The
 * slots past them were never written, and a large max_entries makes them
 * most of the file (holes of a sparse file, which would cost a page fault
 * each to read and a sort key each).  A header that does not add up, or a
 * written slot just past the bound, means every slot is read. */
static uint64_t used_slots(const unsigned char *p, size_t len, const tdm_spill_header *h)
{
    uint64_t count = h->ring_slot_count, at = h->ring_slots_offset;
    if (!inside(h->ring_offset, sizeof(tdm__ring), len))
        return count;
    uint64_t claims = u64_at(p, h->ring_offset + offsetof(tdm__ring, claims));
    uint64_t chunk = u64_at(p, h->ring_offset + offsetof(tdm__ring, chunk));
    uint64_t chunks = u64_at(p, h->ring_offset + offsetof(tdm__ring, chunks));
    if (chunk == 0 || chunks == 0 || count / chunk != chunks || count % chunk ||
        claims >= chunks)
        return count;
    uint64_t used = claims * chunk;
    return u64_at(p, at + used * 64) == 0 ? used : count;
}

static tdm_status read_ring(const unsigned char *p, size_t len, tdm_spill_data *d,
                            tdm_read_error *err)
{
    const tdm_spill_header *h = &d->header;
    uint64_t at = h->ring_slots_offset, count = h->ring_slot_count;
    if (count == 0 || count > SPILL_SLOTS_MAX || h->ring_capacity == 0)
        return fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, ring_capacity),
                    "ring of %llu slots keeping %llu events", (unsigned long long)count,
                    (unsigned long long)h->ring_capacity);
    if (at < h->ring_offset || at < h->header_bytes)
        return fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, ring_slots_offset),
                    "ring slots before the ring");
    if (!inside(at, count * 64, len))
        return fail(err, TDM_TRUNCATED, len, "ring slots [%llu, %llu) cut",
                    (unsigned long long)at, (unsigned long long)(at + count * 64));
    uint64_t scan = used_slots(p, len, h);
    spill_key *keys = malloc((size_t)scan * sizeof *keys + 1);
    if (!keys)
        return fail(err, TDM_HOST_OUT_OF_MEMORY, at, "no memory for %llu slots",
                    (unsigned long long)scan);
    size_t n = 0;
    for (uint64_t s = 0; s < scan; s++) {
        uint64_t off = at + s * 64, seq = u64_at(p, off);
        if (seq == 0)
            continue;
        if (seq & 1) {
            d->torn_slots++; /* the event was being written */
            continue;
        }
        /* Word 6 of the event: step (32 bits), device (16), action (8),
         * category (8); word 5: stack id (32), phase (32). */
        uint64_t w5 = u64_at(p, off + 8 + 5 * 8), w6 = u64_at(p, off + 8 + 6 * 8);
        unsigned action = (unsigned)(w6 >> 48) & 0xff;
        int16_t device = (int16_t)(uint16_t)(w6 >> 32);
        uint32_t phase = (uint32_t)(w5 >> 32);
        if (!action_known(action) || device < -1 || phase >= SPILL_PHASES_MAX) {
            d->bad_slots++;
            continue;
        }
        keys[n++] = (spill_key){u64_at(p, off + 8), seq / 2 - 1, s};
    }
    if (n)
        qsort(keys, n, sizeof *keys, key_cmp);
    size_t first = n > h->ring_capacity ? n - (size_t)h->ring_capacity : 0;
    d->overwritten = first;
    d->events = malloc((n - first) * 3 * sizeof *d->events + 1);
    if (!d->events) {
        free(keys);
        return fail(err, TDM_HOST_OUT_OF_MEMORY, at, "no memory for events");
    }
    for (size_t k = first; k < n; k++) {
        tdm_event in;
        memcpy(&in, p + at + keys[k].slot * 64 + 8, sizeof in);
        d->event_count += tdm__event_expand(&in, d->events + d->event_count);
    }
    free(keys);
    return TDM_OK;
}

static tdm_status read_stacks(const unsigned char *p, size_t len, tdm_spill_data *d,
                              tdm_read_error *err)
{
    const tdm_spill_header *h = &d->header;
    uint64_t recs = h->stacks_recs_offset, frames = h->stacks_frames_offset;
    if (h->stack_max > SPILL_STACKS_MAX || h->frame_max > SPILL_FRAMES_MAX ||
        recs < h->stacks_offset || frames < recs)
        return fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, stacks_recs_offset),
                    "stack table layout");
    if (!inside(recs, (h->stack_max + 1) * 8, len) || !inside(frames, h->frame_max * 8, len))
        return fail(err, TDM_TRUNCATED, len, "stack table [%llu, %llu) cut",
                    (unsigned long long)recs, (unsigned long long)(frames + h->frame_max * 8));
    /* Ids are dense: the table ends at the first record never written. */
    uint64_t count = 0, total = 0;
    while (count < h->stack_max) {
        uint32_t rec[2];
        memcpy(rec, p + recs + (count + 1) * 8, sizeof rec);
        if (rec[1] == 0 || rec[1] > SPILL_STACK_DEPTH_MAX ||
            (uint64_t)rec[0] + rec[1] > h->frame_max)
            break;
        count++;
        total += rec[1];
    }
    d->stacks = calloc(count + 1, sizeof *d->stacks);
    d->pcs = malloc(total * sizeof *d->pcs + 1);
    if (!d->stacks || !d->pcs)
        return fail(err, TDM_HOST_OUT_OF_MEMORY, recs, "no memory for stacks");
    d->stack_count = count + 1;
    uint64_t used = 0;
    for (uint64_t id = 1; id <= count; id++) {
        uint32_t rec[2];
        memcpy(rec, p + recs + id * 8, sizeof rec);
        memcpy(d->pcs + used, p + frames + (uint64_t)rec[0] * 8, rec[1] * 8u);
        d->stacks[id] = (tdm_spill_stack){rec[1], d->pcs + used};
        used += rec[1];
    }
    return TDM_OK;
}

tdm_status tdm__spill_read_buffer(const void *data, size_t len, tdm_spill_data **out,
                                  tdm_read_error *err)
{
    const unsigned char *p = data;
    *out = NULL;
    if (err) {
        err->offset = 0;
        err->message[0] = '\0';
    }
    if (len < 8 && memcmp(p, TDM_SPILL_MAGIC, len) == 0) /* (an empty file too) */
        return fail(err, TDM_TRUNCATED, len, "file ends at byte %zu, inside its signature", len);
    if (len < 8 || memcmp(p, TDM_SPILL_MAGIC, 8) != 0)
        return fail(err, TDM_FORMAT_ERROR, 0, "not a tidemark spill file (no %s signature)",
                    TDM_SPILL_MAGIC);
    if (len < sizeof(tdm_spill_header))
        return fail(err, TDM_TRUNCATED, len, "header of %zu bytes cut",
                    sizeof(tdm_spill_header));
    tdm_spill_data *d = calloc(1, sizeof *d);
    if (!d)
        return TDM_HOST_OUT_OF_MEMORY;
    memcpy(&d->header, p, sizeof d->header);
    tdm_spill_header *h = &d->header;
    tdm_status st = TDM_OK;
    if (h->version != TDM_SPILL_VERSION) {
        st = fail(err, TDM_UNSUPPORTED_VERSION, offsetof(tdm_spill_header, version),
                  "spill version %u (this build reads %u)", h->version, TDM_SPILL_VERSION);
    } else if (h->endian != TDM_SPILL_ENDIAN_MARK || h->word_bytes != 8 ||
               h->slot_bytes != 64) {
        st = fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, endian),
                  "written by a machine of another byte order or word size");
    } else if (h->header_bytes < sizeof *h || h->header_bytes > len) {
        st = fail(err, h->header_bytes > len ? TDM_TRUNCATED : TDM_FORMAT_ERROR,
                  h->header_bytes > len ? len : offsetof(tdm_spill_header, header_bytes),
                  "header area of %llu bytes", (unsigned long long)h->header_bytes);
    } else if (h->config_offset < sizeof *h ||
               !inside(h->config_offset, TDM_SPILL_CONFIG_MAX, h->header_bytes) ||
               h->module_max > TDM_SPILL_MODULE_MAX ||
               h->modules_offset < sizeof *h ||
               !inside(h->modules_offset, (uint64_t)h->module_max * sizeof(tdm_spill_module),
                       h->header_bytes)) {
        st = fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, config_offset),
                  "config or module table outside the header area");
    } else if (h->record_mode > TDM_RECORD_ALL) {
        st = fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, record_mode),
                  "record mode %u", h->record_mode);
    } else if (h->context_mode > TDM_CONTEXT_ALL) {
        st = fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, context_mode),
                  "context mode %u", h->context_mode);
    } else if (h->stacks_mode > TDM_STACKS_ALL) {
        st = fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, stacks_mode),
                  "stacks mode %u", h->stacks_mode);
    }
    if (st != TDM_OK)
        goto bad;
    h->host[sizeof h->host - 1] = '\0';
    h->device_kind[sizeof h->device_kind - 1] = '\0';
    h->command[sizeof h->command - 1] = '\0';
    d->config = strndup((const char *)p + h->config_offset, TDM_SPILL_CONFIG_MAX - 1);
    uint32_t mods = h->module_count < h->module_max ? h->module_count : h->module_max;
    d->modules = calloc(mods + 1, sizeof *d->modules);
    if (!d->config || !d->modules) {
        st = TDM_HOST_OUT_OF_MEMORY;
        goto bad;
    }
    for (uint32_t i = 0; i < mods; i++) {
        tdm_spill_module m;
        memcpy(&m, p + h->modules_offset + (uint64_t)i * sizeof m, sizeof m);
        if (m.valid != 1 || m.build_id_len > TDM_SPILL_BUILD_ID_MAX || m.lo > m.hi)
            continue;
        m.path[sizeof m.path - 1] = '\0';
        d->modules[d->module_count++] = m;
    }
    if (h->phases_offset) {
        if (h->phase_max > TDM_SPILL_PHASE_MAX || h->phase_name_bytes != TDM_SPILL_PHASE_NAME ||
            h->phases_offset < sizeof *h ||
            !inside(h->phases_offset, (uint64_t)h->phase_max * TDM_SPILL_PHASE_NAME,
                    h->header_bytes)) {
            st = fail(err, TDM_FORMAT_ERROR, offsetof(tdm_spill_header, phases_offset),
                      "phase names outside the header area");
            goto bad;
        }
        d->phase_names = calloc(h->phase_max + 1, TDM_SPILL_PHASE_NAME);
        if (!d->phase_names) {
            st = TDM_HOST_OUT_OF_MEMORY;
            goto bad;
        }
        memcpy(d->phase_names, p + h->phases_offset,
               (size_t)h->phase_max * TDM_SPILL_PHASE_NAME);
        for (uint32_t i = 0; i < h->phase_max; i++)
            d->phase_names[i][TDM_SPILL_PHASE_NAME - 1] = '\0';
        d->phase_count = h->phase_max;
    }
    if (h->ring_offset) {
        d->has_ring = 1;
        if ((st = read_ring(p, len, d, err)) != TDM_OK)
            goto bad;
    }
    if (h->stacks_offset) {
        if ((st = read_stacks(p, len, d, err)) != TDM_OK)
            goto bad;
    } else {
        d->stacks = calloc(1, sizeof *d->stacks);
        d->stack_count = 1;
        if (!d->stacks) {
            st = TDM_HOST_OUT_OF_MEMORY;
            goto bad;
        }
    }
    /* An event naming a stack the table did not keep has none. */
    for (size_t i = 0; i < d->event_count; i++)
        if (d->events[i].stack_id >= d->stack_count)
            d->events[i].stack_id = 0;
    *out = d;
    return TDM_OK;
bad:
    tdm__spill_data_free(d);
    return st;
}

int tdm__spill_default_folder(char *out, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    struct stat shm;
    if (!tmp || tmp[0] != '/')
        tmp = stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) && access("/dev/shm", W_OK) == 0
                  ? "/dev/shm"
                  : "/tmp";
    int n = snprintf(out, len, "%s/tidemark-%lu", tmp, (unsigned long)getuid());
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

tdm_status tdm__spill_read_file(const char *path, tdm_spill_data **out, tdm_read_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    int ok = fd >= 0 && fstat(fd, &sb) == 0;
    if (ok && S_ISDIR(sb.st_mode)) /* (mmap would say "No such device") */
        ok = 0, errno = EISDIR;
    if (!ok) {
        if (err) {
            err->offset = 0;
            snprintf(err->message, sizeof err->message, "%s", strerror(errno));
        }
        if (fd >= 0)
            close(fd);
        return TDM_IO_ERROR;
    }
    size_t len = (size_t)sb.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (map == MAP_FAILED) {
        if (err) {
            err->offset = 0;
            snprintf(err->message, sizeof err->message, "cannot map: %s", strerror(errno));
        }
        return TDM_IO_ERROR;
    }
    tdm_status st = tdm__spill_read_buffer(map ? map : "", len, out, err);
    if (map)
        munmap(map, len);
    return st;
}

void tdm__spill_data_free(tdm_spill_data *d)
{
    if (!d)
        return;
    free(d->config);
    free(d->modules);
    free(d->events);
    free(d->stacks);
    free(d->pcs);
    free(d->phase_names);
    free(d);
}
