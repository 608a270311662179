/* symbolize/symbolize_symtab.c: a module's function symbols as sorted
 * address ranges, searched by binary search.
 *
 * Read once per module through dwfl_module_getsym_info (the .symtab of the
 * object or of its debug file, else .dynsym, plus a MiniDebugInfo table).
 * Only functions (STT_FUNC, STT_GNU_IFUNC) defined in the module count.
 * Symbols at one address (aliases: C++ constructors C1/C2, weak and strong
 * names, a local copy) become one entry named by the best of them: global
 * before weak before local, a sized one before one without size, then the
 * first in the table.  A symbol without a size (hand-written assembly)
 * reaches up to the next symbol.  Ranges may nest (a local label symbol
 * inside a function): a lookup that falls past the nearest symbol's end
 * tries the few before it.
 */
#include <stdlib.h>
#include <string.h>
#include <gelf.h>

#include "symbolize_internal.h"

typedef struct sym_range {
    Dwarf_Addr start, end; /* [start, end) */
    const char *name;      /* libdwfl's string, lives as long as the Dwfl */
    int rank;              /* preference among aliases: lower is better */
    size_t index;          /* position in the symbol table, last tie-break */
} sym_range;

struct tdm__symtab {
    sym_range *r;
    size_t n;
};

/* How far back a lookup looks for a range that holds addr when the
 * nearest start's range ends before it (nested symbols). */
enum { NEST_LOOKBACK = 8 };

static int bind_rank(const GElf_Sym *sym)
{
    switch (GELF_ST_BIND(sym->st_info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
    }
}

static int by_start_then_preference(const void *pa, const void *pb)
{
    const sym_range *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    int sa = a->end == a->start, sb = b->end == b->start; /* no size */
    if (a->rank != b->rank)
        return a->rank - b->rank;
    if (sa != sb)
        return sa - sb;
    return a->index < b->index ? -1 : a->index > b->index;
}

tdm__symtab *tdm__symtab_build(Dwfl_Module *mod)
{
    int count = dwfl_module_getsymtab(mod);
    if (count <= 0)
        return NULL;
    Dwarf_Addr mod_end = 0;
    dwfl_module_info(mod, NULL, NULL, &mod_end, NULL, NULL, NULL, NULL);
    tdm__symtab *t = calloc(1, sizeof *t);
    sym_range *r = malloc((size_t)count * sizeof *r);
    if (!t || !r) {
        free(t);
        free(r);
        return NULL;
    }
    size_t n = 0;
    for (int i = 0; i < count; i++) {
        GElf_Sym sym;
        GElf_Addr addr = 0;
        GElf_Word shndx = 0;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx,
                                                   NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
            shndx == SHN_UNDEF)
            continue;
        r[n++] = (sym_range){addr, addr + sym.st_size, name, bind_rank(&sym),
                             (size_t)i};
    }
    qsort(r, n, sizeof *r, by_start_then_preference);
    /* One entry per address: the first after sorting is the preferred
     * name; its range is the largest of the aliases'. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[m - 1].start == r[i].start) {
            if (r[i].end > r[m - 1].end)
                r[m - 1].end = r[i].end;
            continue;
        }
        r[m++] = r[i];
    }
    for (size_t i = 0; i < m; i++)
        if (r[i].end == r[i].start) /* no size: up to the next symbol */
            r[i].end = i + 1 < m ? r[i + 1].start
                     : mod_end > r[i].start ? mod_end
                                            : r[i].start + 1;
    t->r = r;
    t->n = m;
    return t;
}

const char *tdm__symtab_lookup(const tdm__symtab *t, Dwarf_Addr addr)
{
    if (!t || t->n == 0 || addr < t->r[0].start)
        return NULL;
    size_t lo = 0, hi = t->n; /* the last start <= addr is in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->r[mid].start <= addr)
            lo = mid;
        else
            hi = mid;
    }
    for (size_t k = 0; k <= lo && k < NEST_LOOKBACK; k++)
        if (addr < t->r[lo - k].end)
            return t->r[lo - k].name;
    return NULL;
}

size_t tdm__symtab_size(const tdm__symtab *t) { return t ? t->n : 0; }

void tdm__symtab_free(tdm__symtab *t)
{
    if (!t)
        return;
    free(t->r);
    free(t);
}
