/* viewer-export/model/ranks.c: collecting the snapshots of a multi-rank job
 * (files and directories on the command line), ordering them by rank and
 * naming each by rank and host (ranks.h).
 *
 * Ordering is stable on purpose: two files of one rank (a signal dump and
 * the exit dump, or two jobs in one folder) stay in the order the user
 * gave, and files without a rank keep the command line's order exactly, so
 * a single-process run sees no change at all.  No state, no locks.
 */
#include "ranks.h"
#include "snap_build.h" /* tdm__grow_array */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int push_path(tdm_rank_paths *p, size_t *cap, char *path)
{
    if (!path)
        return -1;
    if (tdm__grow_array(&p->paths, cap, p->count + 1, sizeof *p->paths) != 0) {
        free(path);
        return -1;
    }
    p->paths[p->count++] = path;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_snapshot_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".tdm") == 0;
}

/* Appends the .tdm files of directory `dir`, in name order.  Returns a
 * TDM_EXIT_* code. */
static int expand_dir(const char *cmd, const char *dir, tdm_rank_paths *out, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, dir, strerror(errno));
        return TDM_EXIT_BAD_INPUT;
    }
    size_t first = out->count, dlen = strlen(dir);
    int slash = dlen && dir[dlen - 1] == '/';
    struct dirent *e;
    int rc = TDM_EXIT_OK;
    while ((e = readdir(d)) != NULL) {
        if (!is_snapshot_name(e->d_name))
            continue;
        size_t len = dlen + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (path)
            snprintf(path, len, "%s%s%s", dir, slash ? "" : "/", e->d_name);
        struct stat st;
        if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            free(path); /* a folder named x.tdm is not a snapshot */
            continue;
        }
        if (push_path(out, cap, path) != 0) {
            rc = TDM_EXIT_TOOL_ERROR;
            break;
        }
    }
    closedir(d);
    if (rc != TDM_EXIT_OK)
        return rc;
    if (out->count == first) {
        fprintf(stderr, "tidemark %s: %s: no .tdm snapshot in this directory\n", cmd, dir);
        return TDM_EXIT_BAD_INPUT;
    }
    qsort(out->paths + first, out->count - first, sizeof *out->paths, by_name);
    return TDM_EXIT_OK;
}

int tdm__ranks_expand(const char *cmd, char *const *args, size_t n, tdm_rank_paths *out)
{
    size_t cap = 0;
    int rc = TDM_EXIT_OK;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        int one;
        /* Anything but a directory goes through as given: the reader
         * reports a missing or unreadable file the usual way. */
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode))
            one = expand_dir(cmd, args[i], out, &cap);
        else
            one = push_path(out, &cap, strdup(args[i])) ? TDM_EXIT_TOOL_ERROR : TDM_EXIT_OK;
        if (one == TDM_EXIT_TOOL_ERROR) {
            fprintf(stderr, "tidemark %s: %s\n", cmd, tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
            tdm__ranks_paths_free(out);
            return one;
        }
        rc = tdm__exit_worse(rc, one);
    }
    return rc;
}

void tdm__ranks_paths_free(tdm_rank_paths *p)
{
    for (size_t i = 0; i < p->count; i++)
        free(p->paths[i]);
    free(p->paths);
    memset(p, 0, sizeof *p);
}

int64_t tdm__ranks_key(const tdm_snap_header *h)
{
    return h && h->rank >= 0 ? (int64_t)h->rank : INT64_MAX;
}

/* Ranked inputs by rank, then the others (unranked or unreadable); ties
 * in the given order. */
typedef struct order {
    int64_t key;
    size_t index;
} order;

static int by_rank(const void *pa, const void *pb)
{
    const order *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

tdm_status tdm__ranks_sort_inputs(tdm_input *inputs, size_t n)
{
    if (n < 2)
        return TDM_OK;
    order *o = malloc(n * sizeof *o);
    tdm_input *copy = malloc(n * sizeof *copy);
    if (!o || !copy) {
        free(o);
        free(copy);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        o[i].key = tdm__ranks_key(inputs[i].snap ? &inputs[i].snap->header : NULL);
        o[i].index = i;
    }
    qsort(o, n, sizeof *o, by_rank); /* the index tie-break makes it stable */
    memcpy(copy, inputs, n * sizeof *copy);
    for (size_t i = 0; i < n; i++)
        inputs[i] = copy[o[i].index];
    free(copy);
    free(o);
    return TDM_OK;
}

const char *tdm__ranks_label(char *buf, size_t len, const tdm_snap *snap)
{
    if (!len)
        return buf;
    buf[0] = '\0';
    if (!snap || snap->header.rank < 0)
        return buf;
    const char *host = snap->header.host && snap->header.host[0] ? snap->header.host : "?";
    snprintf(buf, len, "rank %d on %s", (int)snap->header.rank, host);
    return buf;
}

const char *tdm__ranks_format_list(char *buf, size_t len, const int32_t *v, size_t n)
{
    size_t used = 0;
    if (!len)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        char part[32];
        if (j == i)
            snprintf(part, sizeof part, "%s%d", i ? "," : "", (int)v[i]);
        else
            snprintf(part, sizeof part, "%s%d-%d", i ? "," : "", (int)v[i], (int)v[j]);
        size_t plen = strlen(part);
        if (used + plen + 4 >= len) { /* room for "..." and the NUL */
            if (len - used >= 4) /* always so after a first part */
                memcpy(buf + used, "...", 4);
            return buf;
        }
        memcpy(buf + used, part, plen + 1);
        used += plen;
        i = j + 1;
    }
    return buf;
}
