/* viewer-export/cli/cli_common.c: what the commands' option parsing and
 * output share (cli.h): usage errors, unknown options, making the folders
 * of an output path, flushing stdout.  Reading the files a command is
 * given is import/load.c's.  No state, no locks. */
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

int tdm__cli_flush(const char *cmd, int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tidemark %s: cannot write the output\n", cmd);
        rc = tdm__exit_worse(rc, TDM_EXIT_TOOL_ERROR);
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

