/* viewer-export/cli_common.c: reading a snapshot the way every `tidemark`
 * command does, so that the same file gives the same diagnostics and the
 * same exit code whichever command reads it; and the usage errors the
 * commands' option parsing shares.
 *
 * A file whose first bytes are a format of the import table (a PyTorch
 * snapshot pickle, an RMM log, a trace CSV) is imported in memory, so
 * every command takes those as it takes .tdm files.  A truncated .tdm file
 * is read up to its last whole record and the command goes on with that,
 * after one warning naming the byte offset; its exit code is still
 * TDM_EXIT_BAD_INPUT so that scripts notice.
 *
 * State: the list of the snapshots imported and not yet freed, with the
 * free function of each (tdm__cli_snap_free); the commands are single
 * threaded. */
#include "cli.h"
#include "import_formats.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void tdm__cli_bad_option(const char *cmd, int c, char **argv)
{
    if (c == ':')
        fprintf(stderr, "tidemark %s: option '%s' needs a value\n", cmd, argv[optind - 1]);
    else if (optopt)
        fprintf(stderr, "tidemark %s: unknown option '-%c'\n", cmd, optopt);
    else
        fprintf(stderr, "tidemark %s: unknown option '%s'\n", cmd, argv[optind - 1]);
}

int tdm__cli_parse_count(const char *cmd, const char *opt, const char *arg,
                         unsigned long max, unsigned long *v)
{
    char *end;
    if (arg[0] < '0' || arg[0] > '9' || (*v = strtoul(arg, &end, 10), *end) || *v > max) {
        fprintf(stderr, "tidemark %s: %s needs a whole number up to %lu, not '%s'\n", cmd,
                opt, max, arg);
        return -1;
    }
    return 0;
}

int tdm__cli_flush(const char *cmd, int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tidemark %s: cannot write the output\n", cmd);
        rc = tdm__cli_worse(rc, TDM_EXIT_TOOL_ERROR);
    }
    return rc;
}

int tdm__cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tidemark %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'tidemark help %s'.\n", cmd);
    return TDM_EXIT_USAGE;
}

int tdm__cli_check_file(const char *cmd, const char *path)
{
    /* The readers say "input/output error"; the system says why. */
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, path, strerror(errno));
        return TDM_EXIT_BAD_INPUT;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tidemark %s: %s: is a directory\n", cmd, path);
        return TDM_EXIT_BAD_INPUT;
    }
    return TDM_EXIT_OK;
}

/* ---- imported snapshots ----------------------------------------------- */

typedef struct imported {
    tdm_snap *snap;
    void (*free)(tdm_snap *snap);
} imported;

static struct {
    imported *items;
    size_t n, cap;
} imports;

static int remember_import(tdm_snap *snap, void (*free_fn)(tdm_snap *))
{
    if (imports.n == imports.cap) {
        size_t cap = imports.cap ? 2 * imports.cap : 8;
        imported *grown = realloc(imports.items, cap * sizeof *grown);
        if (!grown)
            return -1;
        imports.items = grown;
        imports.cap = cap;
    }
    imports.items[imports.n++] = (imported){snap, free_fn};
    return 0;
}

void tdm__cli_snap_free(tdm_snap *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < imports.n; i++) {
        if (imports.items[i].snap == snap) {
            imports.items[i].free(snap);
            imports.items[i] = imports.items[--imports.n];
            if (imports.n == 0) {
                free(imports.items);
                imports.items = NULL;
                imports.cap = 0;
            }
            return;
        }
    }
    tdm__snap_free(snap);
}

/* Imports `path` in memory when its first bytes are a format of the
 * import table.  Returns -1 when none recognizes it (it is then read as a
 * .tdm file), else a TDM_EXIT_* code (*snap set only on TDM_EXIT_OK). */
