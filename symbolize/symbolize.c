/* symbolize/symbolize.c: return address -> function, source file, line and
 * module, for the stacks of a snapshot, at dump time.
 *
 * elfutils' libdwfl reads the symbol table and DWARF line table of each
 * object the dynamic linker has loaded (dl_iterate_phdr, each file reported
 * at its load bias); where an
 * object has no debug information the function still comes from its
 * symbol table, and where libdwfl knows nothing (or could not start) dladdr
 * gives what the dynamic linker knows.  Every lookup uses pc - 1: a return
 * address points after the call, possibly at the first instruction of the
 * next line or even of the next function.
 *
 * The function is the symbol table's, spelled as the table has it (C++
 * names mangled, clone suffixes such as .isra.0 kept; readers demangle),
 * found in a sorted copy of each module's function symbols
 * (symbolize_symtab.c).  When pc - 1 lies in code inlined into that
 * function, the DWARF inline chain (symbolize_inline.c) gives one frame per
 * inlined function, innermost first, before the function's own: the
 * innermost with pc's file:line, each caller with the file:line of its call.
 *
 * Separate debug files are looked up on this machine only: the build-id
 * directory, then the object's .gnu_debuglink name in its own folder, its
 * .debug/ subfolder and under /usr/lib/debug.  elfutils' standard lookup
 * is not used: it ends by starting a debuginfod client, which may wait on
 * the network and, started while another thread forks, crashed the forked
 * child's own dump (seen in -O3 builds without debug information).
 *
 * Each unique pc is resolved once and cached (10,000 distinct frames of a
 * large C++ library in a fraction of a second, see bench/symbolize.c).  Every string handed out is
 * a copy owned by the symbolizer (interned, so repeated file and module
 * names are stored once) and lives until tdm__symbolizer_close, even if the
 * object it came from is unloaded meanwhile.  Allocates freely (malloc);
 * never used while recording.  Not thread-safe: one user at a time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize.h"
#include "symbolize_internal.h"
#include "hash.h"

typedef struct sym_entry {
    uintptr_t pc;            /* return address as given */
    uint32_t used;           /* slot holds an entry */
    uint32_t count;          /* frames: the inline chain, then the function */
    const tdm_symbol *frames; /* in the frame arena, never moved */
} sym_entry;

/* Frames handed out live in blocks that are never moved or freed before
 * tdm__symbolizer_close, so pointers stay good while the cache grows. */
typedef struct frame_block {
    struct frame_block *next;
    size_t used;
    tdm_symbol frames[1024];
} frame_block;

/* A module's function symbols, read on first use. */
typedef struct module_syms {
    Dwfl_Module *mod;
    tdm__symtab *table; /* NULL: none, ask libdwfl */
} module_syms;

struct tdm_symbolizer {
    Dwfl *dwfl;              /* NULL when libdwfl could not start: dladdr */
    unsigned long long loads; /* the dynamic linker's count of loads when
                                 the modules were last read */
    int reference;           /* libdwfl's own lookups, for comparison */
    int offline;             /* another process's objects: this one's maps
                                and dladdr know nothing of them */
    sym_entry *cache;        /* open addressing on pc, load <= 1/2 */
    size_t cache_cap;        /* slots, a power of two */
    size_t cache_len;        /* entries */
    frame_block *blocks;     /* newest first */
    module_syms *mods;       /* modules seen so far */
    size_t nmods, mods_cap, last_mod;
    tdm__inline_index *inlines;
    tdm_symbol oom_frame;    /* the answer when the cache is out of memory */
    sym_entry oom_entry;
    char **strs;             /* interned strings, open addressing */
    size_t strs_cap;         /* slots, a power of two */
    size_t strs_len;         /* entries */
};

static const tdm_symbol unknown_symbol = {"??", "", 0, "", TDM_FRAME_NATIVE};

/* ---- local-only debug file lookup ---------------------------------------- */

