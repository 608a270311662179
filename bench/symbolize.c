/* bench/symbolize.c: how long a dump takes to symbolize 10,000 distinct
 * return addresses in large C++ libraries.
 *
 * Generates, in a temporary folder, a C++ shared library of 20,000
 * functions (namespaces and class templates, so names are mangled; -g -O2)
 * whose every function returns a return address that lies in code
 * inlined into it, builds it with the system C++ compiler (g++, or $CXX),
 * loads it and collects 10,000 distinct return addresses.  Then times:
 *
 *   - the symbolizer: sorted symbol tables and per-unit function tables,
 *     from opening it (reading the process's modules) to the last frame;
 *   - the reference: libdwfl's linear symbol search and dwarf_getscopes,
 *     on a sample, scaled to 10,000, and checked to give the same frames;
 *   - when /usr/lib/x86_64-linux-gnu/libtorch_cpu.so is installed (Debian's
 *     python3-torch): 10,000 addresses sampled across its function symbols.
 *
 * Usage: symbolize [functions] [addresses] [reference sample].  Prints a
 * table; not a test.  Build with the default RelWithDebInfo.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolize.h"

#define LIBTORCH "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so"
#define UNITS 4

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Writes UNITS C++ files of nfuncs functions in all, and the table of
 * their addresses. */
static int write_sources(const char *dir, int nfuncs)
{
    for (int u = 0; u <= UNITS; u++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/unit%d.cpp", dir, u);
        FILE *f = fopen(path, "w");
        if (!f)
            return -1;
        fprintf(f, "extern \"C\" void *tdm_bench_ret(long x);\n"
                   "namespace tdm_bench {\n"
                   "template <typename T> static inline __attribute__((always_inline))\n"
                   "void *through(T x) { return tdm_bench_ret((long)x + 1); }\n");
        int lo = u * nfuncs / UNITS, hi = (u + 1) * nfuncs / UNITS;
        if (u == UNITS) { /* the table, and the one out-of-line callee */
            fprintf(f, "}\nextern \"C\" __attribute__((noinline)) void *tdm_bench_ret(long x)\n"
                       "{ __asm__ volatile(\"\" :: \"r\"(x)); return __builtin_return_address(0); }\n");
            for (int i = 0; i < nfuncs; i++)
                fprintf(f, "namespace tdm_bench { namespace ns%d { template <typename T> struct "
                           "Layer%d { static void *forward(T x); }; } }\n", i % 97, i);
            fprintf(f, "extern \"C\" void *(*const tdm_bench_fns[])(int) = {\n");
            for (int i = 0; i < nfuncs; i++)
                fprintf(f, "  &tdm_bench::ns%d::Layer%d<int>::forward,\n", i % 97, i);
            fprintf(f, "};\n");
            fclose(f);
            break;
        }
        for (int i = lo; i < hi; i++)
            fprintf(f, "namespace ns%d { template <typename T> struct Layer%d {\n"
                       "  __attribute__((noinline)) static void *forward(T x)\n"
                       "  { void *r = through(x * %d); __asm__ volatile(\"\" ::: \"memory\"); "
                       "return r; } };\n"
                       "template struct Layer%d<int>; }\n",
                    i % 97, i, i + 3, i);
        fprintf(f, "}\n");
        fclose(f);
    }
    return 0;
}

static void *build_library(const char *dir, int nfuncs)
{
    if (write_sources(dir, nfuncs) != 0)
        return NULL;
    const char *cxx = getenv("CXX") && *getenv("CXX") ? getenv("CXX") : "g++";
    char cmd[16384];
    int n = snprintf(cmd, sizeof cmd, "cd '%s' && %s -shared -fPIC -g -O2 -o libbench.so",
                     dir, cxx);
    for (int u = 0; u <= UNITS; u++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " unit%d.cpp", u);
    double t0 = now_ms();
    if (system(cmd) != 0) {
        fprintf(stderr, "symbolize: '%s' failed\n", cmd);
        return NULL;
    }
    printf("generated library: %d functions, built in %.1f s\n", nfuncs, (now_ms() - t0) / 1e3);
    char path[4200];
    snprintf(path, sizeof path, "%s/libbench.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "symbolize: %s\n", dlerror());
    return h;
}

typedef struct timing {
    double ms;       /* open + every address */
    size_t frames;   /* frames given (inline chains count) */
    size_t unknown;  /* addresses without a function name */
} timing;

static timing run(const uintptr_t *pcs, size_t n, int reference, tdm_symbolizer **keep)
{
    timing t = {0};
    double t0 = now_ms();
    tdm_symbolizer *s;
    *keep = NULL;
    if (tdm__symbolizer_open(&s) != TDM_OK)
        return t;
    tdm__symbolizer_use_reference(s, reference);
    for (size_t i = 0; i < n; i++) {
        const tdm_symbol *f;
        size_t k = tdm__symbolize_frames(s, pcs[i], &f);
        t.frames += k;
        t.unknown += strcmp(f[k - 1].function, "??") == 0;
    }
    t.ms = now_ms() - t0;
    *keep = s;
    return t;
}

/* Compares the frames of `a` and `b` for every pc: how many native
 * function names differ, and how many inline chains (frames, names or
 * lines) differ. */
static void differences(tdm_symbolizer *a, tdm_symbolizer *b, const uintptr_t *pcs, size_t n,
                        size_t *names, size_t *chains)
{
    *names = *chains = 0;
    for (size_t i = 0; i < n; i++) {
        const tdm_symbol *x, *y;
        size_t nx = tdm__symbolize_frames(a, pcs[i], &x);
        size_t ny = tdm__symbolize_frames(b, pcs[i], &y);
        if (strcmp(x[nx - 1].function, y[ny - 1].function) != 0 && (*names)++ < 3)
            fprintf(stderr, "  function differs at %#lx: %s / %s\n", (unsigned long)pcs[i],
                    x[nx - 1].function, y[ny - 1].function);
        int same = nx == ny;
        for (size_t k = 0; same && k < nx; k++)
            same = strcmp(x[k].function, y[k].function) == 0 &&
                   strcmp(x[k].file, y[k].file) == 0 && x[k].line == y[k].line &&
                   x[k].kind == y[k].kind;
        *chains += !same;
    }
}

static void row(const char *what, size_t n, const timing *t, size_t scaled_to)
{
    double per = t->ms / (double)n;
    printf("%-44s %7zu %10.1f %10.1f %9.4f %7zu %7zu\n", what, n, t->ms,
           per * (double)scaled_to, per, t->frames, t->unknown);
}

static void compare(const char *name, const uintptr_t *pcs, size_t n, size_t sample)
{
    tdm_symbolizer *fast, *ref;
    timing tf = run(pcs, n, 0, &fast);
    if (!fast)
        return;
    char what[128];
    snprintf(what, sizeof what, "%s: sorted tables", name);
    row(what, n, &tf, 10000);
    if (sample > n)
        sample = n;
    /* Every (n / sample)-th address: spread over the whole library. */
    uintptr_t *some = calloc(sample, sizeof *some);
    if (!some)
        return;
    for (size_t i = 0; i < sample; i++)
        some[i] = pcs[i * (n / sample)];
    timing tr = run(some, sample, 1, &ref);
    snprintf(what, sizeof what, "%s: libdwfl search (reference)", name);
    row(what, sample, &tr, 10000);
    size_t names = sample, chains = sample;
    if (ref)
        differences(fast, ref, some, sample, &names, &chains);
    printf("%-44s of %zu: %zu function names and %zu inline chains differ\n", "", sample, names,
           chains);
    tdm__symbolizer_close(fast);
    tdm__symbolizer_close(ref);
    free(some);
}

/* ---- libtorch ---------------------------------------------------------------- */

static int base_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t *base = data;
    if (info->dlpi_name && strstr(info->dlpi_name, "libtorch_cpu.so")) {
        *base = info->dlpi_addr;
        return 1;
    }
    return 0;
}

