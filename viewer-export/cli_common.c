/* viewer-export/cli_common.c: reading a snapshot the way every `tidemark`
 * command does, so that the same file gives the same diagnostics and the
 * same exit code whichever command reads it; and the usage errors the
 * commands' option parsing shares.
 *
 * A truncated file is read up to its last whole record and the command
 * goes on with that, after one warning naming the byte offset; its exit
 * code is still TDM_EXIT_BAD_INPUT so that scripts notice.  No state. */
#include "cli.h"

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

int tdm__cli_read_snapshot(const char *cmd, const char *path, tdm_snap **snap,
                           int *truncated, uint64_t *truncated_at)
{
    *snap = NULL;
    *truncated = 0;
    *truncated_at = 0;
    int rc = tdm__cli_check_file(cmd, path);
    if (rc != TDM_EXIT_OK)
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
