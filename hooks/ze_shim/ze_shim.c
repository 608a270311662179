/* hooks/ze_shim/ze_shim.c: libtidemark_ze_shim.so, a Level Zero "driver"
 * that wraps the real one, so that tidemark sees every memory call
 * however the program reached the loader.
 *
 * Use: ZE_ENABLE_ALT_DRIVERS=/path/libtidemark_ze_shim.so (the loader then
 * loads it instead of its default driver list) and, when the real driver
 * is not libze_intel_gpu.so.1, TIDEMARK_ZE_DRIVER=<name or path of it>.
 * The loader talks to a driver only through its exported
 * zeGet*ProcAddrTable / zetGet* / zesGet* getters; this library forwards
 * all 53 to the real driver and, in the Mem, VirtualMem, PhysicalMem,
 * CommandQueue and CommandList tables it hands back, puts its own
 * functions in front of the real ones (ze_track.h books them; the queues
 * are what cache mode's free policies wait for).  Programs that take the loader's DDI tables
 * (or link the static loader shim) call those slots directly, so they are
 * seen here though the exported zeMem* symbols never run.
 *
 * A newer loader (1.20 on) that drives several drivers, or runs with
 * ZE_ENABLE_LOADER_INTERCEPT=1, calls a driver that offers "DDI handles"
 * (Intel's GPU driver does) through the tables each of its handles points
 * to: the real driver's own, past the copies patched here.  The handles
 * this shim passes on are the real driver's, so it cannot honestly offer
 * that: zeDriverGetProperties answers "not supported" in the extension's
 * properties, and the loader keeps calling through these tables (it wraps
 * the handles instead, as for any driver without the extension).  It links
 * libtidemark.so, whose constructor applies TIDEMARK_CONF; with
 * libtidemark_preload.so also loaded, the preload's Level Zero hooks step
 * aside and this library books alone.
 *
 * Owns: the real driver's handle and the real table slots (tdm__ze_real).
 * Invariant: a slot is replaced only where the real driver filled one, so
 * "unsupported" stays unsupported.  Lock: none; the loader fetches the
 * tables inside zeInit, before the program can call any slot.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <level_zero/zet_ddi.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ze_track.h"

#define EXPORT __attribute__((visibility("default")))

static tdm__ze_real real;

/* The real driver, opened once (the loader calls the getters from zeInit,
 * one thread). */
static void *real_driver(void)
{
    static void *handle;
    static int tried;
    if (!tried) {
        tried = 1;
        const char *name = getenv("TIDEMARK_ZE_DRIVER");
        if (name == NULL || *name == '\0')
            name = "libze_intel_gpu.so.1";
        handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL)
            fprintf(stderr, "tidemark: Level Zero shim: cannot open the real driver: %s\n",
                    dlerror());
    }
    return handle;
}

/* The real driver's getter `name` called on `table`; a driver without
 * that getter does not support the table. */
#define CALL_REAL_GETTER(type, name, version, table)                           \
    do {                                                                       \
        void *h_ = real_driver();                                              \
        ze_result_t (*get_)(ze_api_version_t, type *) =                        \
            h_ ? (ze_result_t(*)(ze_api_version_t, type *))dlsym(h_, name) : NULL; \
        if (h_ == NULL)                                                        \
            return ZE_RESULT_ERROR_UNINITIALIZED;                              \
        if (get_ == NULL)                                                      \
            return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;                        \
        ze_result_t r_ = get_(version, table);                                 \
        if (r_ != ZE_RESULT_SUCCESS)                                           \
            return r_;                                                         \
    } while (0)

