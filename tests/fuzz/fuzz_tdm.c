/* tests/fuzz/fuzz_tdm.c: the .tdm reader (format/format_read.c) on any
 * bytes, strict and partial; a snapshot it returns must keep the
 * invariants format_read.c promises, which the model build relies on. */
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "snap_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int partial = 0; partial < 2; partial++) {
        tdm_snap *snap = NULL;
        tdm_read_error err;
        tdm_status s = tdm__snap_read_buffer(data, size, partial, &snap, &err);
        if (s == TDM_OK && !snap)
            __builtin_trap(); /* success without a snapshot */
        if (snap) {
            /* The model walks every event, block and stack of it. */
            tdm_model *m = NULL;
            if (tdm__model_build(snap, &m) == TDM_OK)
                tdm__model_free(m);
            tdm__snap_free(snap);
        }
    }
    return 0;
}
