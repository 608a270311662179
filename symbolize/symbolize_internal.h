/* symbolize/symbolize_internal.h: the two indexes behind symbolize.c, each
 * built once and then searched by binary search, so that a dump with tens
 * of thousands of distinct return addresses in large C++ libraries
 * symbolizes in about a second:
 *
 * - a module's function symbols as sorted address ranges
 *   (symbolize_symtab.c), for the name of the function holding a pc
 *   (libdwfl's dwfl_module_addrinfo walks the whole symbol table per call);
 * - a compile unit's functions as sorted address ranges
 *   (symbolize_inline.c), to reach the DWARF function holding a pc and walk
 *   down its inlined calls (dwarf_getscopes visits every function of the
 *   unit per call).
 *
 * Both allocate freely; dump time only.  No locks: one symbolizer user at a
 * time. */
#ifndef TDM_SYMBOLIZE_SYMBOLIZE_INTERNAL_H
#define TDM_SYMBOLIZE_SYMBOLIZE_INTERNAL_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

/* ---- symbol tables ------------------------------------------------------- */

typedef struct tdm__symtab tdm__symtab;

/* The function symbols of `mod`, sorted; NULL when it has none (or out of
 * memory): the caller then asks libdwfl. */
tdm__symtab *tdm__symtab_build(Dwfl_Module *mod);
/* The name of the function symbol holding addr (as the table spells it,
 * "name@@VERSION" included), or NULL. */
const char *tdm__symtab_lookup(const tdm__symtab *t, Dwarf_Addr addr);
size_t tdm__symtab_size(const tdm__symtab *t);
void tdm__symtab_free(tdm__symtab *t);

/* ---- inline chains ------------------------------------------------------- */

/* One inlined call around a pc: the inlined function, and where its caller
 * calls it. */
typedef struct tdm__inlined_call {
    const char *function;  /* linkage name, else the plain name; never NULL */
    const char *call_file; /* NULL when unknown */
    int call_line;         /* 0 when unknown */
} tdm__inlined_call;

/* The most inlined calls one pc reports; deeper chains keep the innermost
 * ones and the outermost call site (rare: C++ templates nest ~10 deep). */
#define TDM__INLINE_MAX 32

typedef struct tdm__inline_index tdm__inline_index;

tdm__inline_index *tdm__inline_index_new(void);
void tdm__inline_index_free(tdm__inline_index *ix);
/* The inlined calls whose code holds addr, innermost first, into out[max];
 * returns how many.  `scan_scopes` asks libdw's dwarf_getscopes instead of
 * the index (the reference the index is checked against, and slow). */
int tdm__inline_chain(tdm__inline_index *ix, Dwfl_Module *mod, Dwarf_Addr addr,
                      int scan_scopes, tdm__inlined_call *out, int max);

#endif