#define FORWARD(fn, type)                                                      \
    EXPORT ze_result_t ZE_APICALL fn(ze_api_version_t version, type *table);   \
    EXPORT ze_result_t ZE_APICALL fn(ze_api_version_t version, type *table)    \
    {                                                                          \
        CALL_REAL_GETTER(type, #fn, version, table);                           \
        return ZE_RESULT_SUCCESS;                                              \
    }

/* Puts hook `ours` in a slot the real driver filled, keeping the real one. */
#define WRAP(table, slot, field, ours)                                         \
    do {                                                                       \
        if ((table)->slot) {                                                   \
            real.field = (table)->slot;                                        \
            (table)->slot = ours;                                              \
        }                                                                      \
    } while (0)

/* ---- frames between the program and a hook -------------------------------
 * A table slot is called by the program itself (DDI tables), by the
 * loader's exported function, or by libtidemark_preload.so's hook stepping
 * aside.  Those two usually jump to the slot (a tail call, no frame), but
 * not in every build (-O0, TSan): then the caller's frame is one more to
 * leave out of the stack, so that it still starts at the program. */

#define MAX_RANGES 8
static struct {
    uintptr_t lo, hi; /* executable segment [lo, hi) */
} ranges[MAX_RANGES];
static int n_ranges;
static pthread_once_t ranges_once = PTHREAD_ONCE_INIT;

static int is_intermediate(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libtidemark_preload.so", 22) == 0 ||
           strncmp(base, "libze_loader.so", 15) == 0;
}

static int add_ranges(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    if (info->dlpi_name == NULL || !is_intermediate(info->dlpi_name))
        return 0;
    for (int i = 0; i < info->dlpi_phnum && n_ranges < MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            ranges[n_ranges].lo = info->dlpi_addr + ph->p_vaddr;
            ranges[n_ranges].hi = ranges[n_ranges].lo + ph->p_memsz;
            n_ranges++;
        }
    }
    return 0;
}

static void find_ranges(void)
{
    dl_iterate_phdr(add_ranges, NULL);
}

static inline __attribute__((always_inline)) unsigned caller_skip(void *ret)
{
    pthread_once(&ranges_once, find_ranges);
    uintptr_t a = (uintptr_t)ret;
    for (int i = 0; i < n_ranges; i++)
        if (a >= ranges[i].lo && a < ranges[i].hi)
            return TDM_HOOK_SKIP + 1;
    return TDM_HOOK_SKIP;
}

/* In a hook: the frames to leave out for this call. */
#define SKIP caller_skip(__builtin_return_address(0))

/* ---- the hooks in the tables ---------------------------------------------- */

static ze_result_t ZE_APICALL s_alloc_device(ze_context_handle_t c,
                                             const ze_device_mem_alloc_desc_t *dd, size_t size,
                                             size_t alignment, ze_device_handle_t dev, void **pptr)
{
    return tdm__ze_alloc_device(&real, SKIP, c, dd, size, alignment, dev, pptr);
}

static ze_result_t ZE_APICALL s_alloc_shared(ze_context_handle_t c,
                                             const ze_device_mem_alloc_desc_t *dd,
                                             const ze_host_mem_alloc_desc_t *hd, size_t size,
                                             size_t alignment, ze_device_handle_t dev, void **pptr)
{
    return tdm__ze_alloc_shared(&real, SKIP, c, dd, hd, size, alignment, dev, pptr);
}

static ze_result_t ZE_APICALL s_alloc_host(ze_context_handle_t c,
                                           const ze_host_mem_alloc_desc_t *hd, size_t size,
                                           size_t alignment, void **pptr)
{
    return tdm__ze_alloc_host(&real, SKIP, c, hd, size, alignment, pptr);
}

static ze_result_t ZE_APICALL s_free(ze_context_handle_t c, void *ptr)
{
    return tdm__ze_free(&real, SKIP, c, ptr);
}

static ze_result_t ZE_APICALL s_free_ext(ze_context_handle_t c,
                                         const ze_memory_free_ext_desc_t *desc, void *ptr)
{
    return tdm__ze_free_ext(&real, SKIP, c, desc, ptr);
}

static ze_result_t ZE_APICALL s_physical_create(ze_context_handle_t c, ze_device_handle_t dev,
                                                ze_physical_mem_desc_t *desc,
                                                ze_physical_mem_handle_t *ph)
{
    return tdm__ze_physical_create(&real, SKIP, c, dev, desc, ph);
}

static ze_result_t ZE_APICALL s_physical_destroy(ze_context_handle_t c, ze_physical_mem_handle_t h)
{
    return tdm__ze_physical_destroy(&real, SKIP, c, h);
}

static ze_result_t ZE_APICALL s_virtual_map(ze_context_handle_t c, const void *ptr, size_t size,
                                            ze_physical_mem_handle_t h, size_t offset,
                                            ze_memory_access_attribute_t access)
{
    return tdm__ze_virtual_map(&real, SKIP, c, ptr, size, h, offset, access);
}

static ze_result_t ZE_APICALL s_virtual_unmap(ze_context_handle_t c, const void *ptr, size_t size)
{
    return tdm__ze_virtual_unmap(&real, SKIP, c, ptr, size);
}

static ze_result_t ZE_APICALL s_queue_create(ze_context_handle_t c, ze_device_handle_t dev,
                                             const ze_command_queue_desc_t *desc,
                                             ze_command_queue_handle_t *phq)
{
    return tdm__ze_queue_create(&real, c, dev, desc, phq);
}

