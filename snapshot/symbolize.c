/* snapshot/symbolize.c: return address -> function, source file, line and
 * module, for the stacks of a snapshot, at dump time.
 *
 * elfutils' libdwfl looks at this process's own maps (dwfl_linux_proc_report)
 * and reads each object's symbol table and DWARF line table; where an
 * object has no debug information the function still comes from its
 * symbol table, and where libdwfl knows nothing (or could not start) dladdr
 * gives what the dynamic linker knows.  Every lookup uses pc - 1: a return
 * address points after the call, possibly at the first instruction of the
 * next line or even of the next function.  When pc - 1 lies in code inlined
 * into its function, the name is the inlined function's, so that the name
 * and the file:line describe the same code.
 *
 * Separate debug files are looked up on this machine only: the build-id
 * directory, then the object's .gnu_debuglink name in its own folder, its
 * .debug/ subfolder and under /usr/lib/debug.  elfutils' standard lookup
 * is not used: it ends by starting a debuginfod client, which may wait on
 * the network and, started while another thread forks, crashed the forked
 * child's own dump (seen in -O3 builds without debug information).
 *
 * Each unique pc is resolved once and cached.  Every string handed out is
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
#include "hash.h"

typedef struct sym_entry {
    uintptr_t pc;   /* return address as given */
    int used;       /* slot holds an entry */
    tdm_symbol sym; /* strings owned by the symbolizer */
} sym_entry;

struct tdm_symbolizer {
    Dwfl *dwfl;              /* NULL when libdwfl could not start: dladdr */
    unsigned long long loads; /* the dynamic linker's count of loads when
                                 the modules were last read */
    sym_entry *cache;        /* open addressing on pc, load <= 1/2 */
    size_t cache_cap;        /* slots, a power of two */
    size_t cache_len;        /* entries */
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

static int loads_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* every entry carries the same count: one is enough */
}

/* How many objects the dynamic linker has loaded since the start. */
static unsigned long long loads_so_far(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(loads_cb, &adds);
    return adds;
}

/* Reads (or re-reads, keeping what is there) this process's modules. */
static int report_modules(Dwfl *dwfl, int again)
{
    if (again)
        dwfl_report_begin_add(dwfl);
    else
        dwfl_report_begin(dwfl);
    int rc = dwfl_linux_proc_report(dwfl, getpid());
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

static void cache_put(tdm_symbolizer *s, uintptr_t pc, const tdm_symbol *sym)
{
    if (2 * (s->cache_len + 1) > s->cache_cap && cache_grow(s) != 0)
        return; /* out of memory: resolve again next time */
    size_t mask = s->cache_cap - 1, i = hash_pc(pc) & mask;
    while (s->cache[i].used)
        i = (i + 1) & mask;
    s->cache[i].pc = pc;
    s->cache[i].used = 1;
    s->cache[i].sym = *sym;
    s->cache_len++;
}

/* ---- resolving ----------------------------------------------------------- */

/* The name of the function whose code is at `addr` when that code was
 * inlined, else NULL (the symbol table's name is then the right one). */
static const char *inlined_name(Dwfl_Module *mod, Dwarf_Addr addr)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    if (!cu)
        return NULL;
    Dwarf_Die *scopes = NULL;
    int n = dwarf_getscopes(cu, addr - bias, &scopes);
    const char *name = NULL;
    for (int i = 0; i < n; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram)
            break;
        if (tag == DW_TAG_inlined_subroutine) {
            /* _integrate follows DW_AT_abstract_origin to the declaration;
             * the linkage name keeps C++ names as the symbol table has
             * them. */
            Dwarf_Attribute attr;
            name = dwarf_formstring(
                dwarf_attr_integrate(&scopes[i], DW_AT_linkage_name, &attr));
            if (!name)
                name = dwarf_formstring(
                    dwarf_attr_integrate(&scopes[i], DW_AT_name, &attr));
            break;
        }
    }
    free(scopes);
    return name;
}

