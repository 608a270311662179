/* tests/fakes/cuda/fake_cuda_gpa.c: the fake driver's cuGetProcAddress
 * (and cuGetProcAddress_v2), and FAKE_CUDA_PROBE_TABLE.
 *
 * The lookup picks the variant as the real driver does: among the entries
 * of the base name, the newest whose first version the caller's version
 * reaches, and its _ptsz twin when the flags ask for per-thread default
 * stream semantics.  It returns the internal function, as a real driver
 * returns its internal entry points, or with FAKE_CUDA_GPA_EXPORTED=1 the
 * exported (interposable) symbol, which is what drives a hook into calling
 * itself unless it guards against it.  With FAKE_CUDA_PROBE_TABLE=1 it
 * also remembers where each memory function went (the caller's table
 * slot), so that cuInit can call through those slots later.
 *
 * Invariants: the table is constant; slots are appended under an atomic
 * counter and only read by the probe, which runs once.
 */
#define _GNU_SOURCE
#include "fake_cuda_internal.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* ---- cuGetProcAddress ----------------------------------------------------- */

typedef struct gpa_entry {
    const char *base;
    int version;   /* first version this variant answers */
    int ptsz;
    void *impl;    /* the internal entry point */
    void *exported; /* the exported symbol (interposable) */
} gpa_entry;

#define FC_DECL_EXPORT(name, pfn, base, ver, pt, al) extern __typeof__(f_##name) name;
FAKE_FUNCS(FC_DECL_EXPORT)
#undef FC_DECL_EXPORT

static const gpa_entry g_gpa[] = {
#define FC_GPA(name, pfn, base, ver, pt, al) {base, ver, pt, (void *)f_##name, (void *)name},
    FAKE_FUNCS(FC_GPA)
#undef FC_GPA
};

/* The slots of a caller's function table that cuGetProcAddress filled, for
 * FAKE_CUDA_PROBE_TABLE (only slots in a module's static storage). */
typedef struct slot_rec {
    const char *base;
    int version;
    int ptsz;
    void **slot;
} slot_rec;
static slot_rec g_slots[32];
static atomic_int g_nslots;

