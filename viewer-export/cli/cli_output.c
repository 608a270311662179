/* viewer-export/cli/cli_output.c: where the commands' output files go and
 * how they get there (cli.h, "output files"): -o naming a directory, the
 * refusal to replace an existing file without --force, and the move of a
 * finished temporary file into place that keeps that promise even when
 * another process creates the file meanwhile.  No state, no locks. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tdm__cli_output_check(const char *cmd, const char *path, int force, int named)
{
    struct stat st;
    if (force || lstat(path, &st) != 0)
        return TDM_EXIT_OK;
    fprintf(stderr, "tidemark %s: %s exists; use %s to replace it\n", cmd, path,
            named ? "--force" : "-o to choose another name or --force");
    return TDM_EXIT_USAGE;
}

int tdm__cli_output_commit(const char *tmp, const char *path, int force)
{
    if (force)
        return rename(tmp, path) == 0 ? 0 : errno;
    /* link(2) fails with EEXIST rather than replace anything. */
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    int e = errno;
    if (e != EPERM && e != EOPNOTSUPP && e != ENOTSUP && e != ENOSYS && e != EMLINK)
        return e;
    /* A file system without hard links (FAT, some network and FUSE ones). */
    struct stat st;
    if (lstat(path, &st) == 0)
        return EEXIST;
    return rename(tmp, path) == 0 ? 0 : errno;
}

int tdm__cli_is_dir_target(const char *o)
{
    size_t n = strlen(o);
    struct stat st;
    return (n && o[n - 1] == '/') || (stat(o, &st) == 0 && S_ISDIR(st.st_mode));
}

char *tdm__cli_output_path(const char *o, const char *def)
{
    if (!tdm__cli_is_dir_target(o))
        return strdup(o);
    const char *base = strrchr(def, '/');
    base = base ? base + 1 : def;
    size_t n = strlen(o), b = strlen(base);
    int slash = n && o[n - 1] == '/';
    char *out = malloc(n + b + 2);
    if (out) {
        memcpy(out, o, n);
        if (!slash)
            out[n++] = '/';
        memcpy(out + n, base, b + 1);
    }
    return out;
}