static ze_result_t ZE_APICALL s_queue_destroy(ze_command_queue_handle_t q)
{
    return tdm__ze_queue_destroy(&real, q);
}

static ze_result_t ZE_APICALL s_list_create_immediate(ze_context_handle_t c,
                                                      ze_device_handle_t dev,
                                                      const ze_command_queue_desc_t *desc,
                                                      ze_command_list_handle_t *phl)
{
    return tdm__ze_list_create_immediate(&real, c, dev, desc, phl);
}

static ze_result_t ZE_APICALL s_list_destroy(ze_command_list_handle_t l)
{
    return tdm__ze_list_destroy(&real, l);
}

/* The DDI handles extension (Level Zero 1.12 on; Debian's 1.8 headers
 * predate it): the properties a loader chains to zeDriverGetProperties,
 * and the flag by which a driver says its handles carry its tables. */
#define DDI_HANDLES_EXT_PROPERTIES ((ze_structure_type_t)0x00020027)
#define DDI_HANDLE_EXT_SUPPORTED 1u

typedef struct ddi_handles_ext_properties {
    ze_structure_type_t stype;
    void *pNext;
    uint32_t flags;
} ddi_handles_ext_properties;

static ze_pfnDriverGetProperties_t real_driver_get_properties;

static ze_result_t ZE_APICALL s_driver_get_properties(ze_driver_handle_t h,
                                                      ze_driver_properties_t *props)
{
    ze_result_t r = real_driver_get_properties(h, props);
    if (r == ZE_RESULT_SUCCESS && props)
        for (ze_base_properties_t *ext = props->pNext; ext; ext = ext->pNext)
            if (ext->stype == DDI_HANDLES_EXT_PROPERTIES)
                ((ddi_handles_ext_properties *)ext)->flags &= ~DDI_HANDLE_EXT_SUPPORTED;
    return r;
}

/* ---- the getters the shim changes (or reads) ---------------------------- */

