/* viewer-export/model/input.c: checks on a loaded input that every
 * command makes the same way (input.h).  No state, no locks. */
#include "input.h"

#include <string.h>

int tdm__input_check_device(const char *cmd, const tdm_input *in, int ordinal)
{
    if (ordinal < 0 || !in->model || tdm__model_device_index(in->model, ordinal) >= 0)
        return TDM_EXIT_OK;
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < in->model->device_count && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%d", i ? ", " : "",
                         in->model->devices[i].ordinal);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used >= sizeof list)
        memcpy(list + sizeof list - 4, "...", 4);
    fprintf(stderr, "tidemark %s: %s has no device %d (%s%s)\n", cmd, in->path, ordinal,
            in->model->device_count ? "its devices: " : "it has no device",
            in->model->device_count ? list : "");
    return TDM_EXIT_BAD_INPUT;
}
