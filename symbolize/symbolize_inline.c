/* symbolize/symbolize_inline.c: the inlined calls whose code holds a pc,
 * innermost first, each with the file:line its caller calls it from.
 *
 * The first pc of a compile unit reads the unit's function DIEs once
 * (DW_TAG_subprogram with code, at the top level or inside namespaces and
 * classes) into address ranges sorted by start.  A pc then finds its unit
 * through libdwfl (the .debug_aranges table), its function by binary
 * search, and walks down from the function only into the children whose
 * ranges hold the pc (lexical blocks, DW_TAG_inlined_subroutine).
 * dwarf_getscopes with dwarf_getscopes_die gives the same answer but reads
 * every function of the unit each time: in C++ units with thousands of
 * functions that is a millisecond per pc.  It stays as the reference
 * (scan_scopes).
 *
 * Names come from the DIE or what it stands for (DW_AT_abstract_origin,
 * DW_AT_specification): the linkage name, so C++ names stay mangled as the
 * symbol table has them, else the plain name.  Call sites: DW_AT_call_file
 * (an index into the unit's file table) and DW_AT_call_line.
 */
#include <dwarf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize_internal.h"

typedef struct func_range {
    Dwarf_Addr start, end; /* [start, end), the DWARF's own addresses */
    Dwarf_Die die;         /* the concrete DW_TAG_subprogram */
} func_range;

typedef struct unit_funcs {
    const void *key; /* the unit DIE's position in its section: unique */
    func_range *r;
    size_t n, cap;
} unit_funcs;

struct tdm__inline_index {
    unit_funcs *units; /* open addressing on key, load <= 1/2 */
    size_t cap, len;
};

tdm__inline_index *tdm__inline_index_new(void)
{
    return calloc(1, sizeof(tdm__inline_index));
}

void tdm__inline_index_free(tdm__inline_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->cap; i++)
        free(ix->units[i].r);
    free(ix->units);
    free(ix);
}

static size_t hash_key(const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 29));
}

static int index_grow(tdm__inline_index *ix)
{
    size_t cap = ix->cap ? ix->cap * 2 : 64;
    unit_funcs *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < ix->cap; i++) {
        if (!ix->units[i].key)
            continue;
        size_t j = hash_key(ix->units[i].key) & (cap - 1);
        while (n[j].key)
            j = (j + 1) & (cap - 1);
        n[j] = ix->units[i];
    }
    free(ix->units);
    ix->units = n;
    ix->cap = cap;
    return 0;
}

static int add_range(unit_funcs *u, Dwarf_Addr start, Dwarf_Addr end,
                     const Dwarf_Die *die)
{
    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 64;
        func_range *r = realloc(u->r, cap * sizeof *r);
        if (!r)
            return -1;
        u->r = r;
        u->cap = cap;
    }
    u->r[u->n++] = (func_range){start, end, *die};
    return 0;
}

/* Every function with code below `parent`, looking inside namespaces and
 * types (C++ member functions may be defined there). */
static int collect_functions(unit_funcs *u, Dwarf_Die *parent, int depth)
{
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent, &child) != 0)
        return 0;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram: {
            Dwarf_Addr base, start, end;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0)
                if (end > start && add_range(u, start, end, &child) != 0)
                    return -1;
            break;
        }
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
        case DW_TAG_module:
            if (collect_functions(u, &child, depth + 1) != 0)
                return -1;
            break;
        default:
            break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static int by_start(const void *pa, const void *pb)
{
    const func_range *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* The function table of the unit `cu`, read on first use; NULL when out of
 * memory. */
static unit_funcs *unit_of(tdm__inline_index *ix, Dwarf_Die *cu)
{
    const void *key = cu->addr;
    if (ix->cap) {
        size_t mask = ix->cap - 1;
        for (size_t i = hash_key(key) & mask; ix->units[i].key; i = (i + 1) & mask)
            if (ix->units[i].key == key)
                return &ix->units[i];
    }
    if (2 * (ix->len + 1) > ix->cap && index_grow(ix) != 0)
        return NULL;
    unit_funcs u = {key, NULL, 0, 0};
    if (collect_functions(&u, cu, 0) != 0) {
        free(u.r);
        return NULL;
    }
    qsort(u.r, u.n, sizeof *u.r, by_start);
    size_t mask = ix->cap - 1, i = hash_key(key) & mask;
    while (ix->units[i].key)
        i = (i + 1) & mask;
    ix->units[i] = u;
    ix->len++;
    return &ix->units[i];
}

/* The function of `u` whose code holds pc, or NULL.  Ranges do not nest
 * (GNU C nested functions are not collected), so the nearest start is it. */
static Dwarf_Die *function_at(unit_funcs *u, Dwarf_Addr pc)
{
    if (u->n == 0 || pc < u->r[0].start)
        return NULL;
    size_t lo = 0, hi = u->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->r[mid].start <= pc)
            lo = mid;
        else
            hi = mid;
    }
    return pc < u->r[lo].end ? &u->r[lo].die : NULL;
}