static int find_debuginfo_local(Dwfl_Module *mod, void **userdata,
                                const char *modname, Dwarf_Addr base,
                                const char *file_name,
                                const char *debuglink_file,
                                GElf_Word debuglink_crc,
                                char **debuginfo_file_name)
{
    int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
                                          file_name, debuglink_file,
                                          debuglink_crc, debuginfo_file_name);
    if (fd >= 0 || !file_name || !debuglink_file || !*debuglink_file)
        return fd;
    const char *slash = strrchr(file_name, '/');
    int dir_len = slash ? (int)(slash - file_name) : 0;
    for (int k = 0; k < 3; k++) {
        char path[4096];
        int n = k == 0 ? snprintf(path, sizeof path, "%.*s/%s", dir_len,
                                  file_name, debuglink_file)
              : k == 1 ? snprintf(path, sizeof path, "%.*s/.debug/%s", dir_len,
                                  file_name, debuglink_file)
                       : snprintf(path, sizeof path, "/usr/lib/debug%.*s/%s",
                                  dir_len, file_name, debuglink_file);
        if (n <= 0 || (size_t)n >= sizeof path || strcmp(path, file_name) == 0)
            continue; /* too long, or the object itself */
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        *debuginfo_file_name = strdup(path);
        if (*debuginfo_file_name)
            return fd;
        close(fd);
        return -1;
    }
    return -1;
}

static const Dwfl_Callbacks proc_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = find_debuginfo_local,
};

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo_local,
    .section_address = dwfl_offline_section_address,
};

static int counts_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    unsigned long long *c = data;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1; /* every entry carries the same counts: one is enough */
}

void tdm__dl_counts(unsigned long long *loads, unsigned long long *unloads)
{
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(counts_cb, c);
    if (loads)
        *loads = c[0];
    if (unloads)
        *unloads = c[1];
}

/* How many objects the dynamic linker has loaded since the start. */
static unsigned long long loads_so_far(void)
{
    unsigned long long adds;
    tdm__dl_counts(&adds, NULL);
    return adds;
}

typedef struct report_ctx {
    Dwfl *dwfl;
    int again;    /* keep what is reported already */
    int reported; /* objects reported or found reported */
} report_ctx;

/* The module of dwfl holding addr.  libdwfl 0.188 answers an address
 * above every module with the last module it knows: only believe one that
 * holds it. */
static Dwfl_Module *module_holding(Dwfl *dwfl, Dwarf_Addr addr)
{
    Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, addr) : NULL;
    Dwarf_Addr start = 0, end = 0;
    if (mod && dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL, NULL) &&
        start <= addr && addr < end)
        return mod;
    return NULL;
}

/* Reports one loaded object: its file at its load bias.  The objects come
 * from the dynamic linker, not from /proc/self/maps: there, a file that
 * another symbolizer's libdw has mapped to read it (elf_begin's mmap) is a
 * second mapping under the same name, and libdwfl's maps reader then put
 * the module at the wrong addresses (a second symbolizer named the
 * library's functions '_fini' and lost its inline chains). */
static int report_object_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    report_ctx *c = data;
    const char *name = info->dlpi_name;
    char exe[4096];
    if (!name || !*name) { /* the program itself */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return 0;
        exe[n] = '\0';
        name = exe;
    }
    /* The vDSO has no file (dladdr names its functions). */
    if (!strchr(name, '/'))
        return 0;
    Dwarf_Addr first = 0;
    int loads = 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && loads++ == 0)
            first = (Dwarf_Addr)info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
    if (loads == 0)
        return 0;
    if (c->again && module_holding(c->dwfl, first)) {
        c->reported++;
        return 0;
    }
    if (dwfl_report_elf(c->dwfl, name, name, -1, (GElf_Addr)info->dlpi_addr, false))
        c->reported++;
    return 0;
}

/* Reads (or re-reads, keeping what is there) this process's modules; the
 * maps reader only where the dynamic linker's list gave none. */
static int report_modules(Dwfl *dwfl, int again)
{
    if (again)
        dwfl_report_begin_add(dwfl);
    else
        dwfl_report_begin(dwfl);
    report_ctx c = {dwfl, again, 0};
    dl_iterate_phdr(report_object_cb, &c);
    int rc = c.reported > 0 ? 0 : dwfl_linux_proc_report(dwfl, getpid());
    if (dwfl_report_end(dwfl, NULL, NULL) != 0)
        rc = -1;
    return rc;
}

