/* viewer-export/cli.h: what the `tidemark` command-line tool's commands
 * share: exit codes, the command table entry, reading a snapshot the same
 * way everywhere, and each command's entry point.
 *
 * Commands print their results on stdout and every diagnostic on stderr,
 * one line each, prefixed "tidemark CMD: ".  No state, no locks. */
#ifndef TDM_VIEWER_CLI_H
#define TDM_VIEWER_CLI_H

#include <stdio.h>

#include "tidemark.h"
#include "snap_model.h"
#include "model.h"

/* Exit codes; docs/cli.md lists them. */
enum {
    TDM_EXIT_OK = 0,
    TDM_EXIT_USAGE = 1,       /* bad command line */
    TDM_EXIT_BAD_INPUT = 2,   /* a file missing, unreadable, corrupt or truncated */
    TDM_EXIT_GATE_FAILED = 3, /* reserved: a gate's limit was exceeded */
    TDM_EXIT_TOOL_ERROR = 4,  /* tidemark itself failed (out of memory, bug) */
};

typedef struct tdm_cli_command {
    const char *name;
    const char *brief;                 /* one line for `tidemark --help` */
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    void (*help)(FILE *out);           /* `tidemark help NAME` */
} tdm_cli_command;

/* Reads `path` for command `cmd`, accepting a truncated file.  Returns
 * TDM_EXIT_OK with *snap set (and *truncated = 0), TDM_EXIT_BAD_INPUT
 * with *snap set and *truncated = 1 after printing a warning naming the
 * byte offset, or TDM_EXIT_BAD_INPUT / TDM_EXIT_TOOL_ERROR with *snap NULL
 * after printing the error. */
int tdm__cli_read_snapshot(const char *cmd, const char *path, tdm_snap **snap,
                           int *truncated, uint64_t *truncated_at);
/* Frees a snapshot tdm__cli_read_snapshot returned (read or imported). */
void tdm__cli_snap_free(tdm_snap *snap);
/* Checks that `path` exists and is not a directory, before a reader
 * says only "input/output error": TDM_EXIT_OK, or TDM_EXIT_BAD_INPUT
 * after printing why not. */
int tdm__cli_check_file(const char *cmd, const char *path);
/* Creates the missing folders on the way to output `path` (everything
 * before its last '/'; for "DIR/" that is DIR itself), as `mkdir -p`
 * would: TDM_EXIT_OK, or TDM_EXIT_TOOL_ERROR after saying which folder
 * could not be made and why. */
int tdm__cli_make_parents(const char *cmd, const char *path);
/* After getopt_long (opterr = 0, optstring starting with ':') returned
 * `c` for an option it could not take (':': its value is missing; else
 * unknown), prints the line saying which. */
void tdm__cli_bad_option(const char *cmd, int c, char **argv);
/* Parses option `opt`'s `arg` as a whole number up to `max` into *v;
 * returns -1 after printing why not. */
int tdm__cli_parse_count(const char *cmd, const char *opt, const char *arg,
                         unsigned long max, unsigned long *v);
/* Prints "tidemark CMD: " and the message, then where help is; returns
 * TDM_EXIT_USAGE. */
__attribute__((format(printf, 2, 3)))
int tdm__cli_usage(const char *cmd, const char *fmt, ...);
/* The larger (worse) of two exit codes. */
static inline int tdm__cli_worse(int a, int b) { return a > b ? a : b; }
/* A command's last step: flushes stdout and returns rc, or
 * TDM_EXIT_TOOL_ERROR after saying so when the output could not be
 * written. */
int tdm__cli_flush(const char *cmd, int rc);

/* ---- summary ------------------------------------------------------------ */

typedef struct tdm_summary_options {
    unsigned top;       /* sites listed per device (default 10) */
    unsigned frames;    /* frames per site (default 3) */
    int device;         /* only this ordinal; -1 = every device */
    int truncated;      /* the file was cut: say so in the header */
    uint64_t truncated_at; /* byte offset of the cut */
    int exact;          /* --bytes: stats in exact byte counts */
} tdm_summary_options;

/* Prints the summary of one snapshot and its model on `out`. */
tdm_status tdm__summary_print(FILE *out, const char *path, const tdm_snap *snap,
                              const tdm_model *model,
                              const tdm_summary_options *opts);
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
