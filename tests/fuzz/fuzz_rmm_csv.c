/* tests/fuzz/fuzz_rmm_csv.c: the RMM logging_resource_adaptor CSV importer (import/import_rmm_csv.c)
 * over the shared line reader (import/csv_read.c), and the model over
 * what it imports. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "import_build.h"
#include "import_csv.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdm_snap *snap = NULL;
    char err[320];
    tdm_status s = tdm__import_rmm_csv_buffer(data, size, "fuzz", &snap, err, sizeof err);
    if (s == TDM_OK && !snap)
        __builtin_trap();
    if (snap) {
        tdm_model *m = NULL;
        if (tdm__model_build(snap, &m) == TDM_OK)
            tdm__model_free(m);
        tdm__ibuild_snap_free(snap);
    }
    return 0;
}
