/* tests/hooks/ze/ze_app.c: an ordinary Level Zero program for the hook
 * tests.  It links the real loader (libze_loader.so.1) and knows nothing of
 * tidemark; the tests run it with ZE_ENABLE_ALT_DRIVERS pointing at the
 * fake driver (or at the shim driver), with and without the preload.
 * Every allocation is made in a function of its own (the tests check that
 * stacks start there) and every return code is printed (they must not
 * change under tidemark).
 *
 *   ze_app pattern   one call of every hooked kind, then frees them all
 *   ze_app errors    calls that fail: codes unchanged
 *   ze_app oom       runs the device out of memory (FAKE_ZE_CAPACITY)
 *   ze_app cache     many small device allocations and frees
 *   ze_app threads   4 threads allocating and freeing at once
 *   ze_app expand    10 small blocks of 1 MiB freed, then 60 MiB (of a
 *                    64 MiB device: expandable segments must give back the
 *                    small pool's pages)
 *   ze_app nodriver  what a program does first when no driver is there
 *   ze_app policies  zeMemFreeExt's free policies on memory a command in
 *                    flight on the program's command queue still uses
 *                    (the fake driver's fake_ze_queue_use): does
 *                    BLOCKING_FREE return with those commands complete, is
 *                    memory the device still uses ever handed out again?
 *   ze_app policies_unseen  the same with the commands on a queue the
 *                    program made where tidemark cannot see it
 *                    (fake_ze_device_use)
 *
 * With the fake driver it also prints the fake's counters on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <level_zero/ze_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fake_ze.h"

#define NOINLINE __attribute__((noinline, used))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* Not static: the names must stay as written in the symbol table. */
void alloc_device_buffer(void);
void alloc_shared_buffer(void);
void alloc_shared_hostside(void);
void alloc_host_buffer(void);
void map_virtual(void);
void unmap_virtual(void);
void release_everything(void);
void alloc_survivor(void);
void alloc_too_much(void);
void create_too_much(void);
void alloc_small_blocks(void **blocks);
void free_small_blocks(void **blocks);

static ze_context_handle_t ctx;
static ze_device_handle_t dev;
static const ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
static const ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};

static void say(const char *what, ze_result_t r)
{
    printf("%s -> 0x%x\n", what, (unsigned)r);
}

static int setup(void)
{
    ze_result_t r = zeInit(0);
    say("zeInit", r);
    if (r != ZE_RESULT_SUCCESS)
        return -1;
    ze_driver_handle_t drv;
    uint32_t n = 1;
    say("zeDriverGet", zeDriverGet(&n, &drv));
    n = 1;
    say("zeDeviceGet", zeDeviceGet(drv, &n, &dev));
    ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    say("zeContextCreate", zeContextCreate(drv, &cd, &ctx));
    return 0;
}

/* ---- pattern --------------------------------------------------------------- */

static void *d, *s, *sh, *h, *va;
static ze_physical_mem_handle_t phys;

NOINLINE void alloc_device_buffer(void)
{
    say("zeMemAllocDevice(1000000)", zeMemAllocDevice(ctx, &dd, 1000000, 0, dev, &d));
    KEEP_FRAME();
}

NOINLINE void alloc_shared_buffer(void)
{
    say("zeMemAllocShared(65536, dev)", zeMemAllocShared(ctx, &dd, &hd, 65536, 64, dev, &s));
    KEEP_FRAME();
}

NOINLINE void alloc_shared_hostside(void)
{
    say("zeMemAllocShared(4096, no dev)", zeMemAllocShared(ctx, &dd, &hd, 4096, 0, NULL, &sh));
    KEEP_FRAME();
}

NOINLINE void alloc_host_buffer(void)
{
    say("zeMemAllocHost(512)", zeMemAllocHost(ctx, &hd, 512, 0, &h));
    KEEP_FRAME();
}

