/* simcuda/runtime/runtime_static.c: programs that carry NVIDIA's runtime
 * linked in (nvcc's default, -cudart static) run on the simulated runtime.
 *
 * Such a program calls its own copy of cudaMalloc & co., which talks to
 * the driver through private export tables the platform does not have
 * (docs/simulate.md); LD_PRELOAD cannot reach calls that never leave the
 * executable.  So, as the platform loads and before the program's own
 * constructors register its kernels (__cudaRegisterFatBinary runs from
 * them; the main program's initializers run after every library's), each
 * runtime entry point the executable defines (its symbol table: nvcc does
 * not strip it) is made to jump to the same function as the process would
 * bind it by name: the first preloaded definition, tidemark's interposer
 * when it records, else this runtime's.  The program's code is unchanged
 * otherwise; NVIDIA's runtime in it is never entered.  x86-64 only (a
 * 13-byte absolute jump through r11, which the calling convention leaves
 * free at a call); a stripped executable, or an entry point too small for
 * the jump, is said in the log and left as it is.  Once, at load; no locks.
 */
#define _GNU_SOURCE
#include "simcudart.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define JUMP_BYTES 13

typedef struct exe_range {
    uintptr_t bias, lo, hi; /* load bias; the mapped PT_LOAD extent */
} exe_range;

static int main_program(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    exe_range *r = data;
    r->bias = info->dlpi_addr;
    r->lo = UINTPTR_MAX;
    r->hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + p->p_vaddr, b = a + p->p_memsz;
        if (a < r->lo)
            r->lo = a;
        if (b > r->hi)
            r->hi = b;
    }
    return 1; /* the first object is the main program */
}

static int is_runtime_name(const char *n)
{
    return strncmp(n, "cuda", 4) == 0 || strncmp(n, "__cuda", 6) == 0;
}

/* Rewrites the entry at `at` to jump to `to`. */
static int redirect(uintptr_t at, void *to)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t first = at & ~(uintptr_t)(page - 1);
    size_t len = (at + JUMP_BYTES) - first;
    if (mprotect((void *)first, len, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
        return -1;
    unsigned char code[JUMP_BYTES] = {0x49, 0xbb}; /* movabs r11, imm64 */
    uint64_t target = (uint64_t)(uintptr_t)to;
    memcpy(code + 2, &target, 8);
    code[10] = 0x41, code[11] = 0xff, code[12] = 0xe3; /* jmp r11 */
    memcpy((void *)at, code, sizeof code);
    __builtin___clear_cache((char *)at, (char *)at + JUMP_BYTES);
    return mprotect((void *)first, len, PROT_READ | PROT_EXEC);
}

/* The executable's symbol table, mapped from /proc/self/exe. */
static void redirect_static_runtime(void)
{
#if defined(__x86_64__)
    exe_range r;
    dl_iterate_phdr(main_program, &r);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(ElfW(Ehdr)))
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    size_t fsize = (size_t)st.st_size;
    const unsigned char *f = map;
    const ElfW(Ehdr) *eh = map;
    unsigned found = 0, done = 0, skipped = 0;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_shoff == 0 ||
        eh->e_shentsize != sizeof(ElfW(Shdr)) ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > fsize)
        goto out;
    const ElfW(Shdr) *sh = (const void *)(f + eh->e_shoff);
    for (unsigned s = 0; s < eh->e_shnum; s++) {
        if (sh[s].sh_type != SHT_SYMTAB || sh[s].sh_link >= eh->e_shnum ||
            sh[s].sh_offset + sh[s].sh_size > fsize)
            continue;
        const ElfW(Shdr) *strs = &sh[sh[s].sh_link];
        if (strs->sh_offset + strs->sh_size > fsize)
            continue;
        const ElfW(Sym) *sym = (const void *)(f + sh[s].sh_offset);
        const char *names = (const char *)(f + strs->sh_offset);
        size_t n = sh[s].sh_size / sizeof *sym;
        for (size_t i = 0; i < n; i++) {
            if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF ||
                sym[i].st_name >= strs->sh_size || !is_runtime_name(names + sym[i].st_name))
                continue;
            const char *name = names + sym[i].st_name;
            uintptr_t at = r.bias + sym[i].st_value;
            void *to = dlsym(RTLD_DEFAULT, name);
            if (!to || ((uintptr_t)to >= r.lo && (uintptr_t)to < r.hi))
                continue; /* no such entry point here, or it is the program's own */
            found++;
            if (sym[i].st_size < JUMP_BYTES || at < r.lo || at + JUMP_BYTES > r.hi ||
                redirect(at, to) != 0) {
                skipped++;
                tdm__simcuda_log("static runtime: %s left as it is (%zu bytes)", name,
                                 (size_t)sym[i].st_size);
                continue;
            }
            done++;
        }
    }
out:
    munmap(map, fsize);
    if (found)
        tdm__simcuda_log("static runtime: %u of the program's %u runtime entry points go to the "
                         "simulated runtime", done, found);
    (void)skipped;
#endif
}

__attribute__((constructor)) static void static_runtime_init(void)
{
    redirect_static_runtime();
}
