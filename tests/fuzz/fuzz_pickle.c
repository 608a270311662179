/* tests/fuzz/fuzz_pickle.c: the PyTorch snapshot pickle importer
 * (import/pickle_read.c, then the schema walk of import_pytorch.c), and
 * the model over what it imports. */
#include <stddef.h>
#include <stdint.h>

#include "import_formats.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdm_snap *snap = NULL;
    char err[320];
    tdm_pt_import_report rep;
    tdm_status s = tdm__import_pytorch_buffer(data, size, "fuzz", &snap, &rep, err, sizeof err);
    if (s == TDM_OK && !snap)
        __builtin_trap();
    if (snap) {
        tdm_model *m = NULL;
        if (tdm__model_build(snap, &m) == TDM_OK)
            tdm__model_free(m);
        tdm__import_pytorch_free(snap);
    }
    return 0;
}
