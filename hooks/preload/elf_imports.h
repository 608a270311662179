/* hooks/preload/elf_imports.h: what a loaded object imports, read from the
 * image the loader mapped (elf_imports.c). */
#ifndef TDM_HOOKS_PRELOAD_ELF_IMPORTS_H
#define TDM_HOOKS_PRELOAD_ELF_IMPORTS_H

#include <link.h>
#include <stddef.h>

/* Whether the object `info` describes (a dl_iterate_phdr entry) imports
 * one of the `n` symbols `names`: an undefined entry of its dynamic
 * symbol table, which the loader binds to another object's definition.
 * 0 for an object without a dynamic symbol table.  Reads only the mapped
 * image: no file, no allocation, no loader call, so it may run inside a
 * dl_iterate_phdr callback. */
__attribute__((visibility("hidden"))) int tdm__elf_imports_any(const struct dl_phdr_info *info,
                                                               const char *const *names,
                                                               size_t n);

#endif
