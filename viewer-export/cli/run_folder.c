/* viewer-export/cli/run_folder.c: `tidemark run`'s output folder: the
 * files a run finds there before it starts, the ones it wrote, making the
 * folder (and a subfolder of its own when an earlier run is there), and
 * what it says of PyTorch histories left with no snapshot. */
#define _GNU_SOURCE
#include "run_folder.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && name[0] != '.' && strcmp(name + n - k, suffix) == 0;
}

static int is_tdm(const char *name) { return ends_with(name, ".tdm"); }

#define TORCH_HISTORY_SUFFIX ".torch.pickle"

/* A file a run writes: a snapshot, or PyTorch's history beside one. */
static int is_run_file(const char *name)
{
    return is_tdm(name) || ends_with(name, TORCH_HISTORY_SUFFIX);
}

/* The run files already in `dir` (so they are not taken for ours). */
int tdm__run_list_old(const char *dir, old_file **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) {
        if (!is_run_file(e->d_name) || fstatat(dirfd(d), e->d_name, &st, 0) != 0)
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            old_file *grown = realloc(*out, cap * sizeof *grown);
            if (!grown)
                goto oom;
            *out = grown;
        }
        old_file *f = &(*out)[*count];
        if (!(f->name = strdup(e->d_name)))
            goto oom;
        f->ino = st.st_ino;
        f->mtime = st.st_mtim;
        (*count)++;
    }
    closedir(d);
    return 0;
oom:
    closedir(d);
    return -1;
}

static int is_old(const old_file *old, size_t n, const char *name, const struct stat *st)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(old[i].name, name) == 0)
            return old[i].ino == st->st_ino && old[i].mtime.tv_sec == st->st_mtim.tv_sec &&
                   old[i].mtime.tv_nsec == st->st_mtim.tv_nsec;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files ending in `suffix` that this run wrote in `dir`, sorted; -1
 * when `dir` cannot be read or on allocation failure. */
int tdm__run_list_new(const char *dir, const old_file *old, size_t nold, const char *suffix,
                    char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 0;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, suffix) || fstatat(dirfd(d), e->d_name, &st, 0) != 0 ||
            !S_ISREG(st.st_mode) || is_old(old, nold, e->d_name, &st))
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(*out, cap * sizeof *grown);
            if (!grown)
                goto oom;
            *out = grown;
        }
        if (asprintf(&(*out)[*count], "%s/%s", dir, e->d_name) < 0)
            goto oom;
        (*count)++;
    }
    closedir(d);
    if (*count) /* qsort wants an array, even for no elements */
        qsort(*out, *count, sizeof **out, name_cmp);
    return 0;
oom:
    closedir(d);
    return -1;
}

int tdm__run_make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* The folder already holds an earlier run's snapshots: this run gets a
 * subfolder of its own, DIR/run-2, run-3, ... (the first one free), so
 * that the folder keeps reading as that run (one snapshot, or the ranks
 * of one job) and this one's files are never mixed in.  Said on one
 * line.  -1 after printing why it cannot be made. */
int tdm__run_own_subfolder(run_state *r)
{
    char sub[PATH_MAX];
    for (unsigned k = 2; k < 100000; k++) {
        if (snprintf(sub, sizeof sub, "%s/run-%u", r->dir, k) >= (int)sizeof sub) {
            errno = ENAMETOOLONG;
            break;
        }
        if (mkdir(sub, 0777) == 0) {
            fprintf(stderr, "tidemark run: %s holds an earlier run; this run's snapshots go "
                            "into %s\n", r->dir, sub);
            memcpy(r->dir, sub, strlen(sub) + 1);
            for (size_t i = 0; i < r->nold; i++)
                free(r->old[i].name);
            r->nold = 0; /* (a new folder has no old files) */
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    fprintf(stderr, "tidemark run: %s holds an earlier run, and no folder of this run's own "
                    "can be made in it: %s\n", r->dir, strerror(errno));
    return -1;
}

/* PyTorch histories with no snapshot to go into: processes that started
 * CUDA through PyTorch and allocated nothing (torch.compile's workers
 * inherit the preload), or whose snapshot was not written.  Said, not
 * merged: each is a file `summary` and `view` read as it is.  Said under
 * -q too: -q leaves out summaries, not files left in the folder. */
void tdm__run_note_lone_histories(const run_state *r)
{
    char **lone = NULL;
    size_t n = 0;
    if (tdm__run_list_new(r->dir, r->old, r->nold, TORCH_HISTORY_SUFFIX, &lone, &n) == 0 && n)
        fprintf(stderr,
                "tidemark run: %zu PyTorch histor%s without a snapshot of %s own, left as "
                "%s: %s%s (`tidemark summary FILE` reads one)\n",
                n, n == 1 ? "y" : "ies", n == 1 ? "its" : "their", n == 1 ? "it is" : "they are",
                lone[0], n > 1 ? ", ..." : "");
    for (size_t i = 0; i < n; i++)
        free(lone[i]);
    free(lone);
}