/* ---- strings ------------------------------------------------------------- */

static int strs_grow(tdm_symbolizer *s)
{
    size_t cap = s->strs_cap ? s->strs_cap * 2 : 256;
    char **n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < s->strs_cap; i++) {
        if (!s->strs[i])
            continue;
        size_t j = tdm__fnv1a(s->strs[i], strlen(s->strs[i])) & (cap - 1);
        while (n[j])
            j = (j + 1) & (cap - 1);
        n[j] = s->strs[i];
    }
    free(s->strs);
    s->strs = n;
    s->strs_cap = cap;
    return 0;
}

/* The symbolizer's own copy of str[0..len); `fallback` (a literal) when
 * str is NULL or empty, or when out of memory. */
static const char *intern_strn(tdm_symbolizer *s, const char *str, size_t len,
                               const char *fallback)
{
    if (!str || len == 0)
        return fallback;
    if (2 * (s->strs_len + 1) > s->strs_cap && strs_grow(s) != 0)
        return fallback;
    size_t mask = s->strs_cap - 1, i = tdm__fnv1a(str, len) & mask;
    for (; s->strs[i]; i = (i + 1) & mask)
        if (strncmp(s->strs[i], str, len) == 0 && s->strs[i][len] == '\0')
            return s->strs[i];
    char *copy = strndup(str, len);
    if (!copy)
        return fallback;
    s->strs[i] = copy;
    s->strs_len++;
    return copy;
}

static const char *intern_str(tdm_symbolizer *s, const char *str,
                              const char *fallback)
{
    return intern_strn(s, str, str ? strlen(str) : 0, fallback);
}

/* ---- the pc cache -------------------------------------------------------- */

static size_t hash_pc(uintptr_t pc)
{
    uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31));
}

static int cache_grow(tdm_symbolizer *s)
{
    size_t cap = s->cache_cap ? s->cache_cap * 2 : 1024;
    sym_entry *n = calloc(cap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < s->cache_cap; i++) {
        if (!s->cache[i].used)
            continue;
        size_t j = hash_pc(s->cache[i].pc) & (cap - 1);
        while (n[j].used)
            j = (j + 1) & (cap - 1);
        n[j] = s->cache[i];
    }
    free(s->cache);
    s->cache = n;
    s->cache_cap = cap;
    return 0;
}

static sym_entry *cache_find(tdm_symbolizer *s, uintptr_t pc)
{
    if (!s->cache_cap)
        return NULL;
    size_t mask = s->cache_cap - 1;
    for (size_t i = hash_pc(pc) & mask; s->cache[i].used; i = (i + 1) & mask)
        if (s->cache[i].pc == pc)
            return &s->cache[i];
    return NULL;
}

/* Room for n frames in the arena; NULL when out of memory. */
static tdm_symbol *frames_alloc(tdm_symbolizer *s, size_t n)
{
    frame_block *b = s->blocks;
    if (n > sizeof b->frames / sizeof b->frames[0])
        return NULL;
    if (!b || b->used + n > sizeof b->frames / sizeof b->frames[0]) {
        b = malloc(sizeof *b);
        if (!b)
            return NULL;
        b->next = s->blocks;
        b->used = 0;
        s->blocks = b;
    }
    tdm_symbol *f = &b->frames[b->used];
    b->used += n;
    return f;
}

static sym_entry *cache_put(tdm_symbolizer *s, uintptr_t pc,
                            const tdm_symbol *frames, size_t n)
{
    tdm_symbol *kept = frames_alloc(s, n);
    if (!kept || (2 * (s->cache_len + 1) > s->cache_cap && cache_grow(s) != 0))
        return NULL; /* out of memory: resolve again next time */
    memcpy(kept, frames, n * sizeof *kept);
    size_t mask = s->cache_cap - 1, i = hash_pc(pc) & mask;
    while (s->cache[i].used)
        i = (i + 1) & mask;
    s->cache[i] = (sym_entry){pc, 1, (uint32_t)n, kept};
    s->cache_len++;
    return &s->cache[i];
}

/* ---- resolving ----------------------------------------------------------- */

