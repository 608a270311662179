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

#include <stdio.h>

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
/* After getopt_long (opterr = 0, optstring starting with ':') returned
 * `c` for an option it could not take (':': its value is missing; else
 * unknown), prints the line saying which. */
void tdm__cli_bad_option(const char *cmd, int c, char **argv);
/* Prints "tidemark CMD: " and the message, then where help is; returns
 * TDM_EXIT_USAGE. */
__attribute__((format(printf, 2, 3)))
int tdm__cli_usage(const char *cmd, const char *fmt, ...);
/* A command's last step: flushes stdout and returns rc, or
 * TDM_EXIT_TOOL_ERROR after saying so when the output could not be
 * written. */
int tdm__cli_flush(const char *cmd, int rc);

/* ---- summary ------------------------------------------------------------ */

int tdm__cli_summary(int argc, char **argv);
void tdm__cli_summary_help(FILE *out);

/* ---- categories (cmd_categories.c) --------------------------------------- */

int tdm__cli_categories(int argc, char **argv);
void tdm__cli_categories_help(FILE *out);

/* ---- export and import (cmd_export.c, cmd_import.c) -------------------
 * Formats come from the tables in export_formats.c / import_formats.c. */

int tdm__cli_export(int argc, char **argv);
void tdm__cli_export_help(FILE *out);
int tdm__cli_import(int argc, char **argv);
void tdm__cli_import_help(FILE *out);

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

#endif
