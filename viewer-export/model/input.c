/* viewer-export/model/input.c: checks on a loaded input that every
 * command makes the same way (input.h).  No state, no locks. */
#include "input.h"

#include <stdlib.h>
#include <string.h>

int tdm__input_say_no_device(const char *cmd, const char *path, int ordinal, const int *have,
                             size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (have[i] == ordinal)
            return TDM_EXIT_OK;
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%d", i ? ", " : "", have[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used >= sizeof list)
        memcpy(list + sizeof list - 4, "...", 4);
    fprintf(stderr, "tidemark %s: %s has no device %d (%s%s)\n", cmd, path, ordinal,
            n ? "its devices: " : "it has no device", n ? list : "");
    return TDM_EXIT_BAD_INPUT;
}

int tdm__input_check_device(const char *cmd, const tdm_input *in, int ordinal)
{
    if (ordinal < 0 || !in->model || tdm__model_device_index(in->model, ordinal) >= 0)
        return TDM_EXIT_OK;
    size_t n = in->model->device_count;
    int *have = calloc(n ? n : 1, sizeof *have);
    if (!have) {
        fprintf(stderr, "tidemark %s: %s has no device %d\n", cmd, in->path, ordinal);
        return TDM_EXIT_BAD_INPUT;
    }
    for (size_t i = 0; i < n; i++)
        have[i] = in->model->devices[i].ordinal;
    int rc = tdm__input_say_no_device(cmd, in->path, ordinal, have, n);
    free(have);
    return rc;
}
