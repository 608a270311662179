/* snapshot/common.c: names and messages shared by every layer and by the
 * command-line tool: version, status codes, categories, actions.  All are
 * generated from the X-macro lists in tidemark.h and event.h, so a new
 * status or action cannot be added without its name. */
#include <string.h>

#include "tidemark.h"
#include "event.h"

unsigned tdm_version(void) { return TDM_VERSION_HEX; }

const char *tdm_version_string(void) { return TDM_VERSION_STRING; }

static const char *const status_names[] = {
#define XX(name, msg) "TDM_" #name,
    TDM_STATUS_MAP(XX)
#undef XX
};

static const char *const status_messages[] = {
#define XX(name, msg) msg,
    TDM_STATUS_MAP(XX)
#undef XX
};

const char *tdm_status_name(tdm_status status)
{
    if ((unsigned)status >= TDM_STATUS_COUNT_)
        return "TDM_UNKNOWN_STATUS";
    return status_names[status];
}

const char *tdm_strerror(tdm_status status)
{
    if ((unsigned)status >= TDM_STATUS_COUNT_)
        return "unknown status";
    return status_messages[status];
}

static const char *const category_names[] = {
#define XX(name, str) str,
    TDM_CATEGORY_MAP(XX)
#undef XX
};

const char *tdm_category_name(tdm_category category)
{
    if ((unsigned)category >= TDM_CATEGORY_COUNT_)
        return "unknown";
    return category_names[category];
}

static const char *const action_names[] = {
#define XX(name, str) str,
    TDM_ACTION_MAP(XX)
#undef XX
};

const char *tdm__action_name(unsigned action)
{
    if (action >= TDM_ACTION_COUNT_)
        return NULL;
    return action_names[action];
}

int tdm__action_from_name(const char *name)
{
    for (unsigned i = 0; name && i < TDM_ACTION_COUNT_; i++)
        if (strcmp(action_names[i], name) == 0)
            return (int)i;
    return -1;
}

unsigned tdm__event_expand(const tdm_event *in, tdm_event *out)
{
    switch (in->action) {
    case TDM__ACTION_SEGMENT_ALLOC_ALLOC:
        out[0] = *in;
        out[0].action = TDM_ACTION_SEGMENT_ALLOC;
        out[1] = *in;
        out[1].action = TDM_ACTION_ALLOC;
        out[1].size = in->requested;
        return 2;
    case TDM__ACTION_FREE_SEGMENT_FREE:
        out[0] = *in;
        out[0].action = TDM_ACTION_FREE_REQUESTED;
        out[0].size = in->requested;
        out[1] = out[0];
        out[1].action = TDM_ACTION_FREE_COMPLETED;
        out[2] = *in;
        out[2].action = TDM_ACTION_SEGMENT_FREE;
        return 3;
    default:
        out[0] = *in;
        return 1;
    }
}