NOINLINE void map_virtual(void)
{
    size_t page = 0;
    say("zeVirtualMemQueryPageSize", zeVirtualMemQueryPageSize(ctx, dev, 2 << 20, &page));
    say("zeVirtualMemReserve(4 MiB)", zeVirtualMemReserve(ctx, NULL, 4 << 20, &va));
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = 2 << 20};
    say("zePhysicalMemCreate(2 MiB)", zePhysicalMemCreate(ctx, dev, &pd, &phys));
    say("zeVirtualMemMap(2 MiB)",
        zeVirtualMemMap(ctx, va, 2 << 20, phys, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE));
    KEEP_FRAME();
}

NOINLINE void unmap_virtual(void)
{
    say("zeVirtualMemUnmap(2 MiB)", zeVirtualMemUnmap(ctx, va, 2 << 20));
    say("zePhysicalMemDestroy", zePhysicalMemDestroy(ctx, phys));
    say("zeVirtualMemFree", zeVirtualMemFree(ctx, va, 4 << 20));
    KEEP_FRAME();
}

NOINLINE void release_everything(void)
{
    ze_memory_free_ext_desc_t fd = {.stype = ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC,
                                    .freePolicy = ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE};
    say("zeMemFree(d)", zeMemFree(ctx, d));
    say("zeMemFreeExt(s)", zeMemFreeExt(ctx, &fd, s));
    say("zeMemFree(sh)", zeMemFree(ctx, sh));
    say("zeMemFree(h)", zeMemFree(ctx, h));
    KEEP_FRAME();
}

static void pattern(void)
{
    alloc_device_buffer();
    alloc_shared_buffer();
    alloc_shared_hostside();
    alloc_host_buffer();
    map_virtual();
    unmap_virtual();
    release_everything();
}

/* ---- errors ------------------------------------------------------------------ */

NOINLINE void alloc_survivor(void)
{
    say("zeMemAllocDevice(2048)", zeMemAllocDevice(ctx, &dd, 2048, 0, dev, &d));
    KEEP_FRAME();
}

static void errors(void)
{
    int bogus;
    void *p = NULL;
    say("zeMemAllocDevice(size 0)", zeMemAllocDevice(ctx, &dd, 0, 0, dev, &p));
    say("zeMemAllocDevice(align 3)", zeMemAllocDevice(ctx, &dd, 64, 3, dev, &p));
    say("zeMemAllocDevice(NULL pptr)", zeMemAllocDevice(ctx, &dd, 64, 0, dev, NULL));
    say("zeMemFree(bogus)", zeMemFree(ctx, &bogus));
    say("zeMemFree(NULL)", zeMemFree(ctx, NULL));
    say("zeMemFreeExt(NULL desc)", zeMemFreeExt(ctx, NULL, &bogus));
    /* Freed twice, and a pointer into a live block: the driver's own
     * error, also when tidemark's cache made the memory. */
    void *twice = NULL, *live = NULL;
    say("zeMemAllocDevice(1 MiB)", zeMemAllocDevice(ctx, &dd, 1 << 20, 0, dev, &twice));
    say("zeMemAllocDevice(4096)", zeMemAllocDevice(ctx, &dd, 4096, 0, dev, &live));
    say("zeMemFree(1 MiB)", zeMemFree(ctx, twice));
    say("zeMemFree(1 MiB) again", zeMemFree(ctx, twice));
    say("zeMemFree(inside a block)", zeMemFree(ctx, (char *)live + 256));
    say("zeMemFree(4096)", zeMemFree(ctx, live));
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = 1000};
    ze_physical_mem_handle_t ph;
    say("zePhysicalMemCreate(unaligned)", zePhysicalMemCreate(ctx, dev, &pd, &ph));
    say("zeVirtualMemUnmap(bogus size)", zeVirtualMemUnmap(ctx, &bogus, 3));
    /* Injected with FAKE_ZE_FAIL by the test: */
    say("zeMemAllocHost(injected)", zeMemAllocHost(ctx, &hd, 4096, 0, &p));
    say("zeMemAllocShared(injected)", zeMemAllocShared(ctx, &dd, &hd, 4096, 0, dev, &p));
    alloc_survivor();
    say("zeMemFree(survivor)", zeMemFree(ctx, d));
}

