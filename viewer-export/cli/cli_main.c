/* viewer-export/cli/cli_main.c: the `tidemark` command-line tool's entry
 * point: global options (--help, --version), `help COMMAND`, and dispatch
 * to the commands in the table below.  Each command lives in its own file
 * of tdm_viewer and parses its own options.
 *
 * Exit codes (cli.h, docs/cli.md): 0 ok, 1 usage, 2 bad input, 3 gate
 * failed, 4 tool error.  No state, no locks. */
#include "cli.h"
#include "common.h"

#include <stdarg.h>
#include <string.h>

static const tdm_cli_command commands[] = {
    {"summary", "peak memory, when it happened, and the sites that held it",
     tdm__cli_summary, tdm__cli_summary_help},
    {"categories", "bytes per kind of memory (parameters, gradients, ...) over time",
     tdm__cli_categories, tdm__cli_categories_help},
    {"export", "write a snapshot for another tool (pytorch memory_viz, ...)",
     tdm__cli_export, tdm__cli_export_help},
    {"import", "turn another tool's file (PyTorch snapshot pickle, ...) into a .tdm",
     tdm__cli_import, tdm__cli_import_help},
    {"merge-torch", "merge PyTorch's tensor history (NAME.torch.pickle) into its run's .tdm",
     tdm__cli_merge_torch, tdm__cli_merge_torch_help},
    {"recover", "a snapshot from the spill file of a killed or crashed program",
     tdm__cli_recover, tdm__cli_recover_help},
    {"top", "live view of recording programs: memory by device, category, site",
     tdm__cli_top, tdm__cli_top_help},
    {"view", "one offline HTML page to explore a snapshot (or two side by side)",
     tdm__cli_view, tdm__cli_view_help},
    {"run", "run a command recording its device memory; summary and gates",
     tdm__cli_run, tdm__cli_run_help},
    {"gate", "check memory limits on snapshots, for CI (exit 3 when one fails)",
     tdm__cli_gate, tdm__cli_gate_help},
    {"diff", "what changed between two snapshots: peak, categories, sites",
     tdm__cli_diff, tdm__cli_diff_help},
    {"replay", "would the run fit under other allocator settings? (no rerun)",
     tdm__cli_replay, tdm__cli_replay_help},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

/* Every command but import, merge-torch, recover, replay and top shows stacks (they
 * write them as read): they take the stack options (cli_stacks.c). */
static int shows_stacks(const tdm_cli_command *cmd)
{
    return strcmp(cmd->name, "import") != 0 && strcmp(cmd->name, "merge-torch") != 0 &&
           strcmp(cmd->name, "recover") != 0 && strcmp(cmd->name, "replay") != 0 &&
           strcmp(cmd->name, "top") != 0;
}

static const tdm_cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

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
    const char *names[COMMAND_COUNT + 1];
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        names[i] = commands[i].name;
    names[COMMAND_COUNT] = "help";
    /* The start of one name ("sum"): that one, before the nearest. */
    const char *near = NULL;
    size_t len = strlen(name), starts = 0;
    for (size_t i = 0; len >= 2 && i < COMMAND_COUNT + 1; i++)
        if (strncmp(names[i], name, len) == 0)
            near = starts++ ? NULL : names[i];
    if (starts != 1)
        near = tdm__did_you_mean(name, names, COMMAND_COUNT + 1);
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
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].brief);
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
        const tdm_cli_command *cmd = find_command(argv[2]);
        if (!cmd)
            return unknown_command(argv[2]);
        cmd->help(stdout);
        if (shows_stacks(cmd)) {
            fputc('\n', stdout);
            tdm__cli_stack_options_help(stdout);
        }
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
    const tdm_cli_command *cmd = find_command(first);
    if (!cmd)
        return unknown_command(first);
    static const char *const text_out[] = {"summary", "categories", "diff", "gate",
                                           "replay", "recover", "run"};
    for (size_t i = 0; i < sizeof text_out / sizeof text_out[0]; i++)
        if (strcmp(cmd->name, text_out[i]) == 0)
            tdm__cli_safe_stdout();
    if (!shows_stacks(cmd))
        return cmd->run(argc - 1, argv + 1);
    int n = argc - 1, rc = tdm__cli_stack_options(cmd->name, &n, argv + 1);
    if (rc != TDM_EXIT_OK)
        return rc;
    int help = 0;
    for (int i = 2; i <= n && strcmp(argv[i], "--") != 0; i++)
        help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    rc = cmd->run(n, argv + 1);
    if (help && rc == TDM_EXIT_OK) { /* the command printed its own help */
        fputc('\n', stdout);
        tdm__cli_stack_options_help(stdout);
    }
    return rc;
}
