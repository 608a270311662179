/* viewer-export/cli/cli_commands.c: the command table of the `tidemark`
 * tool: each command's name, its line in `tidemark --help`, its entry
 * point and spec (options and help, in its cmd_*.c), whether it shows
 * stacks (and so takes the stack options, cli_stacks.c) and whether its
 * standard output is text only (filtered for terminal escapes,
 * cli_stderr.c).  No state, no locks. */
#include "cli.h"

#include <string.h>

/* name, brief, entry point, spec, shows_stacks, text_stdout */
const tdm_cli_command tdm__cli_commands[] = {
    {"summary", "peak memory, when it happened, and the sites that held it",
     tdm__cli_summary, &tdm__cli_summary_spec, 1, 1},
    {"categories", "bytes per kind of memory (parameters, gradients, ...) over time",
     tdm__cli_categories, &tdm__cli_categories_spec, 1, 1},
    {"export", "write a snapshot for another tool (pytorch memory_viz, ...)",
     tdm__cli_export, &tdm__cli_export_spec, 1, 0},
    /* import, merge-torch and recover write stacks as they read them. */
    {"import", "turn another tool's file (PyTorch snapshot pickle, ...) into a .tdm",
     tdm__cli_import, &tdm__cli_import_spec, 0, 0},
    {"merge-torch", "merge PyTorch's tensor history (NAME.torch.pickle) into its run's .tdm",
     tdm__cli_merge_torch, &tdm__cli_merge_torch_spec, 0, 0},
    {"recover", "a snapshot from the spill file of a killed or crashed program",
     tdm__cli_recover, &tdm__cli_recover_spec, 0, 1},
    /* top shows its sites with the default stack display: no stack options. */
    {"top", "live view of recording programs: memory by device, category, site",
     tdm__cli_top, &tdm__cli_top_spec, 0, 0},
    {"view", "one offline HTML page to explore a snapshot (or two side by side)",
     tdm__cli_view, &tdm__cli_view_spec, 1, 0},
    {"run", "run a command recording its device memory; summary and gates",
     tdm__cli_run, &tdm__cli_run_spec, 1, 1},
    {"gate", "check memory limits on snapshots, for CI (exit 3 when one fails)",
     tdm__cli_gate, &tdm__cli_gate_spec, 1, 1},
    {"diff", "what changed between two snapshots: peak, categories, sites",
     tdm__cli_diff, &tdm__cli_diff_spec, 1, 1},
    /* replay shows no stacks: figures per allocator setting. */
    {"replay", "would the run fit under other allocator settings? (no rerun)",
     tdm__cli_replay, &tdm__cli_replay_spec, 0, 1},
};
const size_t tdm__cli_command_count = sizeof tdm__cli_commands / sizeof tdm__cli_commands[0];

const tdm_cli_command *tdm__cli_command_find(const char *name)
{
    for (size_t i = 0; i < tdm__cli_command_count; i++)
        if (strcmp(tdm__cli_commands[i].name, name) == 0)
            return &tdm__cli_commands[i];
    return NULL;
}

void tdm__cli_command_help(const tdm_cli_command *cmd, FILE *out)
{
    const tdm_cli_spec *s = cmd->spec;
    fputs(s->usage, out);
    tdm__cli_options_help(out, &s->options);
    if (s->after)
        fputs(s->after, out);
    if (s->more)
        s->more(out);
    if (cmd->shows_stacks) {
        fputc('\n', out);
        tdm__cli_options_help(out, &tdm__cli_stack_options);
    }
}
