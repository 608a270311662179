/* viewer-export/model/categories.h: which kind of memory each allocation is.
 *
 * Categories (tdm_category): PARAMETER, OPTIMIZER_STATE, GRADIENT,
 * ACTIVATION, INPUT, TEMPORARY, UNKNOWN.  An explicit tag (tdm_tag_push /
 * tdm_tag_ptr, carried in the alloc event and the final block) wins;
 * otherwise the category is inferred from phase marks and lifetimes
 * (DESIGN.md "Categories"): memory that outlives the steps is static
 * (parameters, optimizer state), memory made in forward and freed in
 * backward is activation, memory made in backward and alive into the
 * optimizer phase is gradient, memory made and freed inside one phase is
 * temporary.
 */
#ifndef TDM_VIEWER_CATEGORIES_H
#define TDM_VIEWER_CATEGORIES_H

#include <stdint.h>

#include "model.h"

/* One category per allocation: (*cats)[i] is the category of
 * model->allocs[i] (a tdm_category).  *cats is malloc'd; free() it.
 * TDM_HOST_OUT_OF_MEMORY is the only failure. */
tdm_status tdm__categories_infer(const tdm_model *model, uint8_t **cats);

#endif
