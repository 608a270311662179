/* tests/fakes/ze/fake_ze_loader.c: a test double of a NEWER Level Zero
 * loader (libze_loader.so.1, 1.20 and later) than Debian ships, for what
 * the real 1.8 one cannot show: dispatch through the driver's own DDI
 * tables.  Put in front of the real loader with LD_LIBRARY_PATH (its own
 * folder, loader/).
 *
 * It does what the real loader does on the way to a driver (read in
 * oneapi-src/level-zero source/loader: ze_loader.cpp, ze_ldrddi.cpp,
 * ze_ldrddi_driver_ddi.cpp), for the calls tidemark's tests make:
 *   - drivers: the libraries in ZE_ENABLE_ALT_DRIVERS, dlopen'ed
 *     RTLD_LOCAL, their tables taken from their zeGet*ProcAddrTable
 *     getters, zeInit passed to each;
 *   - one driver, no ZE_ENABLE_LOADER_INTERCEPT=1: the driver's tables
 *     are the loader's (its exported functions and the tables handed to
 *     programs call the driver's slots, handles as the driver made them);
 *   - several drivers, or ZE_ENABLE_LOADER_INTERCEPT=1: "intercept".  A
 *     driver that reports the DDI handles extension (fake_ze_ddi.h) gives
 *     its handles out as they are, and every call on one goes through
 *     the tables the handle points to, unless
 *     ZE_ENABLE_LOADER_DRIVER_DDI_PATH=0; any other driver's handles are
 *     wrapped in loader objects whose calls unwrap them and go through the
 *     tables the getters handed out.
 * FAKE_ZE_LOADER_REPORT=1 prints at exit how many calls took each way.
 * Not modelled: Sysman, tools, layers, driver sorting, zeInitDrivers.
 *
 * Lock: the loader objects' list, under a mutex (the fake is for tests).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_ze_ddi.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DRIVERS 4
#define UNSUPPORTED ZE_RESULT_ERROR_UNSUPPORTED_FEATURE

typedef struct ldr_driver {
    void *lib;
    ze_global_dditable_t Global;
    ze_driver_dditable_t Driver;
    ze_device_dditable_t Device;
    ze_context_dditable_t Context;
    ze_mem_dditable_t Mem;
    ze_virtual_mem_dditable_t VirtualMem;
    ze_physical_mem_dditable_t PhysicalMem;
} ldr_driver;

static ldr_driver drivers[MAX_DRIVERS];
static int n_drivers;
static int intercept, ddi_path;
static ze_result_t init_result = ZE_RESULT_ERROR_UNINITIALIZED;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static ze_init_flags_t init_flags;
static atomic_long through_handles, through_tables;

/* ---- loader objects ------------------------------------------------------ */

typedef struct ldr_object {
    fake_ze_handle_head head; /* core -> unwrapping, the loader's own */
    void *real;
    int driver;
} ldr_object;

static fake_ze_core_dispatch loader_dispatch;
static ldr_object *objects[4096];
static int n_objects;
static pthread_mutex_t objects_mu = PTHREAD_MUTEX_INITIALIZER;

/* The loader object of `real` (the same one every time); NULL for NULL. */
static void *wrap(void *real, int driver)
{
    if (real == NULL)
        return NULL;
    ldr_object *o = NULL;
    pthread_mutex_lock(&objects_mu);
    for (int i = 0; i < n_objects && !o; i++)
        if (objects[i]->real == real)
            o = objects[i];
    if (!o && n_objects < 4096 && (o = calloc(1, sizeof *o))) {
        o->head.core = &loader_dispatch;
        o->real = real;
        o->driver = driver;
        objects[n_objects++] = o;
    }
    pthread_mutex_unlock(&objects_mu);
    return o;
}

#define REAL(h) ((h) ? ((ldr_object *)(h))->real : NULL)
#define DRV(h) (&drivers[((ldr_object *)(h))->driver])

/* ---- start-up -------------------------------------------------------------- */

static int env_on(const char *name, int dflt)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return dflt;
    return !(strcmp(s, "0") == 0 || strcmp(s, "false") == 0);
}

#define GET(d, name, field)                                                    \
    (get = dlsym((d)->lib, name)) != NULL &&                                   \
        ((ze_result_t(*)(ze_api_version_t, void *))get)(ZE_API_VERSION_CURRENT, &(d)->field) == \
            ZE_RESULT_SUCCESS

