/* viewer-export/model/names.h: function names as a reader wants them:
 * C++ names demangled by the C++ runtime's own demangler
 * (__cxa_demangle, libstdc++), and the suffixes compilers add to the
 * copies they make of a function (.isra.0, .constprop.1, .part.0, .cold,
 * .lto_priv.0 and their combinations) left out, so that `device_alloc`
 * and its clone `device_alloc.isra.0` read, and group, as one function.
 * Snapshots keep the names raw (as the symbolizer gave them); these are
 * applied when a file is read (stack_display.h).  No state, no locks. */
#ifndef TDM_VIEWER_NAMES_H
#define TDM_VIEWER_NAMES_H

#include <stddef.h>

/* The length of `name` without its compiler clone suffixes: the offset of
 * the first '.' from which the rest is only clone tokens (isra,
 * constprop, part, cold, lto_priv, localalias, clone, llvm, __uniq),
 * each followed by any number of ".N"; strlen(name) when it has none. */
size_t tdm__name_clone_suffix_start(const char *name);

/* The name to show for a raw symbol name: clone suffixes dropped, then a
 * mangled C++ name (_Z...) demangled.  Returns a malloc'd string, or NULL
 * when the name reads as it is (or memory ran out: *oom is then set). */
char *tdm__name_for_display(const char *raw, int *oom);

#endif