/* ---- out of memory --------------------------------------------------------------- */

NOINLINE void alloc_too_much(void)
{
    void *p = NULL;
    say("zeMemAllocDevice(10 MiB) again", zeMemAllocDevice(ctx, &dd, 10 << 20, 0, dev, &p));
    KEEP_FRAME();
}

NOINLINE void create_too_much(void)
{
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = 32 << 20};
    ze_physical_mem_handle_t ph;
    say("zePhysicalMemCreate(32 MiB)", zePhysicalMemCreate(ctx, dev, &pd, &ph));
    KEEP_FRAME();
}

static void oom(void)
{
    say("zeMemAllocDevice(10 MiB)", zeMemAllocDevice(ctx, &dd, 10 << 20, 0, dev, &d));
    alloc_too_much();
    create_too_much();
    say("zeMemFree(10 MiB)", zeMemFree(ctx, d));
}

/* ---- cache ------------------------------------------------------------------------ */

#define ROUNDS 4
#define PER_ROUND 50

NOINLINE void alloc_small_blocks(void **blocks)
{
    for (int i = 0; i < PER_ROUND; i++) {
        ze_result_t r = zeMemAllocDevice(ctx, &dd, 1000 + 8 * (size_t)i, 0, dev, &blocks[i]);
        if (r != ZE_RESULT_SUCCESS)
            say("small allocation", r);
    }
    KEEP_FRAME();
}

NOINLINE void free_small_blocks(void **blocks)
{
    for (int i = 0; i < PER_ROUND; i++) {
        ze_result_t r = zeMemFree(ctx, blocks[i]);
        if (r != ZE_RESULT_SUCCESS)
            say("small free", r);
    }
    KEEP_FRAME();
}

static void cache(void)
{
    void *blocks[PER_ROUND];
    for (int round = 0; round < ROUNDS; round++) {
        alloc_small_blocks(blocks);
        free_small_blocks(blocks);
    }
    printf("app allocations: %d\n", ROUNDS * PER_ROUND);
}

/* ---- threads ---------------------------------------------------------------------------- */

#define THREADS 4
#define PER_THREAD 500

static void *thread_body(void *arg)
{
    (void)arg;
    long failures = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        void *p = NULL;
        failures += zeMemAllocDevice(ctx, &dd, 256 + (size_t)i, 0, dev, &p) != ZE_RESULT_SUCCESS;
        failures += zeMemFree(ctx, p) != ZE_RESULT_SUCCESS;
    }
    return (void *)failures;
}

static void threads(void)
{
    pthread_t t[THREADS];
    long failures = 0;
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, thread_body, NULL);
    for (int i = 0; i < THREADS; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (long)f;
    }
    printf("thread failures: %ld\n", failures);
}

/* ---- expand ------------------------------------------------------------------------------ */

#define SMALL_BLOCKS 10

static void expand(void)
{
    void *small[SMALL_BLOCKS], *big = NULL;
    for (int i = 0; i < SMALL_BLOCKS; i++)
        say("zeMemAllocDevice(1 MiB)", zeMemAllocDevice(ctx, &dd, 1 << 20, 0, dev, &small[i]));
    for (int i = 0; i < SMALL_BLOCKS; i++)
        say("zeMemFree(1 MiB)", zeMemFree(ctx, small[i]));
    say("zeMemAllocDevice(60 MiB)", zeMemAllocDevice(ctx, &dd, 60 << 20, 0, dev, &big));
    say("zeMemFree(60 MiB)", zeMemFree(ctx, big));
}

/* ---- free policies ------------------------------------------------------------------------ */

void alloc_policy_block(void **p);

NOINLINE void alloc_policy_block(void **p)
{
    say("zeMemAllocDevice(1 MiB)", zeMemAllocDevice(ctx, &dd, 1 << 20, 0, dev, p));
    KEEP_FRAME();
}

