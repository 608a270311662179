/* viewer-export/import/recover_symbols.c: offline symbolizing for `tidemark
 * recover`: the dump's own symbolizer (symbolize/symbolize.c) over the
 * module files the spill file names, each at its recorded load address,
 * after its build-id was checked against the recorded one, so that a
 * recovered snapshot's frames (inline chains, names, lines) are the ones
 * a dump of the same process writes.  No state beyond the symbolizer, no
 * lock.
 */
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recover.h"
#include "symbolize.h"

struct tdm_recover_symbols {
    tdm_symbolizer *sym;
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
    tdm_symbolizer_module *mods = calloc(d->module_count + 1, sizeof *mods);
    if (!s || !mods) {
        free(s);
        free(mods);
        return NULL;
    }
    size_t n = 0;
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
        mods[n++] = (tdm_symbolizer_module){m->path, m->bias};
    }
    tdm_status st = tdm__symbolizer_open_offline(mods, n, &s->sym);
    free(mods);
    if (st != TDM_OK) {
        free(s);
        return NULL;
    }
    return s;
}

size_t tdm__recover_symbolize(tdm_recover_symbols *s, uint64_t pc, const tdm_symbol **frames)
{
    return tdm__symbolize_frames(s ? s->sym : NULL, (uintptr_t)pc, frames);
}

void tdm__recover_symbols_close(tdm_recover_symbols *s)
{
    if (!s)
        return;
    tdm__symbolizer_close(s->sym);
    free(s);
}
