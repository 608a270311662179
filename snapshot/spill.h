/* snapshot/spill.h: the recorder's kill-safe history ("spill").
 *
 * When a spill file is open, the event ring (ring.c) and the stack intern
 * table (stack.c) map their memory MAP_SHARED from regions of that file
 * instead of anonymous memory, and the file's header names the loaded
 * modules (path, build-id, load address) and the configuration.  The
 * kernel keeps a shared file mapping's pages whatever way the process
 * dies (SIGKILL, a crash, the out-of-memory killer), so `tidemark recover`
 * can read the history back.  Layout: spill_layout.h.
 *
 * Cost: the hot path stores into the same slots as before; only the
 * memory behind them differs.  Space is reserved with fallocate before it
 * is written (the ring's slots ahead of its writers, by the spill's own
 * thread: spill_grow.c; the stack records and frames in steps on the
 * insert path), so a full file system loses events instead of raising
 * SIGBUS at a store.
 *
 * Lock: one mutex for opening, regions, publishing and module records
 * (rare paths; taken under stack.c's insert lock, never the other way).
 * A forked child leaves the spill (tdm__spill_fork_child): its ring and
 * stack table turn into private memory and it records without a file.
 */
#ifndef TDM_SNAPSHOT_SPILL_H
#define TDM_SNAPSHOT_SPILL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

/* Creates the spill file for `path` and records the loaded modules.
 * `device_kind` goes to the header.  The file takes its name at the
 * process's first event (tdm__spill_publish; at once where the file
 * system cannot make a file without a name): a stale file there (nobody
 * holds it) is replaced; one a running process holds is left, and this
 * one is named PATH.PID beside it, said on stderr.  On failure `why` gets
 * the cause (strerror) and nothing is left behind. */
tdm_status tdm__spill_open(const char *path, const char *config_text,
                           const char *device_kind, char *why, size_t why_len);
/* The first event: the open file takes its name.  Once; cheap after. */
void tdm__spill_publish(void);
/* Say on stderr, once the file has its name, where it is and how to
 * recover it (on a terminal: autoinit decides). */
void tdm__spill_announce(void);
/* Whether a spill file is open in this process. */
int tdm__spill_active(void);
/* The path of the open spill file ("" when none). */
const char *tdm__spill_path(void);

/* Maps a fresh region of `bytes` (page multiple) MAP_SHARED from the
 * file, reserving `reserve` bytes of it at once; NULL when no spill or
 * when the file system has less than `room` bytes free (the caller maps
 * anonymous memory instead).  *offset gets the region's place. */
void *tdm__spill_map(size_t bytes, size_t reserve, size_t room, uint64_t *offset);
/* Reserves [offset, offset + len) of the file; 0 on success. */
int tdm__spill_reserve(uint64_t offset, uint64_t len);
/* Reserves [offset, offset + len) with fallocate, without the spill lock
 * (the file stays open until the process exits or forks); harmless on a
 * range already reserved.  0 when reserved, -1 when no room, 1 when the
 * file system has no fallocate: then tdm__spill_write_zeros reserves,
 * which writes, so it must only run on a range no writer can be in. */
int tdm__spill_fallocate(uint64_t offset, uint64_t len);
int tdm__spill_write_zeros(uint64_t offset, uint64_t len);

/* ---- growing a region ahead of its writers (spill_grow.c) --------------
 * A region reserved step by step (the ring's slots) is registered here.
 * Writers ask for room ahead of where they write; a thread that does not
 * record (the preload's signal watcher) reserves it when woken through the
 * registered waker, so that the hot path does not pay for the file
 * system's page allocation.  Without a waker, or when a writer overtakes
 * the reservation, writers reserve synchronously. */

/* Registers the region at file offset `offset` (`limit` bytes long),
 * *reserved bytes of it reserved so far.  Returns its handle, or -1 (no
 * room in the table: the writers grow it synchronously). */
int tdm__spill_ahead_add(uint64_t offset, _Atomic uint64_t *reserved, uint64_t limit);
/* Forgets a region; returns once the thread no longer touches it. */
void tdm__spill_ahead_remove(int handle);
/* A writer is about to write up to byte `end` of region `handle`: asks
 * for a window ahead of it to be reserved.  A load and a compare unless
 * the window must move (then the waker is called); async-signal-safe. */