static void free_with(const char *what, ze_driver_memory_free_policy_ext_flags_t policy, void *p)
{
    ze_memory_free_ext_desc_t fd = {.stype = ZE_STRUCTURE_TYPE_MEMORY_FREE_EXT_DESC,
                                    .freePolicy = policy};
    say(what, zeMemFreeExt(ctx, &fd, p));
}

/* The loader's queue functions, looked up when called (the newer loader
 * of the driver_ddi test, which runs this program too, has none). */
typedef ze_result_t (*queue_create_fn)(ze_context_handle_t, ze_device_handle_t,
                                       const ze_command_queue_desc_t *,
                                       ze_command_queue_handle_t *);
typedef ze_result_t (*queue_destroy_fn)(ze_command_queue_handle_t);
typedef ze_result_t (*queue_sync_fn)(ze_command_queue_handle_t, uint64_t);

/* With a command queue the program made (through the loader, where
 * tidemark sees it): a command on it reads a block, the block is freed
 * with each policy, and the program goes on as the specification lets it:
 * after BLOCKING_FREE the commands that used the block are complete;
 * after DEFER_FREE they may still run, and the next allocation must not
 * get the block; the program then waits for its queue. */
static void policies(void)
{
    void *fake = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    fake_ze_queue_use_fn use = fake ? (fake_ze_queue_use_fn)dlsym(fake, "fake_ze_queue_use") : NULL;
    fake_ze_in_use_fn in_use = fake ? (fake_ze_in_use_fn)dlsym(fake, "fake_ze_in_use") : NULL;
    fake_ze_free_violations_fn violations =
        fake ? (fake_ze_free_violations_fn)dlsym(fake, "fake_ze_free_violations") : NULL;
    queue_create_fn create = (queue_create_fn)dlsym(RTLD_DEFAULT, "zeCommandQueueCreate");
    queue_destroy_fn destroy = (queue_destroy_fn)dlsym(RTLD_DEFAULT, "zeCommandQueueDestroy");
    queue_sync_fn sync = (queue_sync_fn)dlsym(RTLD_DEFAULT, "zeCommandQueueSynchronize");
    if (!use || !in_use || !violations || !create || !destroy || !sync) {
        printf("policies: not the fake driver\n");
        return;
    }
    ze_command_queue_desc_t qd = {.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC};
    ze_command_queue_handle_t queue = NULL;
    say("zeCommandQueueCreate", create(ctx, dev, &qd, &queue));
    static const struct {
        const char *name;
        ze_driver_memory_free_policy_ext_flags_t policy;
    } order[] = {
        {"BLOCKING_FREE", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE},
        {"DEFER_FREE", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE},
        {"DEFER_FREE again", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE},
        {"BLOCKING_FREE | DEFER_FREE", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE |
                                           ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE},
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        void *p = NULL, *q = NULL;
        alloc_policy_block(&p);
        use(queue, p, 1 << 20); /* a kernel on the queue still reads it */
        free_with(order[i].name, order[i].policy, p);
        int blocking = (order[i].policy & ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE) != 0;
        if (blocking) /* "blocks until all commands using the memory are complete" */
            printf("%s: the commands that used it are complete: %s\n", order[i].name,
                   in_use(p, 1 << 20) ? "no" : "yes");
        alloc_policy_block(&q);
        printf("%s: the next block is memory the device still uses: %s\n", order[i].name,
               q && in_use(q, 1 << 20) ? "yes" : "no");
        say("zeCommandQueueSynchronize", sync(queue, UINT64_MAX));
        say("zeMemFree", zeMemFree(ctx, q));
    }
    say("zeCommandQueueDestroy", destroy(queue));
    /* Policy 0 is zeMemFree's contract: the program waited first. */
    void *p = NULL;
    alloc_policy_block(&p);
    free_with("no policy", 0, p);
    alloc_policy_block(&p);
    free_with("policy 4 (none such)", 4, p);
    free_with("no policy", 0, p);
    printf("frees of memory in use: %ld\n", violations());
    dlclose(fake);
}

/* The same with the commands on a queue no handle of the program names
 * (the fake's fake_ze_device_use: made where tidemark could not see it):
 * no block the device still uses is handed out again. */