/* The module holding addr.  libdwfl 0.188 answers an address above every
 * module with the last module it knows: only believe one that holds it. */
static Dwfl_Module *find_module(tdm_symbolizer *s, Dwarf_Addr addr)
{
    Dwfl_Module *mod = s->dwfl ? dwfl_addrmodule(s->dwfl, addr) : NULL;
    Dwarf_Addr start = 0, end = 0;
    if (mod && dwfl_module_info(mod, NULL, &start, &end, NULL, NULL, NULL,
                                NULL) &&
        start <= addr && addr < end)
        return mod;
    return NULL;
}

static void resolve(tdm_symbolizer *s, uintptr_t pc, tdm_symbol *out)
{
    *out = unknown_symbol;
    if (pc == 0)
        return;
    const Dwarf_Addr addr = (Dwarf_Addr)(pc - 1);
    const char *function = NULL, *file = NULL, *module = NULL;
    int line = 0;

    Dwfl_Module *mod = find_module(s, addr);
    if (!mod && s->dwfl && s->loads != loads_so_far()) {
        /* An object was loaded after we read the maps: read them again. */
        s->loads = loads_so_far();
        if (report_modules(s->dwfl, 1) == 0)
            mod = find_module(s, addr);
    }
    if (mod) {
        module = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL,
                                  NULL);
        GElf_Off offset;
        GElf_Sym elfsym;
        function = dwfl_module_addrinfo(mod, addr, &offset, &elfsym, NULL,
                                        NULL, NULL);
        const char *inl = inlined_name(mod, addr);
        if (inl)
            function = inl;
        Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
        if (l)
            file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
    }
    if (!function || !module) {
        Dl_info info;
        if (dladdr((void *)(uintptr_t)addr, &info)) {
            if (!function)
                function = info.dli_sname;
            if (!module)
                module = info.dli_fname;
        }
    }
    /* A symbol table may name versioned symbols "name@@VERSION". */
    size_t flen = function ? strcspn(function, "@") : 0;
    if (function && flen == 0)
        flen = strlen(function);
    out->function = intern_strn(s, function, flen, "??");
    out->file = file ? intern_str(s, file, "") : "";
    out->line = file && line > 0 ? (unsigned)line : 0;
    out->module = intern_str(s, module, "");
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
    s->dwfl = dwfl_begin(&proc_callbacks);
    if (s->dwfl && report_modules(s->dwfl, 0) != 0) {
        dwfl_end(s->dwfl);
        s->dwfl = NULL;
    }
    *out = s;
    return TDM_OK;
}

void tdm__symbolize(tdm_symbolizer *s, uintptr_t pc, tdm_symbol *out)
{
    if (!out)
        return;
    if (!s) {
        *out = unknown_symbol;
        return;
    }
    const sym_entry *e = cache_find(s, pc);
    if (e) {
        *out = e->sym;
        return;
    }
    resolve(s, pc, out);
    cache_put(s, pc, out);
}

size_t tdm__symbolize_frames(tdm_symbolizer *s, uintptr_t pc,
                             const tdm_symbol **out)
{
    if (!s) {
        *out = &unknown_symbol;
        return 1;
    }
    sym_entry *e = cache_find(s, pc);
    if (!e) {
        tdm_symbol sym;
        resolve(s, pc, &sym);
        cache_put(s, pc, &sym);
        e = cache_find(s, pc);
        if (!e) { /* out of memory */
            *out = &unknown_symbol;
            return 1;
        }
    }
    *out = &e->sym;
    return 1;
}

void tdm__symbolizer_close(tdm_symbolizer *s)
{
    if (!s)
        return;
    if (s->dwfl)
        dwfl_end(s->dwfl);
    for (size_t i = 0; i < s->strs_cap; i++)
        free(s->strs[i]);
    free(s->strs);
    free(s->cache);
    free(s);
}