/* n addresses inside functions spread evenly over libtorch_cpu.so's
 * function symbols (each in the middle of its function). */
static size_t libtorch_addresses(const char *path, uintptr_t *pcs, size_t n)
{
    uintptr_t base = 0;
    dl_iterate_phdr(base_cb, &base);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || !base || elf_version(EV_CURRENT) == EV_NONE)
        return 0;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    size_t nfunc = 0, got = 0;
    for (int pass = 0; pass < 2 && elf; pass++) {
        size_t seen = 0;
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(elf, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
            for (size_t i = 0; d && i < count && got < n; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                    sym.st_shndx == SHN_UNDEF || sym.st_size < 4)
                    continue;
                if (pass == 1 && seen % (nfunc / n ? nfunc / n : 1) == 0)
                    pcs[got++] = base + sym.st_value + sym.st_size / 2 + 1;
                seen++;
            }
        }
        if (pass == 0)
            nfunc = seen;
    }
    if (elf)
        elf_end(elf);
    close(fd);
    printf("libtorch_cpu.so: %zu function symbols in .dynsym, %zu sampled\n", nfunc, got);
    return got;
}

int main(int argc, char **argv)
{
    int nfuncs = argc > 1 ? atoi(argv[1]) : 20000;
    size_t naddr = argc > 2 ? (size_t)atol(argv[2]) : 10000;
    size_t sample = argc > 3 ? (size_t)atol(argv[3]) : 500;
    if (nfuncs < 1 || naddr < 1 || (size_t)nfuncs < naddr || sample < 1) {
        fprintf(stderr, "usage: symbolize [functions >= addresses] [addresses] [sample]\n");
        return 2;
    }
    char dir[] = "/tmp/tdm-bench-symbolize-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    void *lib = build_library(dir, nfuncs);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!lib) {
        if (system(cmd) != 0)
            fprintf(stderr, "symbolize: could not remove %s\n", dir);
        return 1;
    }
    void *(*const *fns)(int) = dlsym(lib, "tdm_bench_fns");
    uintptr_t *pcs = calloc(naddr, sizeof *pcs);
    /* Every (nfuncs / naddr)-th function: distinct return addresses. */
    for (size_t i = 0; i < naddr; i++)
        pcs[i] = (uintptr_t)fns[i * ((size_t)nfuncs / naddr)]((int)i);

    printf("\n%-44s %7s %10s %10s %9s %7s %7s\n", "addresses symbolized", "count", "ms",
           "ms/10k", "ms/addr", "frames", "unknown");
    compare("generated C++ library", pcs, naddr, sample);
    /* python3-torch installs the versioned name only. */
    const char *torch_path = access(LIBTORCH, R_OK) == 0 ? LIBTORCH
                           : access(LIBTORCH ".1.13", R_OK) == 0 ? LIBTORCH ".1.13"
                                                                 : NULL;
    void *torch = torch_path ? dlopen(torch_path, RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (torch) {
        size_t nt = libtorch_addresses(torch_path, pcs, naddr);
        if (nt)
            compare("libtorch_cpu.so", pcs, nt, sample);
    } else {
        printf("%s: %s\n", LIBTORCH, torch_path ? dlerror() : "not installed");
    }
    free(pcs);
    if (system(cmd) != 0)
        fprintf(stderr, "symbolize: could not remove %s\n", dir);
    return 0;
}
