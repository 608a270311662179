/* tests/fakes/ze/fake_ze_ddi.h: the "driver DDI handles" extension of
 * Level Zero (spec 1.12 and later; the Debian 1.8 headers predate it), as
 * the fake driver (fake_ze_driver.c, fake_ze_ddi_handles.c) offers it and
 * the fake loader (fake_ze_loader.c) uses it.
 *
 * A driver that supports it reports ZE_extension_driver_ddi_handles and,
 * in the ze_driver_ddi_handles_ext_properties_t chained to
 * zeDriverGetProperties, the "supported" flag; every handle it returns
 * then starts with pointers to its own dispatch tables, and a loader that
 * takes that path (newer loaders do by default, when several drivers are
 * loaded or ZE_ENABLE_LOADER_INTERCEPT=1; ZE_ENABLE_LOADER_DRIVER_DDI_PATH=0
 * turns it off) calls handle->core->Mem->pfnAllocDevice instead of the
 * tables the driver's zeGet*ProcAddrTable getters handed out.
 *
 * The spec's dispatch struct has changed its layout between releases (1.12
 * to 1.17 added tables in front); this is the 1.17 order, with the tables
 * the 1.8 headers do not declare as plain pointers.  Only the fakes read
 * it, so it only has to agree with itself.
 */
#ifndef TDM_FAKE_ZE_DDI_H
#define TDM_FAKE_ZE_DDI_H

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <stdint.h>

#define FAKE_ZE_DDI_HANDLES_EXT_NAME "ZE_extension_driver_ddi_handles"
#define FAKE_ZE_DDI_HANDLES_EXT_VERSION ZE_MAKE_VERSION(1, 1)
#define FAKE_ZE_STRUCTURE_TYPE_DDI_HANDLES_EXT_PROPERTIES ((ze_structure_type_t)0x00020027)
#define FAKE_ZE_DDI_HANDLE_EXT_SUPPORTED (1u << 0)

/* ze_driver_ddi_handles_ext_properties_t */
typedef struct fake_ze_ddi_handles_props {
    ze_structure_type_t stype;
    void *pNext;
    uint32_t flags;
} fake_ze_ddi_handles_props;

/* ze_dditable_driver_t, the "core" tables a handle points to. */
typedef struct fake_ze_core_dispatch {
    ze_api_version_t version;
    uint8_t isValidFlag;
    void *RTASBuilder, *RTASBuilderExp, *RTASParallelOperation, *RTASParallelOperationExp;
    ze_global_dditable_t *Global;
    ze_driver_dditable_t *Driver;
    void *DriverExp;
    ze_device_dditable_t *Device;
    ze_device_exp_dditable_t *DeviceExp;
    ze_context_dditable_t *Context;
    ze_command_queue_dditable_t *CommandQueue;
    ze_command_list_dditable_t *CommandList;
    void *CommandListExp;
    ze_image_dditable_t *Image;
    ze_image_exp_dditable_t *ImageExp;
    ze_mem_dditable_t *Mem;
    void *MemExp;
    ze_fence_dditable_t *Fence;
    ze_event_pool_dditable_t *EventPool;
    ze_event_dditable_t *Event;
    ze_event_exp_dditable_t *EventExp;
    ze_module_dditable_t *Module;
    ze_module_build_log_dditable_t *ModuleBuildLog;
    ze_kernel_dditable_t *Kernel;
    ze_kernel_exp_dditable_t *KernelExp;
    ze_sampler_dditable_t *Sampler;
    ze_physical_mem_dditable_t *PhysicalMem;
    ze_virtual_mem_dditable_t *VirtualMem;
    ze_fabric_vertex_exp_dditable_t *FabricVertexExp;
    ze_fabric_edge_exp_dditable_t *FabricEdgeExp;
    void *Graph, *ExecutableGraph;
} fake_ze_core_dispatch;

/* ze_handle_t: what every handle of such a driver starts with. */
typedef struct fake_ze_handle_head {
    fake_ze_core_dispatch *core;
    void *tools, *sysman, *runtime;
} fake_ze_handle_head;

/* The dispatch of a handle of a driver with DDI handles. */
static inline fake_ze_core_dispatch *fake_ze_dispatch_of(const void *handle)
{
    return ((const fake_ze_handle_head *)handle)->core;
}

#endif