static void remember_slot(const char *base, int version, int ptsz, void **pfn)
{
    Dl_info info;
    if (!fake__cfg.probe_table || strncmp(base, "cuMem", 5) != 0 || !dladdr(pfn, &info))
        return;
    int i = atomic_fetch_add(&g_nslots, 1);
    if (i < (int)(sizeof g_slots / sizeof g_slots[0]))
        g_slots[i] = (slot_rec){base, version, ptsz, pfn};
    else
        atomic_fetch_sub(&g_nslots, 1);
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    if (symbol == NULL || pfn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                    !(flags & CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    const gpa_entry *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof g_gpa / sizeof g_gpa[0]; i++) {
        const gpa_entry *e = &g_gpa[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        known = 1;
        if (e->version > version)
            continue;
        /* Newest variant the caller's version allows; its _ptsz twin when
         * asked for per-thread default stream semantics. */
        if (best == NULL || e->version > best->version ||
            (e->version == best->version && e->ptsz == want_ptsz))
            best = e;
    }
    *pfn = best ? (fake__cfg.gpa_exported ? best->exported : best->impl) : NULL;
    if (status)
        *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                       : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                               : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (best)
        remember_slot(best->base, version, best->ptsz, pfn);
    return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult f_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                      cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    ENTER(FC_cuGetProcAddress_v2);
    return lookup(symbol, pfn, version, flags, st);
}

CUresult f_cuGetProcAddress(const char *symbol, void **pfn, int version,
                                   cuuint64_t flags)
{
    ENTER(FC_cuGetProcAddress);
    return lookup(symbol, pfn, version, flags, NULL);
}

/* ---- FAKE_CUDA_PROBE_TABLE --------------------------------------------------
 * Runs inside cuInit, after libcudart filled its table: calls each memory
 * slot it filled and reports which implementation of ours each reached and
 * which object the slot's function lives in (a hook library, or us). */

static int probe_counter_moved(const long before[FC_COUNT], char *out, size_t len)
{
    out[0] = 0;
    for (int i = 0; i < FC_COUNT; i++)
        if (atomic_load(&fake__calls[i]) != before[i] &&
            strncmp(fake__names[i], "cuMem", 5) == 0 &&
            strncmp(fake__names[i], "cuMemGetInfo", 12) != 0) {
            snprintf(out, len, "%s", fake__names[i]);
            return 1;
        }
    return 0;
}

static const slot_rec *find_slot(const char *base, int ptsz)
{
    int n = atomic_load(&g_nslots);
    for (int i = 0; i < n && i < (int)(sizeof g_slots / sizeof g_slots[0]); i++)
        if (strcmp(g_slots[i].base, base) == 0 && g_slots[i].ptsz == ptsz)
            return &g_slots[i];
    return NULL;
}

static void probe_pair(FILE *f, const char *alloc_base, const char *free_base, int ptsz,
                       size_t size, CUstream stream)
{
    const slot_rec *a = find_slot(alloc_base, ptsz), *fr = find_slot(free_base, ptsz);
    if (a == NULL || fr == NULL) {
        fprintf(f, "probe %s%s: no slot\n", alloc_base, ptsz ? " ptsz" : "");
        return;
    }
    long before[FC_COUNT];
    char hit[64], where[256];
    for (int i = 0; i < FC_COUNT; i++)
        before[i] = atomic_load(&fake__calls[i]);
    CUdeviceptr d = 0;
    CUresult r;
    if (strcmp(alloc_base, "cuMemAlloc") == 0)
        r = ((PFN_cuMemAlloc_v3020)*a->slot)(&d, size);
    else
        r = ((PFN_cuMemAllocAsync_v11020)*a->slot)(&d, size, stream);
    probe_counter_moved(before, hit, sizeof hit);
    Dl_info info;
    snprintf(where, sizeof where, "%s",
             dladdr(*a->slot, &info) && info.dli_fname ? info.dli_fname : "?");
    const char *base = strrchr(where, '/');
    fprintf(f, "probe %s v%d%s: slot in %s reached %s -> %d\n", alloc_base, a->version,
            ptsz ? " ptsz" : "", base ? base + 1 : where, hit, (int)r);
    for (int i = 0; i < FC_COUNT; i++)
        before[i] = atomic_load(&fake__calls[i]);
    if (strcmp(free_base, "cuMemFree") == 0)
        r = ((PFN_cuMemFree_v3020)*fr->slot)(d);
    else
        r = ((PFN_cuMemFreeAsync_v11020)*fr->slot)(d, stream);
    probe_counter_moved(before, hit, sizeof hit);
    snprintf(where, sizeof where, "%s",
             dladdr(*fr->slot, &info) && info.dli_fname ? info.dli_fname : "?");
    base = strrchr(where, '/');
    fprintf(f, "probe %s v%d%s: slot in %s reached %s -> %d\n", free_base, fr->version,
            ptsz ? " ptsz" : "", base ? base + 1 : where, hit, (int)r);
}

void fake__probe_table(void)
{
    static atomic_int done;
    if (atomic_exchange(&done, 1))
        return;
    FILE *f = fake__cfg.report ? fopen(fake__cfg.report, "a") : stderr;
    if (f == NULL)
        return;
    /* The memory calls need an initialized driver and a current context. */
    int was_init = fake__probe_begin();
    probe_pair(f, "cuMemAlloc", "cuMemFree", 0, 1111, NULL);
    probe_pair(f, "cuMemAllocAsync", "cuMemFreeAsync", 0, 2222, (CUstream)(uintptr_t)0x5000);
    probe_pair(f, "cuMemAllocAsync", "cuMemFreeAsync", 1, 3333, NULL);
    fake__probe_end(was_init);
    if (f != stderr)
        fclose(f);
}

FAKE_RESOLVERS(FC_ALIAS)
