/* viewer-export/cli/cli_common.c: what the commands' option parsing and
 * output share (cli.h): usage errors, unknown options, making the folders
 * of an output path, flushing stdout.  Reading the files a command is
 * given is import/load.c's.  No state, no locks. */
#include "cli.h"
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Prints the line for unknown long option `arg` ("--name" or
 * "--name=value"): the closest of `names` (given with their dashes, each
 * at most 63 bytes), or the ones it abbreviates when several do. */
static void unknown_long(const char *cmd, const char *arg, const char *const *names, size_t n)
{
    const char *word = arg + 2;
    size_t len = strcspn(word, "=");
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(len < 63 ? len : 63), word);
    const char *bare[64];
    size_t nb = 0, prefixed = 0;
    for (size_t i = 0; i < n && nb < 64; i++) {
        if (strncmp(names[i], "--", 2) != 0)
            continue;
        bare[nb] = names[i] + 2;
        prefixed += len && strncmp(bare[nb], word, len) == 0;
        nb++;
    }
    for (size_t i = 0; word[len] == '=' && i < nb; i++)
        if (strcmp(bare[i], key) == 0) {
            /* A known name, refused with a value: a flag (the parsers take
             * "--name=value" for every option that has one). */
            fprintf(stderr, "tidemark %s: option '--%s' takes no value\n", cmd, key);
            return;
        }
    if (prefixed > 1) { /* getopt_long takes a prefix of one name only */
        fprintf(stderr, "tidemark %s: option '--%s' is ambiguous (", cmd, key);
        const char *sep = "";
        for (size_t i = 0; i < nb; i++)
            if (strncmp(bare[i], word, len) == 0) {
                fprintf(stderr, "%s--%s", sep, bare[i]);
                sep = ", ";
            }
        fputs(")\n", stderr);
        return;
    }
    const char *near = tdm__did_you_mean(key, bare, nb);
    if (near)
        fprintf(stderr, "tidemark %s: unknown option '--%s' (did you mean '--%s'?)\n", cmd, key,
                near);
    else
        fprintf(stderr, "tidemark %s: unknown option '%s'\n", cmd, arg);
}

void tdm__cli_unknown_option(const char *cmd, const char *arg, const char *const *names,
                             size_t n)
{
    if (strncmp(arg, "--", 2) == 0 && arg[2])
        unknown_long(cmd, arg, names, n);
    else
        fprintf(stderr, "tidemark %s: unknown option '%s'\n", cmd, arg);
    fprintf(stderr, "Try 'tidemark help %s'.\n", cmd);
}

/* The option of `longopts` that long option `arg` ("--name=value") names,
 * as getopt_long finds it (the name, or the one name it abbreviates);
 * NULL for none or several. */
static const struct option *long_named(const char *arg, const struct option *longopts)
{
    const char *word = arg + 2;
    size_t len = strcspn(word, "=");
    const struct option *hit = NULL;
    for (const struct option *o = longopts; o && o->name; o++) {
        if (strncmp(o->name, word, len) != 0)
            continue;
        if (o->name[len] == '\0')
            return o; /* the whole name */
        if (hit)
            return NULL; /* ambiguous */
        hit = o;
    }
    return hit;
}

void tdm__cli_bad_option_in(const char *cmd, int c, char **argv,
                            const struct option *longopts)
{
    const char *arg = argv[optind - 1];
    int is_long = strncmp(arg, "--", 2) == 0 && arg[2];
    const struct option *named = is_long ? long_named(arg, longopts) : NULL;
    if (c == ':') {
        fprintf(stderr, "tidemark %s: option '%s' needs a value\n", cmd, arg);
    } else if (named && named->has_arg == no_argument && strchr(arg, '=')) {
        /* getopt_long's '?' for "--flag=value", with optopt the flag's
         * code (not a short option of the user's). */
        fprintf(stderr, "tidemark %s: option '--%s' takes no value\n", cmd, named->name);
    } else if (optopt && !is_long) {
        /* The word it came in: getopt is still inside it (argv[optind])
         * when more letters follow, past it when it was the last. */
        const char *word = argv[optind] && argv[optind][0] == '-' &&
                                   strchr(argv[optind] + 1, optopt)
                               ? argv[optind]
                               : arg;
        if (word[0] == '-' && word[1] == optopt && word[2] == '\0')
            fprintf(stderr, "tidemark %s: unknown option '-%c'\n", cmd, optopt);
        else
            fprintf(stderr, "tidemark %s: unknown option '-%c' in '%s'\n", cmd, optopt, word);
    } else if (longopts && is_long) {
        char names[64][66];
        const char *list[64];
        size_t n = 0;
        for (; longopts[n].name && n < 64; n++) {
            snprintf(names[n], sizeof names[n], "--%s", longopts[n].name);
            list[n] = names[n];
        }
        unknown_long(cmd, arg, list, n);
    } else {
        fprintf(stderr, "tidemark %s: unknown option '%s'\n", cmd, arg);
    }
}

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

int tdm__cli_write_option(const char *cmd, int argc, char **argv, int *i,
                          const char **out, int *force, int *quiet)
{
    const char *a = argv[*i];
    if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
        *quiet = 1;
    } else if (strcmp(a, "--force") == 0) {
        *force = 1;
    } else if (strncmp(a, "--output=", 9) == 0) {
        *out = a + 9;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
        if (*i + 1 >= argc) {
            tdm__cli_usage(cmd, "option '%s' needs a value", a);
            return -1;
        }
        *out = argv[++*i];
    } else {
        return 0;
    }
    return 1;
}
