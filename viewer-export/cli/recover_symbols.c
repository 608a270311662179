/* viewer-export/cli/recover_symbols.c: offline symbolizing for `tidemark
 * recover`: libdw's Dwfl over the module files the spill file names, each
 * reported at its recorded load address (dwfl_report_elf with the bias),
 * after its build-id was checked against the recorded one.  No state
 * beyond the symbolizer, no lock.
 */
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recover.h"

struct tdm_recover_symbols {
    Dwfl *dwfl;
    char *debuginfo_path;
};

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* 1 when the file's build-id is the recorded one (or neither has one),
 * 0 when it differs, -1 when the file cannot be read. */
static int build_id_matches(const tdm_spill_module *m)
{
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int ok = -1;
    if (elf) {
        const void *id = NULL;
        ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
        if (n < 0)
            n = 0;
        ok = (uint32_t)n == m->build_id_len && (n == 0 || memcmp(id, m->build_id, (size_t)n) == 0);
        elf_end(elf);
    }
    close(fd);
    return ok;
}

tdm_recover_symbols *tdm__recover_symbols_open(const tdm_spill_data *d, FILE *warn,
                                               size_t *changed, size_t *missing)
{
    *changed = *missing = 0;
    tdm_recover_symbols *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dwfl = dwfl_begin(&callbacks);
    if (!s->dwfl) {
        free(s);
        return NULL;
    }
    dwfl_report_begin(s->dwfl);
    for (size_t i = 0; i < d->module_count; i++) {
        const tdm_spill_module *m = &d->modules[i];
        if (!m->path[0])
            continue;
        int ok = build_id_matches(m);
        if (ok <= 0) {
            (*(ok < 0 ? missing : changed))++;
            if (warn)
                fprintf(warn, "tidemark recover: %s %s; its frames keep raw addresses\n",
                        m->path, ok < 0 ? "is missing" : "changed since the run (build-id differs)");
            continue;
        }
        dwfl_report_elf(s->dwfl, m->path, m->path, -1, m->bias, false);
    }
    dwfl_report_end(s->dwfl, NULL, NULL);
    return s;
}

void tdm__recover_symbolize(tdm_recover_symbols *s, uint64_t pc, const char **function,
                            const char **file, unsigned *line, const char **module)
{
    *function = "??";
    *file = "";
    *line = 0;
    *module = "";
    if (!s || pc == 0)
        return;
    /* A return address points after the call: look up the call itself. */
    Dwarf_Addr at = pc - 1;
    Dwfl_Module *m = dwfl_addrmodule(s->dwfl, at);
    if (!m)
        return;
    const char *mod = dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    if (mod)
        *module = mod;
    const char *name = dwfl_module_addrname(m, at);
    if (name)
        *function = name;
    Dwfl_Line *l = dwfl_module_getsrc(m, at);
    int lineno = 0;
    const char *src = l ? dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (src) {
        *file = src;
        *line = lineno > 0 ? (unsigned)lineno : 0;
    }
}

void tdm__recover_symbols_close(tdm_recover_symbols *s)
{
    if (!s)
        return;
    dwfl_end(s->dwfl);
    free(s);
}
