/* tests/hooks/infra/torch_c.c: drives libtidemark.so the way PyTorch's
 * CUDAPluggableAllocator does -- dlopen() the library, look the entry
 * points up by name, call them with torch's argument types -- and checks
 * what they do.  No torch, no GPU: the sim device serves.
 *
 *   torch_c LIBTIDEMARK OUT.tdm
 *
 * torch_like_forward() allocates 3 tensors (one on stream 0x77), frees
 * one; the memory fraction caps the device; reset empties the cache;
 * record_stream makes a later free wait for the other stream.  Then a
 * snapshot goes to OUT.tdm for the shell test to read.  Exit status 0, or
 * 1 with a message. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tidemark.h"

#define NOINLINE __attribute__((noinline, noclone))

NOINLINE void *torch_like_forward(size_t n, void *stream);
NOINLINE void torch_like_release(void *p, size_t n, void *stream);

typedef void *(*alloc_fn)(size_t, int, void *);
typedef void (*free_fn)(void *, size_t, int, void *);

static struct {
    alloc_fn alloc;
    free_fn free;
    void (*init)(int);
    void (*reset)(void);
    void (*fraction)(double, int);
    void (*record_stream)(void *, void *);
    tdm_status (*record)(const tdm_history_options *);
    void (*options_init)(tdm_history_options *);
    tdm_status (*stats)(int, tdm_stats *);
    tdm_status (*dump)(const char *);
    tdm_status (*stream_sync)(tdm_stream);
} t;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("torch_c: %s\n", what);
        exit(1);
    }
}

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        printf("torch_c: %s not exported\n", name);
        exit(1);
    }
    return p;
}

static tdm_stats stats(void)
{
    tdm_stats s = {.size = sizeof s};
    check(t.stats(0, &s) == TDM_OK, "tdm_memory_stats");
    return s;
}

NOINLINE void *torch_like_forward(size_t n, void *stream)
{
    void *p = t.alloc(n, 0, stream);
    __asm__ volatile("" ::: "memory");
    return p;
}

NOINLINE void torch_like_release(void *p, size_t n, void *stream)
{
    t.free(p, n, 0, stream);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: torch_c LIBTIDEMARK OUT.tdm\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL); /* as ctypes.CDLL */
    check(h != NULL, dlerror());
    t.alloc = (alloc_fn)sym(h, "tdm_torch_alloc");
    t.free = (free_fn)sym(h, "tdm_torch_free");
    t.init = (void (*)(int))sym(h, "tdm_torch_init");
    t.reset = (void (*)(void))sym(h, "tdm_torch_reset");
    t.fraction = (void (*)(double, int))sym(h, "tdm_torch_memory_fraction");
    t.record_stream = (void (*)(void *, void *))sym(h, "tdm_torch_record_stream");
    t.record = (tdm_status(*)(const tdm_history_options *))sym(h, "tdm_record_memory_history");
    t.options_init = (void (*)(tdm_history_options *))sym(h, "tdm_history_options_init");
    t.stats = (tdm_status(*)(int, tdm_stats *))sym(h, "tdm_memory_stats");
    t.dump = (tdm_status(*)(const char *))sym(h, "tdm_dump_snapshot");
    t.stream_sync = (tdm_status(*)(tdm_stream))sym(h, "tdm_stream_synchronize");

    tdm_history_options o;
    t.options_init(&o);
    check(t.record(&o) == TDM_OK, "record");
    t.init(0); /* torch passes 0 at this point */

    void *s77 = (void *)(uintptr_t)0x77;
    void *a = torch_like_forward(1000, NULL);
    void *b = torch_like_forward(3 << 20, s77);
    void *c = torch_like_forward(512, NULL);
    check(a && b && c, "allocations");
    torch_like_release(c, 512, NULL);
    tdm_stats s = stats();
    check(s.allocation.current == 2, "two live allocations");
    check(s.requested_bytes.current == 1000 + (3 << 20), "requested bytes");

    /* An unknown pointer and NULL are ignored (torch cannot take errors). */
    torch_like_release((void *)(uintptr_t)0x1000, 1, NULL);
    torch_like_release(NULL, 0, NULL);

    /* The cap: 1/256 of the 16 GiB sim device is 64 MiB, of which 22 MiB
     * are held (a 2 MiB small-pool and a 20 MiB large-pool segment). */
    t.fraction(1.0 / 256, 0);
    check(torch_like_forward(64 << 20, NULL) == NULL, "past the fraction is NULL");
    void *d = torch_like_forward(8 << 20, NULL);
    check(d != NULL, "under the fraction");
    torch_like_release(d, 8 << 20, NULL);
    t.fraction(1.0, 0);
    check((d = torch_like_forward(64 << 20, NULL)) != NULL, "cap lifted");
    torch_like_release(d, 64 << 20, NULL);

    /* empty_cache: every unused segment goes back. */
    check(stats().reserved_bytes.current > stats().allocated_bytes.current,
          "the cache holds freed segments");
    t.reset();
    s = stats();
    check(s.reserved_bytes.current < (int64_t)(24 << 20), "reset emptied the cache");

    /* record_stream: the free of `a` waits for stream 0x99. */
    t.record_stream(a, (void *)(uintptr_t)0x99);
    torch_like_release(a, 1000, NULL);
    check(stats().active_bytes.current > stats().allocated_bytes.current,
          "a pending free stays active");
    check(t.stream_sync(0x99) == TDM_OK, "stream sync");
    check(stats().active_bytes.current == stats().allocated_bytes.current,
          "the free completed");
    (void)b; /* live at the dump */
    check(t.dump(argv[2]) == TDM_OK, "dump");
    printf("torch_c ok\n");
    return 0;
}
