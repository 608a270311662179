/* viewer-export/import/import_formats.c: the table of formats `tidemark import`
 * reads (import_formats.h).  One row per format, each importer in its own
 * file; rows with a sniff function are tried in this order when no
 * --format is given, so put the most specific test first.  No state, no
 * locks.
 */
#include "import_formats.h"
#include "import_build.h"
#include "import_csv.h"

#include <string.h>

const tdm_import_format tdm__import_formats[] = {
    /* name, description, sniff, read, free */
    {"pytorch", "PyTorch memory snapshot pickle (torch.cuda.memory._dump_snapshot)",
     tdm__import_pytorch_sniff, tdm__import_pytorch, tdm__import_pytorch_free},
    {"rmm", "RMM logging_resource_adaptor log (Thread,Time,Action,Pointer,Size,Stream)",
     tdm__import_rmm_sniff, tdm__import_rmm_csv, tdm__ibuild_snap_free},
    {"trace", "allocation trace CSV (action,time_ns,id,size,category), as in shared/traces",
     tdm__import_trace_sniff, tdm__import_trace, tdm__ibuild_snap_free},
};
const size_t tdm__import_format_count =
    sizeof tdm__import_formats / sizeof tdm__import_formats[0];

const tdm_import_format *tdm__import_format_find(const char *name)
{
    for (size_t i = 0; i < tdm__import_format_count; i++)
        if (strcmp(tdm__import_formats[i].name, name) == 0)
            return &tdm__import_formats[i];
    return NULL;
}

const tdm_import_format *tdm__import_format_detect(const unsigned char *head, size_t len)
{
    for (size_t i = 0; i < tdm__import_format_count; i++)
        if (tdm__import_formats[i].sniff && tdm__import_formats[i].sniff(head, len))
            return &tdm__import_formats[i];
    return NULL;
}