static void describe(Dwarf_Die *inl, tdm__inlined_call *out)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(
        dwarf_attr_integrate(inl, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(
            dwarf_attr_integrate(inl, DW_AT_MIPS_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(inl, DW_AT_name, &attr));
    out->function = name ? name : "??";
    out->call_file = NULL;
    out->call_line = 0;
    Dwarf_Word file = 0, line = 0;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &attr), &line) == 0)
        out->call_line = line <= INT32_MAX ? (int)line : 0;
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t nfiles;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &attr), &file) == 0 &&
        dwarf_diecu(inl, &cu, NULL, NULL) &&
        dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 && file < nfiles)
        out->call_file = dwarf_filesrc(files, file, NULL, NULL);
}

/* chain[0..n) is outermost first; out[] gets it innermost first.  When
 * there are more than `max`, the innermost max - 1 and the outermost: the
 * native frame keeps its own call site. */
static int innermost_first(Dwarf_Die **chain, int n, tdm__inlined_call *out,
                           int max)
{
    int k = 0;
    int stop = n <= max ? 0 : n - (max - 1);
    for (int i = n - 1; i >= stop; i--)
        describe(chain[i], &out[k++]);
    if (n > max)
        describe(chain[0], &out[k++]);
    return k;
}

static int chain_by_scopes(Dwarf_Die *cu, Dwarf_Addr pc, tdm__inlined_call *out,
                           int max)
{
    /* dwarf_getscopes stops at the innermost inlined call and goes on with
     * the scopes of its abstract definition; dwarf_getscopes_die from the
     * innermost scope gives the concrete ones: every call up to the
     * function. */
    Dwarf_Die *inner = NULL, *scopes = NULL;
    int n = dwarf_getscopes(cu, pc, &inner), k = 0;
    n = n > 0 ? dwarf_getscopes_die(&inner[0], &scopes) : 0;
    free(inner);
    Dwarf_Die **chain = n > 0 ? malloc((size_t)n * sizeof *chain) : NULL;
    /* scopes are innermost first, up to the unit; chain is outermost first */
    for (int i = 0; chain && i < n && dwarf_tag(&scopes[i]) != DW_TAG_subprogram; i++)
        if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine)
            k++;
    for (int i = 0, j = k; chain && j > 0; i++)
        if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine)
            chain[--j] = &scopes[i];
    int count = chain ? innermost_first(chain, k, out, max) : 0;
    free(chain);
    free(scopes);
    return count;
}

static int chain_by_index(tdm__inline_index *ix, Dwarf_Die *cu, Dwarf_Addr pc,
                          tdm__inlined_call *out, int max)
{
    unit_funcs *u = unit_of(ix, cu);
    Dwarf_Die *fn = u ? function_at(u, pc) : NULL;
    if (!fn)
        return 0;
    /* Walk down: at each level the one child whose code holds pc.  Keep
     * the outermost inlined call and the innermost ones that fit. */
    Dwarf_Die nodes[TDM__INLINE_MAX + 1], outermost, scope = *fn, child;
    Dwarf_Die *chain[TDM__INLINE_MAX + 1];
    int n = 0, total = 0, depth = 0;
    while (depth++ < 256 && dwarf_child(&scope, &child) == 0) {
        int found = 0;
        do {
            int tag = dwarf_tag(&child);
            if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
                 tag == DW_TAG_try_block || tag == DW_TAG_catch_block) &&
                dwarf_haspc(&child, pc) > 0) {
                found = 1;
                break;
            }
        } while (dwarf_siblingof(&child, &child) == 0);
        if (!found)
            break;
        if (dwarf_tag(&child) == DW_TAG_inlined_subroutine) {
            if (total == 0)
                outermost = child;
            else if (n < TDM__INLINE_MAX)
                nodes[n++] = child;
            else { /* full: drop the outermost kept one, keep the innermost */
                memmove(&nodes[0], &nodes[1], (n - 1) * sizeof nodes[0]);
                nodes[n - 1] = child;
            }
            total++;
        }
        scope = child;
    }
    if (total == 0)
        return 0;
    chain[0] = &outermost;
    for (int i = 0; i < n; i++)
        chain[1 + i] = &nodes[i];
    return innermost_first(chain, 1 + n, out, max);
}

int tdm__inline_chain(tdm__inline_index *ix, Dwfl_Module *mod, Dwarf_Addr addr,
                      int scan_scopes, tdm__inlined_call *out, int max)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    if (!cu || max <= 0)
        return 0;
    if (scan_scopes || !ix)
        return chain_by_scopes(cu, addr - bias, out, max);
    return chain_by_index(ix, cu, addr - bias, out, max);
}