EXPORT ze_result_t ZE_APICALL zeGetMemProcAddrTable(ze_api_version_t version,
                                                    ze_mem_dditable_t *table)
{
    CALL_REAL_GETTER(ze_mem_dditable_t, "zeGetMemProcAddrTable", version, table);
    WRAP(table, pfnAllocDevice, mem_alloc_device, s_alloc_device);
    WRAP(table, pfnAllocShared, mem_alloc_shared, s_alloc_shared);
    WRAP(table, pfnAllocHost, mem_alloc_host, s_alloc_host);
    WRAP(table, pfnFree, mem_free, s_free);
    WRAP(table, pfnFreeExt, mem_free_ext, s_free_ext);
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetPhysicalMemProcAddrTable(ze_api_version_t version,
                                                            ze_physical_mem_dditable_t *table)
{
    CALL_REAL_GETTER(ze_physical_mem_dditable_t, "zeGetPhysicalMemProcAddrTable", version, table);
    WRAP(table, pfnCreate, physical_mem_create, s_physical_create);
    WRAP(table, pfnDestroy, physical_mem_destroy, s_physical_destroy);
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetVirtualMemProcAddrTable(ze_api_version_t version,
                                                           ze_virtual_mem_dditable_t *table)
{
    CALL_REAL_GETTER(ze_virtual_mem_dditable_t, "zeGetVirtualMemProcAddrTable", version, table);
    /* Read, not wrapped (a reservation holds no memory): the cache's
     * expandable segments call them. */
    real.virtual_mem_reserve = table->pfnReserve;
    real.virtual_mem_free = table->pfnFree;
    real.virtual_mem_query_page_size = table->pfnQueryPageSize;
    WRAP(table, pfnMap, virtual_mem_map, s_virtual_map);
    WRAP(table, pfnUnmap, virtual_mem_unmap, s_virtual_unmap);
    return ZE_RESULT_SUCCESS;
}

/* What runs commands, which cache mode's free policies wait for
 * (ze_track.c): queues and immediate lists recorded, synchronize read. */
EXPORT ze_result_t ZE_APICALL zeGetCommandQueueProcAddrTable(ze_api_version_t version,
                                                             ze_command_queue_dditable_t *table)
{
    CALL_REAL_GETTER(ze_command_queue_dditable_t, "zeGetCommandQueueProcAddrTable", version,
                     table);
    real.command_queue_synchronize = table->pfnSynchronize;
    WRAP(table, pfnCreate, command_queue_create, s_queue_create);
    WRAP(table, pfnDestroy, command_queue_destroy, s_queue_destroy);
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetCommandListProcAddrTable(ze_api_version_t version,
                                                            ze_command_list_dditable_t *table)
{
    CALL_REAL_GETTER(ze_command_list_dditable_t, "zeGetCommandListProcAddrTable", version, table);
    WRAP(table, pfnCreateImmediate, command_list_create_immediate, s_list_create_immediate);
    WRAP(table, pfnDestroy, command_list_destroy, s_list_destroy);
    return ZE_RESULT_SUCCESS;
}

/* Read for the bookings (zeDriverGet names devices); zeDriverGetProperties
 * wrapped so that the loader calls through these tables (above). */
EXPORT ze_result_t ZE_APICALL zeGetDriverProcAddrTable(ze_api_version_t version,
                                                       ze_driver_dditable_t *table)
{
    CALL_REAL_GETTER(ze_driver_dditable_t, "zeGetDriverProcAddrTable", version, table);
    real.driver_get = table->pfnGet;
    if (table->pfnGetProperties && table->pfnGetProperties != s_driver_get_properties) {
        real_driver_get_properties = table->pfnGetProperties;
        table->pfnGetProperties = s_driver_get_properties;
    }
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zeGetDeviceProcAddrTable(ze_api_version_t version,
                                                       ze_device_dditable_t *table)
{
    CALL_REAL_GETTER(ze_device_dditable_t, "zeGetDeviceProcAddrTable", version, table);
    real.device_get = table->pfnGet;
    real.device_get_properties = table->pfnGetProperties;
    real.device_get_memory_properties = table->pfnGetMemoryProperties;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zesGetDeviceProcAddrTable(ze_api_version_t version,
                                                        zes_device_dditable_t *table)
{
    CALL_REAL_GETTER(zes_device_dditable_t, "zesGetDeviceProcAddrTable", version, table);
    real.sysman_enum_memory_modules = table->pfnEnumMemoryModules;
    return ZE_RESULT_SUCCESS;
}

EXPORT ze_result_t ZE_APICALL zesGetMemoryProcAddrTable(ze_api_version_t version,
                                                        zes_memory_dditable_t *table)
{
    CALL_REAL_GETTER(zes_memory_dditable_t, "zesGetMemoryProcAddrTable", version, table);
    real.sysman_memory_get_state = table->pfnGetState;
    return ZE_RESULT_SUCCESS;
}

/* ---- every other getter: forwarded as is ------------------------------------ */

FORWARD(zeGetGlobalProcAddrTable, ze_global_dditable_t)
FORWARD(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t)
FORWARD(zeGetContextProcAddrTable, ze_context_dditable_t)
FORWARD(zeGetImageProcAddrTable, ze_image_dditable_t)
FORWARD(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t)
FORWARD(zeGetFenceProcAddrTable, ze_fence_dditable_t)
FORWARD(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t)
FORWARD(zeGetEventProcAddrTable, ze_event_dditable_t)
FORWARD(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t)
FORWARD(zeGetModuleProcAddrTable, ze_module_dditable_t)
FORWARD(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t)
FORWARD(zeGetKernelProcAddrTable, ze_kernel_dditable_t)
FORWARD(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t)
FORWARD(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
FORWARD(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t)
FORWARD(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t)
FORWARD(zetGetDeviceProcAddrTable, zet_device_dditable_t)
FORWARD(zetGetContextProcAddrTable, zet_context_dditable_t)
FORWARD(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
FORWARD(zetGetModuleProcAddrTable, zet_module_dditable_t)
FORWARD(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
FORWARD(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
FORWARD(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t)
FORWARD(zetGetMetricProcAddrTable, zet_metric_dditable_t)
FORWARD(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
FORWARD(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
FORWARD(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
FORWARD(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
FORWARD(zetGetDebugProcAddrTable, zet_debug_dditable_t)
FORWARD(zesGetDriverProcAddrTable, zes_driver_dditable_t)
FORWARD(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
FORWARD(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
FORWARD(zesGetPowerProcAddrTable, zes_power_dditable_t)
FORWARD(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
FORWARD(zesGetEngineProcAddrTable, zes_engine_dditable_t)
FORWARD(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
FORWARD(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
FORWARD(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
FORWARD(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
FORWARD(zesGetPsuProcAddrTable, zes_psu_dditable_t)
FORWARD(zesGetFanProcAddrTable, zes_fan_dditable_t)
FORWARD(zesGetLedProcAddrTable, zes_led_dditable_t)
FORWARD(zesGetRasProcAddrTable, zes_ras_dditable_t)
FORWARD(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