void tdm__spill_ahead_ask(int handle, uint64_t end);
/* Sets the function an ask calls to have tdm__spill_ahead_work run soon
 * on a thread that does not record (NULL: none; writers then reserve as
 * they go).  It must be async-signal-safe (asks come from signal
 * handlers' events too) and must not block: e.g. a byte into a pipe. */
void tdm__spill_ahead_set_waker(void (*wake)(void));
/* Reserves what writers asked for, 1 MiB at a time, until every region
 * has its window; the thread woken by the waker calls it. */
void tdm__spill_ahead_work(void);
/* Reserves the region at `region_offset` up to at least byte `need` now
 * (in steps of 1 MiB, at most `limit`), *reserved being what is reserved
 * so far.  1 when reserved; 0 when the file system has no room. */
int tdm__spill_grow(uint64_t region_offset, _Atomic uint64_t *reserved, uint64_t need,
                    uint64_t limit);
/* In a forked child: forget every region and the waker. */
void tdm__spill_ahead_fork_child(void);

/* Gives a region's pages back: they read as zeros afterwards. */
void tdm__spill_discard(void *addr, size_t bytes);

void tdm__spill_publish_ring(uint64_t offset, uint64_t slots_offset,
                             uint64_t capacity, uint64_t slot_count);
/* The ring at `offset` is out of service: the header stops naming it. */
void tdm__spill_unpublish_ring(uint64_t offset);
void tdm__spill_publish_stacks(uint64_t offset, uint64_t recs_offset,
                               uint64_t frames_offset, uint64_t stack_max,
                               uint64_t frame_max);
void tdm__spill_set_modes(int record, int context, int stacks);
/* Phase `id` is named `name` (tdm_phase: each time a phase is entered, so
 * that phases named before the file was opened are written too). */
void tdm__spill_note_phase(uint32_t id, const char *name);
/* The allocator's mode ("cache", "passthrough", "observe"), as the
 * recorder learns it: the allocator starts after the file is opened (at
 * its first allocation, for a vendor's runtime). */
void tdm__spill_set_alloc_mode(const char *mode);

/* A new stack was interned: modules loaded since the last look (dlopen)
 * are added when one of its pcs lies outside every recorded module. */
void tdm__spill_note_pcs(const uintptr_t *pcs, unsigned depth);

/* ---- the stack intern table's region (stack.c) ------------------------- */

/* Where stack.c's table lies in the file, and how much of its records
 * and frames is reserved so far (grown in steps on the insert path). */
typedef struct tdm__stack_spill {
    uint64_t offset;           /* 0: the table is anonymous memory */
    size_t recs_at, frames_at; /* byte offsets inside the mapping */
    size_t recs_reserved, frames_reserved; /* bytes from recs_at / frames_at */
} tdm__stack_spill;

/* The table is `map` (`bytes`, anonymous): hash slots, records from
 * recs_at, frames from frames_at.  Maps records and frames over it
 * MAP_SHARED from the spill file (the hash slots stay anonymous: recover
 * needs only records and frames), reserving a first step of each.  0 on
 * success; -1 (the table left anonymous) when no spill or no room. */
int tdm__stack_spill_attach(tdm__stack_spill *s, void *map, size_t bytes, size_t recs_at,
                            size_t frames_at, uint64_t max_stacks, uint64_t max_frames);
/* Before records up to byte recs_end and frames up to byte frames_end
 * are written: reserves more when needed.  0 when there is room. */
int tdm__stack_spill_room(tdm__stack_spill *s, size_t recs_end, size_t frames_end);
/* tdm__stack_reset on a spilled table: zeros records and frames and
 * reserves again (the caller drops the hash slots). */
void tdm__stack_spill_reset(tdm__stack_spill *s, void *map, size_t bytes);
/* In a forked child: records and frames become private memory at the
 * same address, keeping recs_used bytes of records and frames_used bytes
 * of frames. */
void tdm__stack_spill_detach(tdm__stack_spill *s, void *map, size_t bytes,
                             size_t recs_used, size_t frames_used);

/* The history is safe elsewhere (a snapshot was written at exit), or the
 * recording did not start: the file is removed (only if its path still
 * names this process's file), or never named.  The mappings stay valid. */
void tdm__spill_remove(void);

/* In the child of fork(): forget the parent's file (close it, unmap the
 * header); ring.c and stack.c make their own mappings private. */
void tdm__spill_fork_child(void);

#endif