static int load_driver(ldr_driver *d, const char *path)
{
    void *get;
    d->lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    return d->lib && GET(d, "zeGetGlobalProcAddrTable", Global) &&
           GET(d, "zeGetDriverProcAddrTable", Driver) &&
           GET(d, "zeGetDeviceProcAddrTable", Device) &&
           GET(d, "zeGetContextProcAddrTable", Context) &&
           GET(d, "zeGetMemProcAddrTable", Mem) &&
           GET(d, "zeGetVirtualMemProcAddrTable", VirtualMem) &&
           GET(d, "zeGetPhysicalMemProcAddrTable", PhysicalMem) && d->Global.pfnInit &&
           d->Global.pfnInit(init_flags) == ZE_RESULT_SUCCESS;
}

static void fill_loader_dispatch(void);

static void start(void)
{
    const char *list = getenv("ZE_ENABLE_ALT_DRIVERS");
    char path[4096];
    while (list && *list && n_drivers < MAX_DRIVERS) {
        size_t len = strcspn(list, ",");
        if (len > 0 && len < sizeof path) {
            memcpy(path, list, len);
            path[len] = '\0';
            if (load_driver(&drivers[n_drivers], path))
                n_drivers++;
        }
        list += len + (list[len] == ',');
    }
    intercept = n_drivers > 1 || env_on("ZE_ENABLE_LOADER_INTERCEPT", 0);
    ddi_path = env_on("ZE_ENABLE_LOADER_DRIVER_DDI_PATH", 1);
    fill_loader_dispatch();
    init_result = n_drivers ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNINITIALIZED;
}

__attribute__((destructor)) static void report(void)
{
    if (env_on("FAKE_ZE_LOADER_REPORT", 0))
        fprintf(stderr, "fake loader: %ld calls through driver handles, %ld through tables\n",
                atomic_load(&through_handles), atomic_load(&through_tables));
}

EXPORT ze_result_t ZE_APICALL zeInit(ze_init_flags_t flags)
{
    init_flags = flags;
    pthread_once(&init_once, start);
    return init_result;
}

/* Does driver `i` give its handles out as they are? */
static int driver_handles(int i, ze_driver_handle_t h)
{
    if (!ddi_path || !drivers[i].Driver.pfnGetProperties)
        return 0;
    fake_ze_ddi_handles_props ext = {FAKE_ZE_STRUCTURE_TYPE_DDI_HANDLES_EXT_PROPERTIES, NULL, 0};
    ze_driver_properties_t props = {.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES, .pNext = &ext};
    return drivers[i].Driver.pfnGetProperties(h, &props) == ZE_RESULT_SUCCESS &&
           (ext.flags & FAKE_ZE_DDI_HANDLE_EXT_SUPPORTED);
}

EXPORT ze_result_t ZE_APICALL zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers)
{
    if (init_result != ZE_RESULT_SUCCESS)
        return init_result;
    if (!intercept)
        return drivers[0].Driver.pfnGet(pCount, phDrivers);
    uint32_t total = 0;
    for (int i = 0; i < n_drivers; i++) {
        uint32_t n = 0;
        if (drivers[i].Driver.pfnGet(&n, NULL) != ZE_RESULT_SUCCESS || n == 0)
            continue;
        if (phDrivers && *pCount > total) {
            n = n < *pCount - total ? n : *pCount - total;
            drivers[i].Driver.pfnGet(&n, phDrivers + total);
            for (uint32_t k = total; k < total + n; k++)
                if (!driver_handles(i, phDrivers[k]))
                    phDrivers[k] = wrap(phDrivers[k], i);
        }
        total += n;
    }
    *pCount = total;
    return ZE_RESULT_SUCCESS;
}

/* ---- the unwrapping functions (loader objects' dispatch) --------------------- */

#define UNWRAPPED(h, table, slot, ...)                                         \
    (DRV(h)->table.slot ? DRV(h)->table.slot(__VA_ARGS__) : UNSUPPORTED)

