/* viewer-export/cli/cli_output.c: where the commands' output files go and
 * how they get there (cli.h, "output files"): -o naming a directory, the
 * refusal to replace an existing file without --force, and the move of a
 * finished temporary file into place that keeps that promise even when
 * another process creates the file meanwhile.  No state, no locks. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tdm__cli_output_check(const char *cmd, const char *path, int force, int named)
{
    struct stat st;
    if (strcmp(path, "-") == 0) {
        /* export alone streams; elsewhere "-" would be a file named "-". */
        fprintf(stderr, "tidemark %s: cannot write to standard output ('-o -'); name a file\n",
                cmd);
        return TDM_EXIT_USAGE;
    }
    int kind = tdm__out_target_check(path);
    if (kind) {
        fprintf(stderr, "tidemark %s: cannot write %s: %s\n", cmd, path,
                tdm__out_strerror(kind));
        return TDM_EXIT_USAGE;
    }
    if (force || lstat(path, &st) != 0)
        return TDM_EXIT_OK;
    fprintf(stderr, "tidemark %s: %s exists; use %s to replace it\n", cmd, path,
            named ? "--force" : "-o to choose another name or --force");
    return TDM_EXIT_USAGE;
}

int tdm__cli_output_choose(const char *cmd, const char *out_opt, const char *def, int force,
                           char **path)
{
    *path = !def ? NULL : out_opt ? tdm__cli_output_path(out_opt, def) : strdup(def);
    if (!*path) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    return tdm__cli_output_check(cmd, *path, force, out_opt != NULL);
}

FILE *tdm__cli_output_open(const char *cmd, const char *path, tdm__out_file *o)
{
    int e = tdm__out_open(o, path);
    if (e) {
        fprintf(stderr, "tidemark %s: cannot write %s: %s\n", cmd, path, tdm__out_strerror(e));
        return NULL;
    }
    /* The stream gets its own descriptor: closing it leaves o->fd for the
     * fsync and the move. */
    int fd = dup(o->fd);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        e = errno;
        if (fd >= 0)
            close(fd);
        tdm__out_discard(o);
        fprintf(stderr, "tidemark %s: cannot write %s: %s\n", cmd, path, tdm__out_strerror(e));
    }
    return f;
}

int tdm__cli_output_finish(tdm__out_file *o, FILE *f, int ok, int force)
{
    int e = 0;
    if (fflush(f) != 0 || ferror(f))
        e = errno ? errno : EIO;
    if (fclose(f) != 0 && !e)
        e = errno ? errno : EIO;
    if (!ok || e) {
        tdm__out_discard(o);
        return ok ? e : -1;
    }
    return tdm__out_commit(o, force);
}

int tdm__cli_has_tdm_signature(const char *path)
{
    static const unsigned char sig[TDM_SNAP_SIGNATURE_LEN] = TDM_SNAP_SIGNATURE;
    unsigned char head[sizeof sig];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return n == sizeof head && memcmp(head, sig, sizeof head) == 0;
}

const char *tdm__cli_input_name(const char *operand)
{
    return strcmp(operand, "-") == 0 ? "stdin" : operand;
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
