/* viewer-export/cli/cli_common.c: what the commands' output shares
 * (cli.h): usage errors, making the folders of an output path, flushing
 * stdout.  Refusing an unknown option is cli_options.c's; reading the
 * files a command is given is import/load.c's.  No state, no locks. */
#include "cli.h"
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int tdm__cli_flush(const char *cmd, int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        /* The cause (no space left, a closed pipe), not just "failed". */
        int e = errno ? errno : tdm__cli_stdout_error();
        fprintf(stderr, "tidemark %s: cannot write the standard output: %s\n", cmd,
                e ? strerror(e) : "write error");
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
