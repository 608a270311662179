/* tests/fuzz/fuzz_tdm_crc.c: the .tdm reader and the model past the
 * checksum: every record's CRC is made right before reading
 * (tdm_crc_fix.h), so a mutation inside a payload reaches the decoding of
 * its fields, the checks that bound them, and the model built from them
 * (fuzz_tdm stops at the checksum mismatch). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model.h"
#include "snap_model.h"
#include "tdm_crc_fix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    uint8_t *fixed = tdm_fuzz_fix_crcs(data, size, &n);
    if (!fixed)
        return 0;
    for (int partial = 0; partial < 2; partial++) {
        tdm_snap *snap = NULL;
        tdm_read_error err;
        tdm_status s = tdm__snap_read_buffer(fixed, n, partial, &snap, &err);
        if (s == TDM_OK && !snap)
            __builtin_trap();
        if (snap) {
            tdm_model *m = NULL;
            if (tdm__model_build(snap, &m) == TDM_OK)
                tdm__model_free(m);
            tdm__snap_free(snap);
        }
    }
    free(fixed);
    return 0;
}
