/* format/ring_layout.h: the event ring's memory as the recorder maps it
 * and as a spill file keeps it (spill_layout.h's ring region): the ring's
 * header, then its 64-byte slots.
 *
 * The ring's code (snapshot/ring.h, ring.c) owns what the fields mean and
 * the protocol over them; the spill readers (format_spill.c,
 * format_spill_live.c) read the header's claim count and chunking back
 * from a file, so the layout lives here, below both.
 */
#ifndef TDM_FORMAT_RING_LAYOUT_H
#define TDM_FORMAT_RING_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tdm__ring_slot {
    _Atomic uint64_t seq;  /* 0 empty; 2i+1 writing event i; 2i+2 holds event i */
    _Atomic uint64_t w[7]; /* the tdm_event, word by word */
} tdm__ring_slot;

typedef struct tdm__ring {
    _Alignas(64) _Atomic uint64_t claims; /* chunk claims so far */
    _Alignas(64) _Atomic uint64_t given_back; /* events in chunks given back */
    _Atomic uint64_t refused;    /* events that found no chunk free */
    _Atomic uint64_t *chunk_state; /* [chunks]: claim number << 1 | held */
    _Atomic uint64_t *chunk_newest_ns; /* [chunks]: newest time stored in
                                        * the chunk so far (0: none) */
    _Atomic uint64_t *chunk_given_at;  /* [chunks]: `claims` when the chunk
                                        * was last given back */
    _Alignas(64) _Atomic uint64_t overwritten_ns; /* no event newer than
                                        * this was ever overwritten */
    tdm__ring_slot *slots;       /* chunks * chunk slots, from mmap */
    uint64_t capacity;           /* events kept: the newest `capacity` */
    uint64_t chunk;              /* slots per chunk, a power of two */
    unsigned chunk_shift;        /* log2(chunk) */
    uint64_t chunks;             /* claim n takes chunk n % chunks */
    uint64_t id;                 /* unique per ring made in this process */
    struct tdm__ring *next_live; /* the list of rings not destroyed */
    size_t map_bytes;
    uint64_t spill_offset;       /* its place in the spill file; 0: anonymous */
    _Atomic uint64_t spill_reserved; /* bytes of the mapping reserved in the
                                      * file: grown as chunks are first
                                      * claimed (tdm__ring_claim) */
    int spill_ahead;             /* its handle for reserving ahead; -1 */
    _Atomic uint64_t populated;  /* bytes of the mapping whose pages are in
                                  * place (from its start; page multiple),
                                  * grown a step ahead of the first lap's
                                  * claims; map_bytes once done or given up */
} tdm__ring;

#endif