static Dwfl_Module *find_module(tdm_symbolizer *s, Dwarf_Addr addr)
{
    return module_holding(s->dwfl, addr);
}

/* mod's function symbols, read the first time it is asked for. */
static const tdm__symtab *module_table(tdm_symbolizer *s, Dwfl_Module *mod)
{
    if (s->last_mod < s->nmods && s->mods[s->last_mod].mod == mod)
        return s->mods[s->last_mod].table;
    for (size_t i = 0; i < s->nmods; i++)
        if (s->mods[i].mod == mod) {
            s->last_mod = i;
            return s->mods[i].table;
        }
    if (s->nmods == s->mods_cap) {
        size_t cap = s->mods_cap ? 2 * s->mods_cap : 64;
        module_syms *m = realloc(s->mods, cap * sizeof *m);
        if (!m)
            return NULL;
        s->mods = m;
        s->mods_cap = cap;
    }
    s->mods[s->nmods] = (module_syms){mod, tdm__symtab_build(mod)};
    s->last_mod = s->nmods++;
    return s->mods[s->last_mod].table;
}

/* The function symbol holding addr: the sorted table, else (no table, or
 * an address between its functions) libdwfl's own search. */
static const char *function_name(tdm_symbolizer *s, Dwfl_Module *mod,
                                 Dwarf_Addr addr)
{
    const char *name = s->reference ? NULL
                                     : tdm__symtab_lookup(module_table(s, mod), addr);
    if (!name) {
        GElf_Off offset;
        GElf_Sym elfsym;
        name = dwfl_module_addrinfo(mod, addr, &offset, &elfsym, NULL, NULL,
                                    NULL);
    }
    return name;
}

/* A symbol table may name versioned symbols "name@@VERSION". */
static const char *intern_function(tdm_symbolizer *s, const char *function)
{
    size_t flen = function ? strcspn(function, "@") : 0;
    if (function && flen == 0)
        flen = strlen(function);
    return intern_strn(s, function, flen, "??");
}

/* The C runtime's entry points of a process or thread, at the bottom of
 * every stack.  They get no file:line: for them that means inflating
 * glibc's separate debug file (~30 ms at a first dump, most of it) for a
 * line nobody reads. */
static int runtime_entry(const char *function)
{
    static const char *const names[] = {
        "_start", "__libc_start_main", "__libc_start_main_impl",
        "__libc_start_call_main", "start_thread", "clone", "clone3",
        "__clone", "__clone3", "__clone_internal",
    };
    if (function == NULL)
        return 0;
    size_t n = strcspn(function, "@"); /* "name@@VERSION" */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncmp(function, names[i], n) == 0)
            return 1;
    return 0;
}

/* Fills out[] with pc's frames, innermost first; returns how many. */
static size_t resolve(tdm_symbolizer *s, uintptr_t pc, tdm_symbol *out)
{
    out[0] = unknown_symbol;
    if (pc == 0)
        return 1;
    const Dwarf_Addr addr = (Dwarf_Addr)(pc - 1);
    const char *function = NULL, *file = NULL, *module = NULL;
    int line = 0, ninl = 0;
    tdm__inlined_call calls[TDM__INLINE_MAX];

    Dwfl_Module *mod = find_module(s, addr);
    if (!mod && s->dwfl && !s->offline && s->loads != loads_so_far()) {
        /* An object was loaded after we read the maps: read them again. */
        s->loads = loads_so_far();
        if (report_modules(s->dwfl, 1) == 0)
            mod = find_module(s, addr);
    }
    if (mod) {
        module = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL,
                                  NULL);
        function = function_name(s, mod, addr);
        if (!runtime_entry(function)) {
            ninl = tdm__inline_chain(s->inlines, mod, addr, s->reference, calls,
                                     TDM__INLINE_MAX);
            Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
            if (l)
                file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
        }
    }
    if ((!function || !module) && !s->offline) {
        Dl_info info;
        if (dladdr((void *)(uintptr_t)addr, &info)) {
            if (!function)
                function = info.dli_sname;
            if (!module)
                module = info.dli_fname;
        }
    }
    const char *mod_name = intern_str(s, module, "");
    /* The innermost frame has pc's own line; each one after it the line
     * where it calls the one before. */
    for (int i = 0; i <= ninl; i++) {
        tdm_symbol *f = &out[i];
        f->function = i < ninl ? intern_str(s, calls[i].function, "??")
                               : intern_function(s, function);
        f->file = file ? intern_str(s, file, "") : "";
        f->line = file && line > 0 ? (unsigned)line : 0;
        f->module = mod_name;
        f->kind = i < ninl ? TDM_FRAME_INLINED : TDM_FRAME_NATIVE;
        if (i < ninl) {
            file = calls[i].call_file;
            line = calls[i].call_line;
        }
    }
    return (size_t)ninl + 1;
}