static ze_result_t ZE_APICALL u_device_get(ze_driver_handle_t h, uint32_t *n,
                                           ze_device_handle_t *ph)
{
    ze_result_t r = UNWRAPPED(h, Device, pfnGet, REAL(h), n, ph);
    for (uint32_t i = 0; r == ZE_RESULT_SUCCESS && ph && i < *n; i++)
        ph[i] = wrap(ph[i], ((ldr_object *)h)->driver);
    return r;
}
static ze_result_t ZE_APICALL u_device_props(ze_device_handle_t h, ze_device_properties_t *p)
{
    return UNWRAPPED(h, Device, pfnGetProperties, REAL(h), p);
}
static ze_result_t ZE_APICALL u_device_mem_props(ze_device_handle_t h, uint32_t *n,
                                                 ze_device_memory_properties_t *p)
{
    return UNWRAPPED(h, Device, pfnGetMemoryProperties, REAL(h), n, p);
}
static ze_result_t ZE_APICALL u_context_create(ze_driver_handle_t h, const ze_context_desc_t *d,
                                               ze_context_handle_t *ph)
{
    ze_result_t r = UNWRAPPED(h, Context, pfnCreate, REAL(h), d, ph);
    if (r == ZE_RESULT_SUCCESS)
        *ph = wrap(*ph, ((ldr_object *)h)->driver);
    return r;
}
static ze_result_t ZE_APICALL u_context_destroy(ze_context_handle_t h)
{
    return UNWRAPPED(h, Context, pfnDestroy, REAL(h));
}
static ze_result_t ZE_APICALL u_alloc_device(ze_context_handle_t c,
                                             const ze_device_mem_alloc_desc_t *dd, size_t size,
                                             size_t align, ze_device_handle_t dev, void **pp)
{
    return UNWRAPPED(c, Mem, pfnAllocDevice, REAL(c), dd, size, align, REAL(dev), pp);
}
static ze_result_t ZE_APICALL u_alloc_shared(ze_context_handle_t c,
                                             const ze_device_mem_alloc_desc_t *dd,
                                             const ze_host_mem_alloc_desc_t *hd, size_t size,
                                             size_t align, ze_device_handle_t dev, void **pp)
{
    return UNWRAPPED(c, Mem, pfnAllocShared, REAL(c), dd, hd, size, align, REAL(dev), pp);
}
static ze_result_t ZE_APICALL u_alloc_host(ze_context_handle_t c,
                                           const ze_host_mem_alloc_desc_t *hd, size_t size,
                                           size_t align, void **pp)
{
    return UNWRAPPED(c, Mem, pfnAllocHost, REAL(c), hd, size, align, pp);
}
static ze_result_t ZE_APICALL u_free(ze_context_handle_t c, void *p)
{
    return UNWRAPPED(c, Mem, pfnFree, REAL(c), p);
}
static ze_result_t ZE_APICALL u_free_ext(ze_context_handle_t c,
                                         const ze_memory_free_ext_desc_t *d, void *p)
{
    return UNWRAPPED(c, Mem, pfnFreeExt, REAL(c), d, p);
}
static ze_result_t ZE_APICALL u_reserve(ze_context_handle_t c, const void *start, size_t size,
                                        void **pp)
{
    return UNWRAPPED(c, VirtualMem, pfnReserve, REAL(c), start, size, pp);
}
static ze_result_t ZE_APICALL u_vfree(ze_context_handle_t c, const void *p, size_t size)
{
    return UNWRAPPED(c, VirtualMem, pfnFree, REAL(c), p, size);
}
static ze_result_t ZE_APICALL u_page_size(ze_context_handle_t c, ze_device_handle_t dev,
                                          size_t size, size_t *page)
{
    return UNWRAPPED(c, VirtualMem, pfnQueryPageSize, REAL(c), REAL(dev), size, page);
}
static ze_result_t ZE_APICALL u_map(ze_context_handle_t c, const void *p, size_t size,
                                    ze_physical_mem_handle_t ph, size_t off,
                                    ze_memory_access_attribute_t a)
{
    return UNWRAPPED(c, VirtualMem, pfnMap, REAL(c), p, size, REAL(ph), off, a);
}
static ze_result_t ZE_APICALL u_unmap(ze_context_handle_t c, const void *p, size_t size)
{
    return UNWRAPPED(c, VirtualMem, pfnUnmap, REAL(c), p, size);
}
static ze_result_t ZE_APICALL u_phys_create(ze_context_handle_t c, ze_device_handle_t dev,
                                            ze_physical_mem_desc_t *d,
                                            ze_physical_mem_handle_t *ph)
{
    ze_result_t r = UNWRAPPED(c, PhysicalMem, pfnCreate, REAL(c), REAL(dev), d, ph);
    if (r == ZE_RESULT_SUCCESS)
        *ph = wrap(*ph, ((ldr_object *)c)->driver);
    return r;
}
static ze_result_t ZE_APICALL u_phys_destroy(ze_context_handle_t c, ze_physical_mem_handle_t h)
{
    return UNWRAPPED(c, PhysicalMem, pfnDestroy, REAL(c), REAL(h));
}

static ze_device_dditable_t u_device = {.pfnGet = u_device_get,
                                        .pfnGetProperties = u_device_props,
                                        .pfnGetMemoryProperties = u_device_mem_props};
