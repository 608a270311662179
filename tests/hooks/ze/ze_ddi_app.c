/* tests/hooks/ze/ze_ddi_app.c: a Level Zero program that never calls the
 * loader's exported zeMem* functions.  Like the static-loader shim
 * (ze_loader.a) and some runtimes, it opens the loader, asks it for its
 * Mem and VirtualMem/PhysicalMem DDI tables and calls their slots, so
 * only the shim driver (libtidemark_ze_shim.so) can see its memory.
 *
 *   ze_ddi_app [pattern|cache]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <stdio.h>
#include <string.h>

#include "fake_ze.h"

#define NOINLINE __attribute__((noinline, used))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

void ddi_alloc_device(void);
void ddi_alloc_host(void);
void ddi_map(void);
void ddi_release(void);
void ddi_small_blocks(void);

static ze_mem_dditable_t mem;
static ze_virtual_mem_dditable_t vmem;
static ze_physical_mem_dditable_t pmem;
static ze_context_handle_t ctx;
static ze_device_handle_t dev;
static void *d, *h, *va;
static ze_physical_mem_handle_t phys;
static const ze_device_mem_alloc_desc_t dd = {.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC};
static const ze_host_mem_alloc_desc_t hd = {.stype = ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC};

static void say(const char *what, ze_result_t r)
{
    printf("%s -> 0x%x\n", what, (unsigned)r);
}

NOINLINE void ddi_alloc_device(void)
{
    say("pfnAllocDevice(777)", mem.pfnAllocDevice(ctx, &dd, 777, 0, dev, &d));
    KEEP_FRAME();
}

NOINLINE void ddi_alloc_host(void)
{
    say("pfnAllocHost(4096)", mem.pfnAllocHost(ctx, &hd, 4096, 0, &h));
    KEEP_FRAME();
}

NOINLINE void ddi_map(void)
{
    say("pfnReserve(2 MiB)", vmem.pfnReserve(ctx, NULL, 2 << 20, &va));
    ze_physical_mem_desc_t pd = {.stype = ZE_STRUCTURE_TYPE_PHYSICAL_MEM_DESC, .size = 1 << 20};
    say("pfnCreate(1 MiB)", pmem.pfnCreate(ctx, dev, &pd, &phys));
    say("pfnMap(1 MiB)", vmem.pfnMap(ctx, va, 1 << 20, phys, 0, ZE_MEMORY_ACCESS_ATTRIBUTE_READWRITE));
    say("pfnUnmap(1 MiB)", vmem.pfnUnmap(ctx, va, 1 << 20));
    say("pfnDestroy", pmem.pfnDestroy(ctx, phys));
    say("pfnFree(va)", vmem.pfnFree(ctx, va, 2 << 20));
    KEEP_FRAME();
}

NOINLINE void ddi_release(void)
{
    say("pfnFree(d)", mem.pfnFree(ctx, d));
    say("pfnFree(h)", mem.pfnFree(ctx, h));
    KEEP_FRAME();
}

NOINLINE void ddi_small_blocks(void)
{
    void *b[50];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 50; i++)
            if (mem.pfnAllocDevice(ctx, &dd, 512 + (size_t)i, 0, dev, &b[i]) != ZE_RESULT_SUCCESS)
                printf("small allocation failed\n");
        for (int i = 0; i < 50; i++)
            if (mem.pfnFree(ctx, b[i]) != ZE_RESULT_SUCCESS)
                printf("small free failed\n");
    }
    printf("app allocations: 200\n");
    KEEP_FRAME();
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "pattern";
    void *loader = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
    if (loader == NULL) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    ze_pfnInit_t init = (ze_pfnInit_t)dlsym(loader, "zeInit");
    ze_pfnDriverGet_t driver_get = (ze_pfnDriverGet_t)dlsym(loader, "zeDriverGet");
    ze_pfnDeviceGet_t device_get = (ze_pfnDeviceGet_t)dlsym(loader, "zeDeviceGet");
    ze_pfnContextCreate_t context_create = (ze_pfnContextCreate_t)dlsym(loader, "zeContextCreate");
    ze_pfnGetMemProcAddrTable_t get_mem =
        (ze_pfnGetMemProcAddrTable_t)dlsym(loader, "zeGetMemProcAddrTable");
    ze_pfnGetVirtualMemProcAddrTable_t get_vmem =
        (ze_pfnGetVirtualMemProcAddrTable_t)dlsym(loader, "zeGetVirtualMemProcAddrTable");
    ze_pfnGetPhysicalMemProcAddrTable_t get_pmem =
        (ze_pfnGetPhysicalMemProcAddrTable_t)dlsym(loader, "zeGetPhysicalMemProcAddrTable");
    ze_result_t r = init(0);
    say("zeInit", r);
    if (r != ZE_RESULT_SUCCESS)
        return 1;
    say("zeGetMemProcAddrTable", get_mem(ZE_API_VERSION_CURRENT, &mem));
    say("zeGetVirtualMemProcAddrTable", get_vmem(ZE_API_VERSION_CURRENT, &vmem));
    say("zeGetPhysicalMemProcAddrTable", get_pmem(ZE_API_VERSION_CURRENT, &pmem));
    uint32_t n = 1;
    ze_driver_handle_t drv;
    say("zeDriverGet", driver_get(&n, &drv));
    n = 1;
    say("zeDeviceGet", device_get(drv, &n, &dev));
    ze_context_desc_t cd = {.stype = ZE_STRUCTURE_TYPE_CONTEXT_DESC};
    say("zeContextCreate", context_create(drv, &cd, &ctx));
    if (strcmp(what, "cache") == 0) {
        ddi_small_blocks();
    } else {
        ddi_alloc_device();
        ddi_alloc_host();
        ddi_map();
        ddi_release();
    }
    void *fake = dlopen("libfake_ze_driver.so", RTLD_LAZY | RTLD_NOLOAD);
    if (fake) {
        fake_ze_calls_fn calls = (fake_ze_calls_fn)dlsym(fake, "fake_ze_calls");
        fake_ze_live_allocations_fn live =
            (fake_ze_live_allocations_fn)dlsym(fake, "fake_ze_live_allocations");
        if (calls && live)
            fprintf(stderr, "fake: zeMemAllocDevice=%ld zeMemFree=%ld live=%ld\n",
                    calls("zeMemAllocDevice"), calls("zeMemFree"), live());
        dlclose(fake);
    }
    return 0;
}
