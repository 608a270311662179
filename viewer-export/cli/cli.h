/* viewer-export/cli/cli.h: what the `tidemark` command-line tool's commands
 * share: the command table entry, usage errors, output, and each
 * command's entry point.
 *
 * Commands print their results on stdout and every diagnostic on stderr,
 * one line each, prefixed "tidemark CMD: ".  No state, no locks.
 *
 * cli/ is the top of viewer-export/: the command table (cli_commands.c),
 * argument parsing by each command's option table (cli_options.h), and
 * one cmd_*.c per command, nothing else.  It may include every other subfolder (gate/,
 * view/, export/, import/, model/); nothing includes it. */
#ifndef TDM_VIEWER_CLI_H
#define TDM_VIEWER_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "cli_options.h"
#include "format_file.h"
#include "input.h"

/* A command: the row of the command table (cli_commands.c). */
typedef struct tdm_cli_command {
    const char *name;
    const char *brief;                 /* one line for `tidemark --help` */
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    const tdm_cli_spec *spec;          /* its options and help (its cmd_*.c) */
    int shows_stacks; /* takes the stack options (cli_stacks.c), and its help lists them */
    int text_stdout;  /* writes only text on stdout: filtered (tdm__cli_safe_stdout) */
} tdm_cli_command;

extern const tdm_cli_command tdm__cli_commands[];
extern const size_t tdm__cli_command_count;
/* The command called `name`, or NULL. */
const tdm_cli_command *tdm__cli_command_find(const char *name);
/* `tidemark help NAME` and `NAME --help`: the spec's text and options,
 * then the stack options when the command shows stacks. */
void tdm__cli_command_help(const tdm_cli_command *cmd, FILE *out);

/* Creates the missing folders on the way to output `path` (everything
 * before its last '/'; for "DIR/" that is DIR itself), as `mkdir -p`
 * would: TDM_EXIT_OK, or TDM_EXIT_TOOL_ERROR after saying which folder
 * could not be made and why. */
int tdm__cli_make_parents(const char *cmd, const char *path);
/* ---- output files (cli_output.c) ------------------------------------------
 * A command never replaces an existing file without --force, whether it
 * chose the output's name itself or -o named it, and never replaces
 * anything but a regular file; outputs are written to a temporary file
 * beside them and moved into place only when complete. */

/* TDM_EXIT_OK when a command may write `path` (nothing is there, or
 * `force` and a regular file is); a symbolic link, FIFO, device or
 * folder gets "tidemark CMD: cannot write PATH: it is a ..." and
 * TDM_EXIT_USAGE, whatever `force`; else prints "tidemark CMD: PATH exists; use -o to choose
 * another name or --force to replace it" (`named` 0: the command chose the
 * name) or "tidemark CMD: PATH exists; use --force to replace it" (`named`:
 * -o gave it) and returns TDM_EXIT_USAGE. */
int tdm__cli_output_check(const char *cmd, const char *path, int force, int named);
/* Opens the temporary file for output `path` (format_file.h: mode 0600 or
 * file_mode=, never over a link, FIFO, device or folder, SIGXFSZ held):
 * the stream to write, or NULL after saying why. */
FILE *tdm__cli_output_open(const char *cmd, const char *path, tdm__out_file *o);
/* Closes `f` and, when `ok` and every write went well, moves the
 * temporary to its path: over a regular file when `force`, else only
 * where nothing is (link(2); a check then rename(2) where the file system
 * has no hard links).  Returns 0; -1 when !ok (the temporary removed); or
 * an errno value / TDM__OUT_* code (tdm__out_strerror): EEXIST when the
 * path appeared meanwhile. */
int tdm__cli_output_finish(tdm__out_file *o, FILE *f, int ok, int force);
/* Nonzero when the file at `path` begins with a .tdm snapshot's signature. */
int tdm__cli_has_tdm_signature(const char *path);
/* The name an input operand gives the files made from it without -o:
 * "stdin" for `-` (standard input), else the operand. */
const char *tdm__cli_input_name(const char *operand);
/* Nonzero when -o `o` names a directory: it ends with '/' or is one. */
int tdm__cli_is_dir_target(const char *o);
/* The output -o `o` stands for when the command's default name would be
 * `def`: `def`'s last component inside `o` when `o` names a directory,
 * else `o` itself; malloc'd, NULL when out of memory. */
char *tdm__cli_output_path(const char *o, const char *def);
/* The one output of a command: -o `out_opt` (tdm__cli_output_path) if
 * given, else the default name `def` (NULL: it could not be made, out of
 * memory), checked by tdm__cli_output_check.  Sets *path (malloc'd, or
 * NULL) and returns TDM_EXIT_OK or the exit code, having said why. */