static ze_context_dditable_t u_context = {.pfnCreate = u_context_create,
                                          .pfnDestroy = u_context_destroy};
static ze_mem_dditable_t u_mem = {.pfnAllocShared = u_alloc_shared,
                                  .pfnAllocDevice = u_alloc_device,
                                  .pfnAllocHost = u_alloc_host,
                                  .pfnFree = u_free,
                                  .pfnFreeExt = u_free_ext};
static ze_virtual_mem_dditable_t u_virtual_mem = {.pfnReserve = u_reserve,
                                                  .pfnFree = u_vfree,
                                                  .pfnQueryPageSize = u_page_size,
                                                  .pfnMap = u_map,
                                                  .pfnUnmap = u_unmap};
static ze_physical_mem_dditable_t u_physical_mem = {.pfnCreate = u_phys_create,
                                                    .pfnDestroy = u_phys_destroy};

static void fill_loader_dispatch(void)
{
    loader_dispatch.version = ZE_API_VERSION_CURRENT;
    loader_dispatch.isValidFlag = 1;
    loader_dispatch.Device = &u_device;
    loader_dispatch.Context = &u_context;
    loader_dispatch.Mem = &u_mem;
    loader_dispatch.VirtualMem = &u_virtual_mem;
    loader_dispatch.PhysicalMem = &u_physical_mem;
}

/* ---- the exported functions ------------------------------------------------- */

/* One driver: its slot.  Intercept: through the handle's tables (the
 * driver's own, or the loader object's unwrapping ones), or, with the DDI
 * path off, straight to the unwrapping function. */
#define DISPATCH(h, table, slot, unwrapped, ...)                               \
    do {                                                                       \
        if (init_result != ZE_RESULT_SUCCESS)                                  \
            return init_result;                                                \
        if (!intercept) {                                                      \
            atomic_fetch_add(&through_tables, 1);                              \
            return drivers[0].table.slot ? drivers[0].table.slot(__VA_ARGS__) : UNSUPPORTED; \
        }                                                                      \
        if ((h) == NULL)                                                       \
            return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;                        \
        if (!ddi_path) {                                                       \
            atomic_fetch_add(&through_tables, 1);                              \
            return unwrapped(__VA_ARGS__);                                     \
        }                                                                      \
        fake_ze_core_dispatch *d_ = fake_ze_dispatch_of(h);                    \
        atomic_fetch_add(d_ == &loader_dispatch ? &through_tables : &through_handles, 1); \
        return d_->table && d_->table->slot ? d_->table->slot(__VA_ARGS__) : UNSUPPORTED; \
    } while (0)

#define API(ret) EXPORT ret ZE_APICALL