static void policies_unseen(void)
{
    void *fake = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    fake_ze_device_use_fn use = fake ? (fake_ze_device_use_fn)dlsym(fake, "fake_ze_device_use") : NULL;
    fake_ze_device_finish_fn finish =
        fake ? (fake_ze_device_finish_fn)dlsym(fake, "fake_ze_device_finish") : NULL;
    fake_ze_in_use_fn in_use = fake ? (fake_ze_in_use_fn)dlsym(fake, "fake_ze_in_use") : NULL;
    fake_ze_free_violations_fn violations =
        fake ? (fake_ze_free_violations_fn)dlsym(fake, "fake_ze_free_violations") : NULL;
    if (!use || !finish || !in_use || !violations) {
        printf("policies: not the fake driver\n");
        return;
    }
    static const struct {
        const char *name;
        ze_driver_memory_free_policy_ext_flags_t policy;
    } order[] = {
        {"DEFER_FREE", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE},
        {"BLOCKING_FREE", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_BLOCKING_FREE},
        {"DEFER_FREE again", ZE_DRIVER_MEMORY_FREE_POLICY_EXT_FLAG_DEFER_FREE},
    };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        void *p = NULL, *q = NULL;
        alloc_policy_block(&p);
        use(p); /* a kernel still reads it */
        free_with(order[i].name, order[i].policy, p);
        alloc_policy_block(&q);
        printf("%s: the next block is memory the device still uses: %s\n", order[i].name,
               q && in_use(q, 1 << 20) ? "yes" : "no");
        finish();
        say("zeMemFree", zeMemFree(ctx, q));
    }
    printf("frees of memory in use: %ld\n", violations());
    dlclose(fake);
}

/* ---- no driver ---------------------------------------------------------------------------- */

static void nodriver(void)
{
    void *p = NULL;
    uint32_t n = 0;
    say("zeInit", zeInit(0));
    say("zeDriverGet", zeDriverGet(&n, NULL));
    printf("drivers = %u\n", n);
    say("zeMemAllocDevice", zeMemAllocDevice(NULL, &dd, 1024, 0, NULL, &p));
    say("zeMemAllocHost", zeMemAllocHost(NULL, &hd, 1024, 0, &p));
    say("zeMemFree", zeMemFree(NULL, p));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "pattern";
    if (strcmp(what, "nodriver") == 0) {
        nodriver();
        return 0;
    }
    if (setup() != 0)
        return 1;
    if (strcmp(what, "pattern") == 0)
        pattern();
    else if (strcmp(what, "errors") == 0)
        errors();
    else if (strcmp(what, "oom") == 0)
        oom();
    else if (strcmp(what, "cache") == 0)
        cache();
    else if (strcmp(what, "threads") == 0)
        threads();
    else if (strcmp(what, "expand") == 0)
        expand();
    else if (strcmp(what, "policies") == 0)
        policies();
    else if (strcmp(what, "policies_unseen") == 0)
        policies_unseen();
    else {
        fprintf(stderr, "ze_app: unknown scenario %s\n", what);
        return 2;
    }
    say("zeContextDestroy", zeContextDestroy(ctx));
    /* The loader opened the fake driver RTLD_LOCAL; find it by soname. */
    void *fake = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    if (fake) {
        fake_ze_calls_fn calls = (fake_ze_calls_fn)dlsym(fake, "fake_ze_calls");
        fake_ze_live_allocations_fn live =
            (fake_ze_live_allocations_fn)dlsym(fake, "fake_ze_live_allocations");
        if (calls && live)
            fprintf(stderr,
                    "fake: zeMemAllocDevice=%ld zeMemFree=%ld zePhysicalMemCreate=%ld "
                    "zeVirtualMemMap=%ld zeVirtualMemUnmap=%ld live=%ld\n",
                    calls("zeMemAllocDevice"), calls("zeMemFree"), calls("zePhysicalMemCreate"),
                    calls("zeVirtualMemMap"), calls("zeVirtualMemUnmap"), live());
        dlclose(fake);
    }
    return 0;
}
