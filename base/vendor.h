/* base/vendor.h: the device vendors as the code names them
 * (tdm_vendor), and what every layer may know of each (vendors.def).
 *
 * Inside tidemark a vendor is a tdm_vendor; its name is text only at the
 * edges: TIDEMARK_CONF's device= (hooks/config.c), and the vendor a
 * snapshot or spill file gives its devices.  Header only, so that the
 * recorder, the allocator and the file-format library each get it without
 * one more object to link.  No state, no locks.
 */
#ifndef TDM_SNAPSHOT_VENDOR_H
#define TDM_SNAPSHOT_VENDOR_H

#include <stddef.h>
#include <string.h>

typedef enum tdm_vendor {
    TDM_VENDOR_UNKNOWN = -1, /* a device no hook described */
#define TDM_VENDOR(id, ...) TDM_VENDOR_##id,
#include "vendors.def"
    TDM_VENDOR_COUNT
} tdm_vendor;

/* c10::DeviceType values, as Kineto writes them into a trace. */
typedef enum tdm_torch_device {
    TDM_TORCH_DEVICE_CUDA = 1,
    TDM_TORCH_DEVICE_XPU = 12,
} tdm_torch_device;

/* A row of vendors.def; the columns are described there. */
typedef struct tdm_vendor_info {
    const char *name;
    const char *conf_forms;
    tdm_torch_device torch_device;
    const char *c10_namespace;
    const char *api_frames;
    const char *torch_allocator;
    const char *torch_allocator_mangled;
    const char *torch_library;
} tdm_vendor_info;

/* The row of `v`; NULL for TDM_VENDOR_UNKNOWN or anything out of range. */
static inline const tdm_vendor_info *tdm__vendor_info(tdm_vendor v)
{
    static const tdm_vendor_info rows[] = {
#define TDM_VENDOR(id, name, forms, torch, ns, api, alloc, mangled, lib)         \
    {name, forms, TDM_TORCH_DEVICE_##torch, ns, api, alloc, mangled, lib},
#include "vendors.def"
    };
    _Static_assert(sizeof rows / sizeof rows[0] == TDM_VENDOR_COUNT,
                   "one row per vendor");
    return v >= 0 && v < TDM_VENDOR_COUNT ? &rows[v] : NULL;
}

/* The name a file and TIDEMARK_CONF know `v` by; "unknown" for
 * TDM_VENDOR_UNKNOWN (what a snapshot says of a device never described). */
static inline const char *tdm__vendor_name(tdm_vendor v)
{
    const tdm_vendor_info *row = tdm__vendor_info(v);
    return row ? row->name : "unknown";
}

/* The vendor a file's text names, exactly as written there;
 * TDM_VENDOR_UNKNOWN for NULL or any other text. */
static inline tdm_vendor tdm__vendor_of_name(const char *name)
{
    for (int v = 0; name && v < TDM_VENDOR_COUNT; v++)
        if (strcmp(name, tdm__vendor_info((tdm_vendor)v)->name) == 0)
            return (tdm_vendor)v;
    return TDM_VENDOR_UNKNOWN;
}

#endif
