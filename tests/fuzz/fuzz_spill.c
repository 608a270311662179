/* tests/fuzz/fuzz_spill.c: the spill file reader (format/format_spill.c)
 * and what `tidemark recover` makes of what it returns
 * (viewer-export/import/recover_build.c), on any bytes.  A spill file is read
 * after its writer died at an arbitrary instant, so every field of it may
 * be half-written: none of it may crash the reader or the replay. */
#include <stddef.h>
#include <stdint.h>

#include "format_spill.h"
#include "model.h"
#include "recover.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdm_spill_data *d = NULL;
    tdm_read_error err;
    tdm_status s = tdm__spill_read_buffer(data, size, &d, &err);
    if (s == TDM_OK && !d)
        __builtin_trap(); /* success without the data */
    if (!d)
        return 0;
    /* Without symbols: the module files named in the input are not
     * opened (they would be this machine's files, not the input). */
    tdm_snap *snap = NULL;
    if (tdm__recover_build(d, NULL, NULL, &snap) == TDM_OK && snap) {
        tdm_model *m = NULL;
        if (tdm__model_build(snap, &m) == TDM_OK)
            tdm__model_free(m);
        tdm__recover_snap_free(snap);
    }
    tdm__spill_data_free(d);
    return 0;
}
