/* viewer-export/cli/cli_main.c: the `tidemark` command-line tool's entry
 * point: global options (--help, --version), `help COMMAND`, and dispatch
 * to the commands of the command table (cli_commands.c).  Each command
 * lives in its own file of tdm_viewer and parses its options by its own
 * table (cli_options.h).
 *
 * Exit codes (cli.h, docs/cli.md): 0 ok, 1 usage, 2 bad input, 3 gate
 * failed, 4 tool error.  No state, no locks. */
#include "cli.h"
#include "common.h"

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tidemark: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'tidemark --help'.\n", stderr);
    return TDM_EXIT_USAGE;
}

/* "unknown command 'summry' (did you mean 'summary'?)". */
static int unknown_command(const char *name)
{
    const char *names[32];
    size_t n = 0;
    for (; n < tdm__cli_command_count && n + 1 < sizeof names / sizeof names[0]; n++)
        names[n] = tdm__cli_commands[n].name;
    names[n++] = "help";
    /* The start of one name ("sum"): that one, before the nearest. */
    const char *near = NULL;
    size_t len = strlen(name), starts = 0;
    for (size_t i = 0; len >= 2 && i < n; i++)
        if (strncmp(names[i], name, len) == 0)
            near = starts++ ? NULL : names[i];
    if (starts != 1)
        near = tdm__did_you_mean(name, names, n);
    if (near)
        return usage_error("unknown command '%s' (did you mean '%s'?)", name, near);
    return usage_error("unknown command '%s'", name);
}

static void print_version(void)
{
    printf("tidemark %s (format %d)\n", TDM_VERSION_STRING, TDM_FORMAT_VERSION);
}

static void print_help(FILE *out)
{
    fputs("usage: tidemark COMMAND [OPTIONS] [ARGS]\n"
          "       tidemark help COMMAND\n"
          "       tidemark --version\n"
          "\n"
          "Reads .tdm snapshots of a program's device-memory history.\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < tdm__cli_command_count; i++)
        fprintf(out, "  %-10s %s\n", tdm__cli_commands[i].name, tdm__cli_commands[i].brief);
    fputs("\n"
          "exit codes: 0 ok, 1 usage error, 2 missing/unreadable/corrupt/truncated\n"
          "input, 3 a gate failed, 4 internal error, 5 nothing measured (gate, run).\n"
          "See docs/cli.md.\n",
          out);
}

int main(int argc, char **argv)
{
    tdm__cli_safe_stderr();
    if (argc < 2) {
        print_help(stderr);
        return TDM_EXIT_USAGE;
    }
    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        print_help(stdout);
        return TDM_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
        print_version();
        return TDM_EXIT_OK;
    }
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            print_help(stdout);
            return TDM_EXIT_OK;
        }
        if (argc > 3)
            return usage_error("'help' takes one command name, got '%s' too", argv[3]);
        const tdm_cli_command *cmd = tdm__cli_command_find(argv[2]);
        if (!cmd)
            return unknown_command(argv[2]);
        tdm__cli_command_help(cmd, stdout);
        return TDM_EXIT_OK;
    }
    if (first[0] == '-') {
        static const char *const globals[] = {"help", "version"};
        const char *near = strncmp(first, "--", 2) == 0 ? tdm__did_you_mean(first + 2, globals, 2)
                                                        : NULL;
        if (near)
            return usage_error("unknown option '%s' (did you mean '--%s'?)", first, near);
        return usage_error("unknown option '%s'", first);
    }
    const tdm_cli_command *cmd = tdm__cli_command_find(first);
    if (!cmd)
        return unknown_command(first);
    if (cmd->text_stdout)
        tdm__cli_safe_stdout();
    return cmd->run(argc - 1, argv + 1);
}
