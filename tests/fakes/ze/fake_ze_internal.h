/* tests/fakes/ze/fake_ze_internal.h: what the files of the fake Level Zero
 * driver share (fake_ze_driver.c, fake_ze_ddi_handles.c). */
#ifndef TDM_FAKE_ZE_INTERNAL_H
#define TDM_FAKE_ZE_INTERNAL_H

#include <level_zero/ze_api.h>

#include "fake_ze_ddi.h"

/* The head each handle of the fake starts with: its own dispatch tables
 * (fake_ze_ddi.h). */
fake_ze_handle_head fake_ze_head(void);

/* The Driver table's version and property queries, with the DDI handles
 * extension. */
ze_result_t ZE_APICALL fake_ze_driver_get_api_version(ze_driver_handle_t h,
                                                      ze_api_version_t *version);
ze_result_t ZE_APICALL fake_ze_driver_get_properties(ze_driver_handle_t h,
                                                     ze_driver_properties_t *props);
ze_result_t ZE_APICALL fake_ze_driver_get_extension_properties(
    ze_driver_handle_t h, uint32_t *pCount, ze_driver_extension_properties_t *props);

#endif