static int try_import(const char *cmd, const char *path, tdm_snap **snap)
{
    unsigned char head[TDM_IMPORT_SNIFF_BYTES];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1; /* the .tdm reader says why, the same way everywhere */
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    const tdm_import_format *fmt = tdm__import_format_detect(head, n);
    if (!fmt)
        return -1;
    char err[320] = "";
    tdm_snap *got = NULL;
    tdm_status s = fmt->read(path, &got, err, sizeof err);
    if (s == TDM_OK && got) {
        if (remember_import(got, fmt->free) == 0) {
            *snap = got;
            return TDM_EXIT_OK;
        }
        s = TDM_HOST_OUT_OF_MEMORY;
    }
    if (got)
        fmt->free(got);
    fprintf(stderr, "tidemark %s: %s: %s (importing it as %s)%s%s\n", cmd, path,
            s == TDM_OK ? "import failed" : tdm_strerror(s), fmt->name, err[0] ? ": " : "",
            err);
    return s == TDM_HOST_OUT_OF_MEMORY || s == TDM_INTERNAL || s == TDM_OK
               ? TDM_EXIT_TOOL_ERROR
               : TDM_EXIT_BAD_INPUT;
}

int tdm__cli_make_parents(const char *cmd, const char *path)
{
    size_t n = strlen(path);
    char *dir = malloc(n + 1);
    if (!dir) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    memcpy(dir, path, n + 1);
    int rc = TDM_EXIT_OK;
    for (char *p = dir + 1; rc == TDM_EXIT_OK && *p; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "tidemark %s: cannot create the directory %s: %s\n", cmd, dir,
                    strerror(errno));
            rc = TDM_EXIT_TOOL_ERROR;
        }
        *p = '/';
    }
    free(dir);
    return rc;
}

int tdm__cli_read_snapshot(const char *cmd, const char *path, tdm_snap **snap,
                           int *truncated, uint64_t *truncated_at)
{
    *snap = NULL;
    *truncated = 0;
    *truncated_at = 0;
    int rc = tdm__cli_check_file(cmd, path);
    if (rc != TDM_EXIT_OK)
        return rc;
    rc = try_import(cmd, path, snap);
    if (rc >= 0)
        return rc;

    tdm_read_error err;
    memset(&err, 0, sizeof err);
    tdm_status s = tdm__snap_read_file(path, 1, snap, &err);
    if (s == TDM_HOST_OUT_OF_MEMORY || s == TDM_INTERNAL) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, path, tdm_strerror(s));
        return TDM_EXIT_TOOL_ERROR;
    }
    if (s != TDM_OK || !*snap) {
        if (err.message[0])
            fprintf(stderr, "tidemark %s: %s: %s at byte %" PRIu64 ": %s\n", cmd,
                    path, tdm_strerror(s), err.offset, err.message);
        else
            fprintf(stderr, "tidemark %s: %s: %s at byte %" PRIu64 "\n", cmd, path,
                    tdm_strerror(s), err.offset);
        if (*snap)
            tdm__snap_free(*snap);
        *snap = NULL;
        return TDM_EXIT_BAD_INPUT;
    }
    if ((*snap)->complete)
        return TDM_EXIT_OK;

    /* A partial read: the reader may or may not have filled `err`; a strict
     * second read always says where the file stops. */
    if (!err.message[0]) {
        tdm_snap *again = NULL;
        tdm__snap_read_file(path, 0, &again, &err);
        if (again)
            tdm__snap_free(again);
    }
    *truncated = 1;
    *truncated_at = err.offset;
    if (err.message[0])
        fprintf(stderr, "tidemark %s: warning: %s is truncated at byte %" PRIu64
                        " (%s); showing what could be read\n",
                cmd, path, err.offset, err.message);
    else
        fprintf(stderr, "tidemark %s: warning: %s is truncated at byte %" PRIu64
                        "; showing what could be read\n",
                cmd, path, err.offset);
    return TDM_EXIT_BAD_INPUT;
}