static const sym_entry *lookup(tdm_symbolizer *s, uintptr_t pc)
{
    const sym_entry *e = cache_find(s, pc);
    if (e)
        return e;
    tdm_symbol frames[TDM__INLINE_MAX + 1];
    size_t n = resolve(s, pc, frames);
    e = cache_put(s, pc, frames, n);
    if (!e) { /* out of memory: what is known of the function itself */
        s->oom_frame = frames[n - 1];
        s->oom_entry = (sym_entry){pc, 1, 1, &s->oom_frame};
        return &s->oom_entry;
    }
    return e;
}

/* ---- public -------------------------------------------------------------- */

tdm_status tdm__symbolizer_open(tdm_symbolizer **out)
{
    if (!out)
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    tdm_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return TDM_HOST_OUT_OF_MEMORY;
    /* Without libdwfl the symbolizer still works, through dladdr. */
    s->loads = loads_so_far();
    s->inlines = tdm__inline_index_new(); /* NULL: dwarf_getscopes */
    s->dwfl = dwfl_begin(&proc_callbacks);
    if (s->dwfl && report_modules(s->dwfl, 0) != 0) {
        dwfl_end(s->dwfl);
        s->dwfl = NULL;
    }
    *out = s;
    return TDM_OK;
}

tdm_status tdm__symbolizer_open_offline(const tdm_symbolizer_module *mods, size_t n,
                                        tdm_symbolizer **out)
{
    if (!out || (n && !mods))
        return TDM_INVALID_ARGUMENT;
    *out = NULL;
    tdm_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return TDM_HOST_OUT_OF_MEMORY;
    s->offline = 1;
    s->inlines = tdm__inline_index_new();
    s->dwfl = dwfl_begin(&offline_callbacks);
    if (s->dwfl) {
        dwfl_report_begin(s->dwfl);
        for (size_t i = 0; i < n; i++)
            dwfl_report_elf(s->dwfl, mods[i].path, mods[i].path, -1, (GElf_Addr)mods[i].bias,
                            false);
        dwfl_report_end(s->dwfl, NULL, NULL);
    }
    *out = s;
    return TDM_OK;
}

void tdm__symbolize(tdm_symbolizer *s, uintptr_t pc, tdm_symbol *out)
{
    if (!out)
        return;
    *out = s ? lookup(s, pc)->frames[0] : unknown_symbol;
}

size_t tdm__symbolize_frames(tdm_symbolizer *s, uintptr_t pc,
                             const tdm_symbol **out)
{
    if (!s) {
        *out = &unknown_symbol;
        return 1;
    }
    const sym_entry *e = lookup(s, pc);
    *out = e->frames;
    return e->count;
}

void tdm__symbolizer_use_reference(tdm_symbolizer *s, int on)
{
    if (s)
        s->reference = on != 0;
}

void tdm__symbolizer_close(tdm_symbolizer *s)
{
    if (!s)
        return;
    if (s->dwfl)
        dwfl_end(s->dwfl);
    for (size_t i = 0; i < s->nmods; i++)
        tdm__symtab_free(s->mods[i].table);
    free(s->mods);
    tdm__inline_index_free(s->inlines);
    while (s->blocks) {
        frame_block *next = s->blocks->next;
        free(s->blocks);
        s->blocks = next;
    }
    for (size_t i = 0; i < s->strs_cap; i++)
        free(s->strs[i]);
    free(s->strs);
    free(s->cache);
    free(s);
}