API(ze_result_t) zeDeviceGet(ze_driver_handle_t h, uint32_t *n, ze_device_handle_t *ph)
{
    DISPATCH(h, Device, pfnGet, u_device_get, h, n, ph);
}
API(ze_result_t) zeDeviceGetProperties(ze_device_handle_t h, ze_device_properties_t *p)
{
    DISPATCH(h, Device, pfnGetProperties, u_device_props, h, p);
}
API(ze_result_t) zeDeviceGetMemoryProperties(ze_device_handle_t h, uint32_t *n,
                                             ze_device_memory_properties_t *p)
{
    DISPATCH(h, Device, pfnGetMemoryProperties, u_device_mem_props, h, n, p);
}
API(ze_result_t) zeContextCreate(ze_driver_handle_t h, const ze_context_desc_t *d,
                                 ze_context_handle_t *ph)
{
    DISPATCH(h, Context, pfnCreate, u_context_create, h, d, ph);
}
API(ze_result_t) zeContextDestroy(ze_context_handle_t h)
{
    DISPATCH(h, Context, pfnDestroy, u_context_destroy, h);
}
API(ze_result_t) zeMemAllocDevice(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *dd,
                                  size_t size, size_t align, ze_device_handle_t dev, void **pp)
{
    DISPATCH(c, Mem, pfnAllocDevice, u_alloc_device, c, dd, size, align, dev, pp);
}
API(ze_result_t) zeMemAllocShared(ze_context_handle_t c, const ze_device_mem_alloc_desc_t *dd,
                                  const ze_host_mem_alloc_desc_t *hd, size_t size, size_t align,
                                  ze_device_handle_t dev, void **pp)
{
    DISPATCH(c, Mem, pfnAllocShared, u_alloc_shared, c, dd, hd, size, align, dev, pp);
}
API(ze_result_t) zeMemAllocHost(ze_context_handle_t c, const ze_host_mem_alloc_desc_t *hd,
                                size_t size, size_t align, void **pp)
{
    DISPATCH(c, Mem, pfnAllocHost, u_alloc_host, c, hd, size, align, pp);
}
API(ze_result_t) zeMemFree(ze_context_handle_t c, void *p)
{
    DISPATCH(c, Mem, pfnFree, u_free, c, p);
}
API(ze_result_t) zeMemFreeExt(ze_context_handle_t c, const ze_memory_free_ext_desc_t *d, void *p)
{
    DISPATCH(c, Mem, pfnFreeExt, u_free_ext, c, d, p);
}
API(ze_result_t) zeVirtualMemReserve(ze_context_handle_t c, const void *start, size_t size,
                                     void **pp)
{
    DISPATCH(c, VirtualMem, pfnReserve, u_reserve, c, start, size, pp);
}
API(ze_result_t) zeVirtualMemFree(ze_context_handle_t c, const void *p, size_t size)
{
    DISPATCH(c, VirtualMem, pfnFree, u_vfree, c, p, size);
}
API(ze_result_t) zeVirtualMemQueryPageSize(ze_context_handle_t c, ze_device_handle_t dev,
                                           size_t size, size_t *page)
{
    DISPATCH(c, VirtualMem, pfnQueryPageSize, u_page_size, c, dev, size, page);
}
API(ze_result_t) zeVirtualMemMap(ze_context_handle_t c, const void *p, size_t size,
                                 ze_physical_mem_handle_t ph, size_t off,
                                 ze_memory_access_attribute_t a)
{
    DISPATCH(c, VirtualMem, pfnMap, u_map, c, p, size, ph, off, a);
}
API(ze_result_t) zeVirtualMemUnmap(ze_context_handle_t c, const void *p, size_t size)
{
    DISPATCH(c, VirtualMem, pfnUnmap, u_unmap, c, p, size);
}
API(ze_result_t) zePhysicalMemCreate(ze_context_handle_t c, ze_device_handle_t dev,
                                     ze_physical_mem_desc_t *d, ze_physical_mem_handle_t *ph)
{
    DISPATCH(c, PhysicalMem, pfnCreate, u_phys_create, c, dev, d, ph);
}
API(ze_result_t) zePhysicalMemDestroy(ze_context_handle_t c, ze_physical_mem_handle_t h)
{
    DISPATCH(c, PhysicalMem, pfnDestroy, u_phys_destroy, c, h);
}

/* ---- the tables handed to programs --------------------------------------------
 * One driver without intercept: the driver's own copies; otherwise the
 * loader's exported functions above. */

API(ze_result_t) zeGetMemProcAddrTable(ze_api_version_t v, ze_mem_dditable_t *t)
{
    (void)v;
    if (init_result != ZE_RESULT_SUCCESS)
        return init_result;
    if (!intercept) {
        *t = drivers[0].Mem;
        return ZE_RESULT_SUCCESS;
    }
    memset(t, 0, sizeof *t);
    t->pfnAllocShared = zeMemAllocShared;
    t->pfnAllocDevice = zeMemAllocDevice;
    t->pfnAllocHost = zeMemAllocHost;
    t->pfnFree = zeMemFree;
    t->pfnFreeExt = zeMemFreeExt;
    return ZE_RESULT_SUCCESS;
}

API(ze_result_t) zeGetVirtualMemProcAddrTable(ze_api_version_t v, ze_virtual_mem_dditable_t *t)
{
    (void)v;
    if (init_result != ZE_RESULT_SUCCESS)
        return init_result;
    if (!intercept) {
        *t = drivers[0].VirtualMem;
        return ZE_RESULT_SUCCESS;
    }
    memset(t, 0, sizeof *t);
    t->pfnReserve = zeVirtualMemReserve;
    t->pfnFree = zeVirtualMemFree;
    t->pfnQueryPageSize = zeVirtualMemQueryPageSize;
    t->pfnMap = zeVirtualMemMap;
    t->pfnUnmap = zeVirtualMemUnmap;
    return ZE_RESULT_SUCCESS;
}

API(ze_result_t) zeGetPhysicalMemProcAddrTable(ze_api_version_t v, ze_physical_mem_dditable_t *t)
{
    (void)v;
    if (init_result != ZE_RESULT_SUCCESS)
        return init_result;
    if (!intercept) {
        *t = drivers[0].PhysicalMem;
        return ZE_RESULT_SUCCESS;
    }
    memset(t, 0, sizeof *t);
    t->pfnCreate = zePhysicalMemCreate;
    t->pfnDestroy = zePhysicalMemDestroy;
    return ZE_RESULT_SUCCESS;
}
