/* tests/fakes/ze/fake_ze_ddi_handles.c: the fake Level Zero driver's side
 * of the driver DDI handles extension (fake_ze_ddi.h), as Intel's GPU
 * driver offers it: the extension listed by zeDriverGetExtensionProperties,
 * the "supported" flag in the ze_driver_ddi_handles_ext_properties_t a
 * caller chains to zeDriverGetProperties, and the head every handle of the
 * fake starts with, pointing to the driver's own tables.
 *
 * Those tables are filled once from the driver's own getters (the library
 * is linked -Bsymbolic, so the calls stay inside it even though the loader
 * exports getters of the same names).  They are the driver's, not the
 * copies a loader (or a shim driver in front of this one) got from the
 * getters: a loader that dispatches through handles reaches this driver
 * directly.  FAKE_ZE_DDI_HANDLES=0 makes the fake a driver without the
 * extension.
 *
 * State: the tables, written once under pthread_once.  No lock after.
 */
#include <level_zero/zes_ddi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fake_ze_ddi.h"
#include "fake_ze_internal.h"

static struct {
    fake_ze_core_dispatch core;
    ze_global_dditable_t global;
    ze_driver_dditable_t driver;
    ze_device_dditable_t device;
    ze_context_dditable_t context;
    ze_command_queue_dditable_t command_queue;
    ze_command_list_dditable_t command_list;
    ze_mem_dditable_t mem;
    ze_virtual_mem_dditable_t virtual_mem;
    ze_physical_mem_dditable_t physical_mem;
} own;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static int offered = 1;

static void fill_own(void)
{
    const char *s = getenv("FAKE_ZE_DDI_HANDLES");
    offered = !(s && strcmp(s, "0") == 0);
    ze_api_version_t v = ZE_API_VERSION_CURRENT;
    zeGetGlobalProcAddrTable(v, &own.global);
    zeGetDriverProcAddrTable(v, &own.driver);
    zeGetDeviceProcAddrTable(v, &own.device);
    zeGetContextProcAddrTable(v, &own.context);
    zeGetCommandQueueProcAddrTable(v, &own.command_queue);
    zeGetCommandListProcAddrTable(v, &own.command_list);
    zeGetMemProcAddrTable(v, &own.mem);
    zeGetVirtualMemProcAddrTable(v, &own.virtual_mem);
    zeGetPhysicalMemProcAddrTable(v, &own.physical_mem);
    own.core.version = v;
    own.core.isValidFlag = 1;
    own.core.Global = &own.global;
    own.core.Driver = &own.driver;
    own.core.Device = &own.device;
    own.core.Context = &own.context;
    own.core.CommandQueue = &own.command_queue;
    own.core.CommandList = &own.command_list;
    own.core.Mem = &own.mem;
    own.core.VirtualMem = &own.virtual_mem;
    own.core.PhysicalMem = &own.physical_mem;
}

fake_ze_handle_head fake_ze_head(void)
{
    pthread_once(&own_once, fill_own);
    fake_ze_handle_head h = {&own.core, NULL, NULL, NULL};
    return h;
}

ze_result_t ZE_APICALL fake_ze_driver_get_api_version(ze_driver_handle_t h,
                                                      ze_api_version_t *version)
{
    (void)h;
    *version = ZE_API_VERSION_CURRENT;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL fake_ze_driver_get_properties(ze_driver_handle_t h,
                                                     ze_driver_properties_t *props)
{
    (void)h;
    pthread_once(&own_once, fill_own);
    memset(&props->uuid, 0, sizeof props->uuid);
    props->driverVersion = 0x7d3;
    for (ze_base_properties_t *ext = props->pNext; ext; ext = ext->pNext)
        if (ext->stype == FAKE_ZE_STRUCTURE_TYPE_DDI_HANDLES_EXT_PROPERTIES)
            ((fake_ze_ddi_handles_props *)ext)->flags =
                offered ? FAKE_ZE_DDI_HANDLE_EXT_SUPPORTED : 0;
    return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL fake_ze_driver_get_extension_properties(
    ze_driver_handle_t h, uint32_t *pCount, ze_driver_extension_properties_t *props)
{
    (void)h;
    pthread_once(&own_once, fill_own);
    uint32_t n = offered ? 1 : 0;
    if (*pCount > 0 && props && n) {
        memset(&props[0], 0, sizeof props[0]);
        strncpy(props[0].name, FAKE_ZE_DDI_HANDLES_EXT_NAME, sizeof props[0].name - 1);
        props[0].version = FAKE_ZE_DDI_HANDLES_EXT_VERSION;
    }
    *pCount = n;
    return ZE_RESULT_SUCCESS;
}
