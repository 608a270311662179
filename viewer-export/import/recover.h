/* viewer-export/import/recover.h: a snapshot made from a spill file (`tidemark
 * recover`, and `tidemark run` for what its killed processes left).  recover_build.c replays the kept events into the allocator
 * state, recover_symbols.c symbolizes the native frames offline from the
 * module files at their recorded load addresses. */
#ifndef TDM_VIEWER_IMPORT_RECOVER_H
#define TDM_VIEWER_IMPORT_RECOVER_H

#include <stdio.h>

#include "format_spill.h"
#include "snap_model.h"
#include "symbolize.h"

typedef struct tdm_recover_symbols tdm_recover_symbols;

/* Opens the recorded modules; a module whose file is missing or whose
 * build-id differs from the recorded one is left out (its frames keep
 * raw addresses) and named on `warn`, one line each. */
tdm_recover_symbols *tdm__recover_symbols_open(const tdm_spill_data *d, FILE *warn,
                                               size_t *changed, size_t *missing);
/* The frames of a return address, innermost first, as a dump gives them
 * (symbolize/symbolize.h, tdm__symbolize_frames): the functions inlined at
 * it, then the one holding them; one frame "??" when unknown (s NULL
 * too).  They live as long as the symbolizer. */
size_t tdm__recover_symbolize(tdm_recover_symbols *s, uint64_t pc, const tdm_symbol **frames);
void tdm__recover_symbols_close(tdm_recover_symbols *s);

/* The snapshot: header marked partial (notes), the events, the stacks
 * symbolized with `sym` (may be NULL), the state their replay leaves.
 * Free with tdm__recover_snap_free. */
tdm_status tdm__recover_build(const tdm_spill_data *d, tdm_recover_symbols *sym,
                              const char *extra_notes, tdm_snap **out);
void tdm__recover_snap_free(tdm_snap *snap);

#endif
