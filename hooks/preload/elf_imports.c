/* hooks/preload/elf_imports.c: whether a loaded object imports a symbol,
 * from its dynamic section as the loader mapped it.
 *
 * The dynamic symbol table (DT_SYMTAB, names in DT_STRTAB) lists what the
 * object defines and, as undefined entries (section SHN_UNDEF), what it
 * takes from other objects.  The table carries no length of its own: the
 * hash table gives it.  DT_HASH's second word is the number of entries;
 * DT_GNU_HASH (what GNU ld and lld write by default) hashes only the
 * entries from `symoffset` on, so the number is one past the highest entry
 * its chains reach (the last of a chain has its low bit set); undefined
 * entries sit below `symoffset`, and a table whose buckets are all empty
 * has exactly `symoffset`.  glibc relocates the d_ptr values of the
 * dynamic section in place on most targets but not all (a read-only
 * .dynamic, the vDSO's): a value below the object's load address is an
 * unrelocated one and gets the load address added.
 *
 * Owns: nothing.  Lock: none (reads memory the loader keeps mapped while
 * the object is loaded).
 */
#define _GNU_SOURCE
#include "elf_imports.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

/* More entries than any real object has: a corrupt table reads no further. */
#define MAX_SYMBOLS ((size_t)1 << 24)

typedef struct dynamic_tables {
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const uint32_t *hash, *gnu_hash;
} dynamic_tables;

static uintptr_t mapped(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static int read_dynamic(const struct dl_phdr_info *info, dynamic_tables *t)
{
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (dyn == NULL)
        return 0;
    memset(t, 0, sizeof *t);
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: t->symtab = (const ElfW(Sym) *)mapped(info, dyn->d_un.d_ptr); break;
        case DT_STRTAB: t->strtab = (const char *)mapped(info, dyn->d_un.d_ptr); break;
        case DT_STRSZ: t->strsz = dyn->d_un.d_val; break;
        case DT_HASH: t->hash = (const uint32_t *)mapped(info, dyn->d_un.d_ptr); break;
        case DT_GNU_HASH: t->gnu_hash = (const uint32_t *)mapped(info, dyn->d_un.d_ptr); break;
        default: break;
        }
    }
    return t->symtab != NULL && t->strtab != NULL && (t->hash != NULL || t->gnu_hash != NULL);
}

/* The number of entries of the dynamic symbol table. */
static size_t symbol_count(const dynamic_tables *t)
{
    if (t->hash != NULL)
        return t->hash[1]; /* nchain */
    const uint32_t *g = t->gnu_hash;
    uint32_t nbuckets = g[0], symoffset = g[1], bloom_words = g[2];
    const uint32_t *buckets =
        (const uint32_t *)((const ElfW(Addr) *)(const void *)(g + 4) + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        last = buckets[b] > last ? buckets[b] : last;
    if (last < symoffset)
        return symoffset;
    while (last - symoffset < MAX_SYMBOLS && !(chain[last - symoffset] & 1))
        last++;
    return (size_t)last + 1;
}

int tdm__elf_imports_any(const struct dl_phdr_info *info, const char *const *names, size_t n)
{
    dynamic_tables t;
    if (info == NULL || !read_dynamic(info, &t))
        return 0;
    size_t count = symbol_count(&t);
    if (count > MAX_SYMBOLS)
        count = MAX_SYMBOLS;
    for (size_t i = 1; i < count; i++) { /* entry 0 is the null symbol */
        const ElfW(Sym) *s = &t.symtab[i];
        if (s->st_shndx != SHN_UNDEF || s->st_name == 0 || s->st_name >= t.strsz ||
            ELF64_ST_BIND(s->st_info) == STB_LOCAL)
            continue;
        const char *name = t.strtab + s->st_name;
        for (size_t k = 0; k < n; k++)
            if (strcmp(name, names[k]) == 0)
                return 1;
    }
    return 0;
}
