/* viewer-export/cli/cli.h: what the `tidemark` command-line tool's commands
 * share: the command table entry, usage errors, output, and each
 * command's entry point.
 *
 * Commands print their results on stdout and every diagnostic on stderr,
 * one line each, prefixed "tidemark CMD: ".  No state, no locks.
 *
 * cli/ is the top of viewer-export/: argument parsing and one cmd_*.c per
 * command, nothing else.  It may include every other subfolder (gate/,
 * view/, export/, import/, model/); nothing includes it. */
#ifndef TDM_VIEWER_CLI_H
#define TDM_VIEWER_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "format_file.h"
#include "input.h"

typedef struct tdm_cli_command {
    const char *name;
    const char *brief;                 /* one line for `tidemark --help` */
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    void (*help)(FILE *out);           /* `tidemark help NAME` */
} tdm_cli_command;

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

/* After getopt_long (opterr = 0, optstring starting with ':') returned
 * `c` for an option it could not take (':': its value is missing; else
 * unknown), prints the line saying which.  `longopts` is the command's
 * option table (ended by a zero entry): an unknown long option gets the
 * closest of its names, "tidemark CMD: unknown option '--topp' (did you
 * mean '--top'?)", and an abbreviation of several is called ambiguous,
 * naming them. */
void tdm__cli_bad_option_in(const char *cmd, int c, char **argv,
                            const struct option *longopts);
/* The same line for a command that parses its own options: `arg` as given
 * ("--topp" or "--topp=3"), `names` the options it takes ("--top", ...). */
void tdm__cli_unknown_option(const char *cmd, const char *arg, const char *const *names,
                             size_t n);
/* Prints "tidemark CMD: " and the message, then where help is; returns
 * TDM_EXIT_USAGE. */
__attribute__((format(printf, 2, 3)))
int tdm__cli_usage(const char *cmd, const char *fmt, ...);

/* The options of the commands that write one file (import, merge-torch,
 * recover): -o/--output FILE (or --output=FILE), --force, -q/--quiet.
 * Returns 1 when argv[*i] is one of them (*i then past its value), 0 when
 * it is not, -1 when its value is missing (the usage line printed). */
int tdm__cli_write_option(const char *cmd, int argc, char **argv, int *i,
                          const char **out, int *force, int *quiet);
/* A command's last step: flushes stdout and returns rc, or
 * TDM_EXIT_TOOL_ERROR after saying so when the output could not be
 * written. */
int tdm__cli_flush(const char *cmd, int rc);

/* ---- stack options (cli_stacks.c) -----------------------------------------
 * --raw-names, --hide REGEX, --focus REGEX, --keep-wrappers: how stacks
 * are shown, for every command that shows them (model/stack_display.h). */

/* Takes the stack options out of argv[1..*argc) (up to a "--"), sets them
 * for every snapshot read afterwards, and closes the gap (*argc shrinks).
 * TDM_EXIT_OK, or TDM_EXIT_USAGE after saying what is wrong (a missing
 * value, a bad regular expression). */
int tdm__cli_stack_options(const char *cmd, int *argc, char **argv);
/* The help paragraph of those options. */
void tdm__cli_stack_options_help(FILE *out);

/* ---- summary ------------------------------------------------------------ */

int tdm__cli_summary(int argc, char **argv);
void tdm__cli_summary_help(FILE *out);

/* ---- replay (cmd_replay.c) ---------------------------------------------- */

int tdm__cli_replay(int argc, char **argv);
void tdm__cli_replay_help(FILE *out);

/* ---- categories (cmd_categories.c) --------------------------------------- */

int tdm__cli_categories(int argc, char **argv);
void tdm__cli_categories_help(FILE *out);

/* ---- export and import (cmd_export.c, cmd_import.c) -------------------
 * Formats come from the tables in export_formats.c / import_formats.c. */

int tdm__cli_export(int argc, char **argv);
void tdm__cli_export_help(FILE *out);
int tdm__cli_import(int argc, char **argv);
void tdm__cli_import_help(FILE *out);
int tdm__cli_recover(int argc, char **argv);
void tdm__cli_recover_help(FILE *out);

/* ---- top (cmd_top.c; top.h): live view of recording processes -------- */

int tdm__cli_top(int argc, char **argv);
void tdm__cli_top_help(FILE *out);

/* ---- merge-torch (cmd_merge.c): PyTorch's tensor history into a .tdm -- */

int tdm__cli_merge_torch(int argc, char **argv);
void tdm__cli_merge_torch_help(FILE *out);
/* Merges FILE.torch.pickle into `tdm_path` in place when the pickle is
 * there: 0 nothing to merge, 1 merged, -1 failed (said on stderr, as
 * "tidemark CMD: ...", the snapshot left as it was). */
int tdm__cli_merge_torch_beside(const char *cmd, const char *tdm_path, int quiet);

/* ---- view (cmd_view.c): the offline HTML viewer ------------------------ */

int tdm__cli_view(int argc, char **argv);
void tdm__cli_view_help(FILE *out);

/* ---- CI gates (cmd_run.c, cmd_gate.c, cmd_diff.c; gate.h) -------------- */

int tdm__cli_run(int argc, char **argv);
void tdm__cli_run_help(FILE *out);
int tdm__cli_gate(int argc, char **argv);
void tdm__cli_gate_help(FILE *out);
int tdm__cli_diff(int argc, char **argv);
void tdm__cli_diff_help(FILE *out);

/* Makes stderr a stream that writes control characters (bytes below 0x20
 * but newline and tab, 0x7f, and UTF-8's C1 controls U+0080..U+009F) and
 * invalid UTF-8 as \xNN (format/common.h, tdm__escape_text), so that no message, whatever input text it quotes, sends terminal
 * escape sequences (cli_stderr.c).  Called once, first thing in main. */
void tdm__cli_safe_stderr(void);
/* The same filter on stdout (line buffered), for the commands whose
 * standard output is text only: summary, categories, diff, gate, replay,
 * recover, run.  Invalid UTF-8 is escaped too (tdm__escape_text). */
void tdm__cli_safe_stdout(void);
/* The errno of the first write the stdout filter failed, else 0. */
int tdm__cli_stdout_error(void);

#endif
