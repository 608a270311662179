/* symbolize/symbolize.h: turning return addresses into function, file and
 * line, once per unique address, at dump time.
 *
 * Uses elfutils libdw (Dwfl over this process's own maps) for function,
 * source file and line; dladdr when there is no debug information.  Never
 * called while recording: it allocates freely.
 */
#ifndef TDM_SYMBOLIZE_SYMBOLIZE_H
#define TDM_SYMBOLIZE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "snap_model.h"

typedef struct tdm_symbolizer tdm_symbolizer;

typedef struct tdm_symbol {
    const char *function; /* symbol name as the object spells it (mangled,
                             clone suffix kept), "??" if unknown */
    const char *file;     /* source file, "" if unknown */
    unsigned line;        /* 0 if unknown */
    const char *module;   /* path of the object holding pc, "" if unknown */
    uint8_t kind;         /* tdm_frame_kind: native, or inlined */
} tdm_symbol;

tdm_status tdm__symbolizer_open(tdm_symbolizer **out);

/* An object file and the address it was loaded at less its own (the load
 * bias), as a process had it. */
typedef struct tdm_symbolizer_module {
    const char *path;
    uint64_t bias;
} tdm_symbolizer_module;
/* A symbolizer over another process's objects, read from their files as
 * that process had them loaded (`tidemark recover`): the same frames,
 * inline chains and names as a dump in that process gives; nothing of
 * this process is consulted.  Modules that cannot be read are left out. */
tdm_status tdm__symbolizer_open_offline(const tdm_symbolizer_module *mods, size_t n,
                                        tdm_symbolizer **out);
/* Resolves a return address.  The strings live as long as the
 * symbolizer.  A return address points after the call; the lookup uses
 * pc - 1 so the line is the call's own. */
void tdm__symbolize(tdm_symbolizer *s, uintptr_t pc, tdm_symbol *out);
/* The frames of a return address, innermost first: where pc - 1 lies in
 * inlined code, each inlined function (kind TDM_FRAME_INLINED), then the
 * function holding them all (TDM_FRAME_NATIVE, always last).  Returns how
 * many (at least 1) and points *out at them; they live as long as the
 * symbolizer.  tdm__symbolize gives the first of them. */
size_t tdm__symbolize_frames(tdm_symbolizer *s, uintptr_t pc,
                             const tdm_symbol **out);
void tdm__symbolizer_close(tdm_symbolizer *s);
/* With `on`, later lookups use libdwfl's own searches (its linear walk of
 * the symbol table, dwarf_getscopes) instead of the symbolizer's sorted
 * indexes: the reference that tests and bench/symbolize.c compare with. */
void tdm__symbolizer_use_reference(tdm_symbolizer *s, int on);

/* The dynamic linker's counts of objects loaded and unloaded since the
 * start (either pointer may be NULL). */
void tdm__dl_counts(unsigned long long *loads, unsigned long long *unloads);

/* The symbolizer that successive dumps share (symbolize_shared.c).
 * Returns a reference, with the symbolizer's lock held until
 * tdm__symbolizer_unlock (lookups only in between); the strings it hands
 * out live until tdm__symbolizer_release of that reference.  NULL (lock
 * not held) when out of host memory. */
typedef struct tdm__symbolizer_ref tdm__symbolizer_ref;
tdm__symbolizer_ref *tdm__symbolizer_acquire(void);
tdm_symbolizer *tdm__symbolizer_of(const tdm__symbolizer_ref *r);
void tdm__symbolizer_unlock(void);
void tdm__symbolizer_release(tdm__symbolizer_ref *r);
/* Drops the kept symbolizer: the next dump opens a fresh one (tests,
 * benchmarks of a first dump). */
void tdm__symbolizer_forget_shared(void);

#endif