int tdm__cli_output_choose(const char *cmd, const char *out_opt, const char *def, int force,
                           char **path);

/* Prints "tidemark CMD: " and the message, then where help is; returns
 * TDM_EXIT_USAGE. */
__attribute__((format(printf, 2, 3)))
int tdm__cli_usage(const char *cmd, const char *fmt, ...);

/* A command's last step: flushes stdout and returns rc, or
 * TDM_EXIT_TOOL_ERROR after saying so when the output could not be
 * written. */
int tdm__cli_flush(const char *cmd, int rc);

/* ---- stack options (cli_stacks.c) -----------------------------------------
 * --raw-names, --hide REGEX, --focus REGEX, --keep-wrappers,
 * --native-frames: how stacks are shown, for every command that shows
 * them (model/stack_display.h).  Their rows join a command's own in its
 * parse (cli_options.c), which calls these. */

extern const tdm_cli_options tdm__cli_stack_options;
/* A parse of `argc` words begins: no stack option given yet.
 * TDM_EXIT_OK, or TDM_EXIT_TOOL_ERROR after saying so. */
int tdm__cli_stack_begin(const char *cmd, int argc);
/* 1 when `code` is a stack option's (then taken, with `value`), else 0. */
int tdm__cli_stack_take(int code, const char *value);
/* Sets the options taken for every snapshot read afterwards:
 * TDM_EXIT_OK, or TDM_EXIT_USAGE after saying what is wrong (a bad
 * regular expression). */
int tdm__cli_stack_apply(const char *cmd);

/* ---- the gates' options (cli_gate_options.c), of `gate` and `run` ----- */

extern const tdm_cli_options tdm__cli_gate_options;

/* ---- summary ------------------------------------------------------------ */

int tdm__cli_summary(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_summary_spec;

/* ---- replay (cmd_replay.c) ---------------------------------------------- */

int tdm__cli_replay(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_replay_spec;

/* ---- categories (cmd_categories.c) --------------------------------------- */

int tdm__cli_categories(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_categories_spec;

/* ---- export and import (cmd_export.c, cmd_import.c) -------------------
 * Formats come from the tables in export_formats.c / import_formats.c. */

int tdm__cli_export(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_export_spec;
int tdm__cli_import(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_import_spec;
int tdm__cli_recover(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_recover_spec;
/* `tidemark recover` as one call (cmd_recover.c; `tidemark run` calls it
 * for what its killed processes left): the spill file `input` read and
 * checked, its snapshot made (import/recover.h) and written to `out_path`
 * (its folders made; an existing file replaced only with `force`).
 * Diagnostics on stderr as "tidemark CMD: ..."; the "wrote" line on
 * `said` unless NULL; *events (may be NULL) the events kept.  A
 * TDM_EXIT_* code. */
int tdm__recover_file(const char *cmd, const char *input, const char *out_path, int force,
                      FILE *said, size_t *events);

/* ---- top (cmd_top.c; top.h): live view of recording processes -------- */

int tdm__cli_top(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_top_spec;

/* ---- merge-torch (cmd_merge.c): PyTorch's tensor history into a .tdm -- */

int tdm__cli_merge_torch(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_merge_torch_spec;
/* Merges FILE.torch.pickle into `tdm_path` in place when the pickle is
 * there: 0 nothing to merge, 1 merged (or the pickle, which recorded
 * nothing, removed), -1 failed (said on stderr, as "tidemark CMD: ...",
 * the snapshot left as it was). */
int tdm__cli_merge_torch_beside(const char *cmd, const char *tdm_path, int quiet);

/* ---- view (cmd_view.c): the offline HTML viewer ------------------------ */

int tdm__cli_view(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_view_spec;

/* ---- CI gates (cmd_run.c, cmd_gate.c, cmd_diff.c; gate.h) -------------- */

int tdm__cli_run(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_run_spec;
int tdm__cli_gate(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_gate_spec;
int tdm__cli_diff(int argc, char **argv);
extern const tdm_cli_spec tdm__cli_diff_spec;

/* Makes stderr a stream that writes control characters (bytes below 0x20
 * but newline and tab, 0x7f, and UTF-8's C1 controls U+0080..U+009F) and
 * invalid UTF-8 as \xNN (format/common.h, tdm__escape_text), so that no message, whatever input text it quotes, sends terminal
 * escape sequences (cli_stderr.c).  Called once, first thing in main. */
void tdm__cli_safe_stderr(void);
/* The same filter on stdout (line buffered), for the commands whose
 * standard output is text only (the command table's text_stdout).  Invalid UTF-8 is escaped too (tdm__escape_text). */
void tdm__cli_safe_stdout(void);
/* The errno of the first write the stdout filter failed, else 0. */
int tdm__cli_stdout_error(void);

#endif
