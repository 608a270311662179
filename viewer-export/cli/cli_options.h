/* viewer-export/cli/cli_options.h: a command's options as one table, the
 * single place each option is spelled: getopt_long parses by it, the
 * --help text lists it, and an unknown option is matched against it
 * ("did you mean '--top'?").  cli_options.c holds the parser and the help
 * printer; each cmd_*.c its table; cli_commands.c ties them to the
 * commands.  No state, no locks (the parser's state is its caller's). */
#ifndef TDM_VIEWER_CLI_OPTIONS_H
#define TDM_VIEWER_CLI_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

typedef struct tdm_cli_option tdm_cli_option;

/* Rows, and the column their help starts at ("  --top N       sites..."). */
typedef struct tdm_cli_options {
    const tdm_cli_option *rows; /* ended by a row of zeros */
    int column;
} tdm_cli_options;

/* One row: an option, a line of help text between options, or the rows
 * of another table (the gates of `gate` and `run`; export's formats). */
struct tdm_cli_option {
    const char *name;     /* long name, without "--"; NULL: not an option */
    char short_name;      /* 'o' for -o; 0: long only */
    int code;             /* what tdm__cli_parse_next returns for it; 0: short_name.
                           * 'h' is --help's, taken by the parser */
    int has_arg;          /* no_argument or required_argument */
    const char *metavar;  /* the value's name in the help ("N"); NULL: a flag */
    const char *help;     /* what it does; '\n' goes on at the column.  NULL:
                           * the help names it elsewhere (another row's label,
                           * the list of formats) */
    const char *label;    /* the left column when not "-o, --name METAVAR" */
    const char *value_is; /* a missing value is "needs VALUE_IS"; NULL: "a value" */
    const char *text;     /* name NULL: a line printed as it is ("reporting:") */
    const tdm_cli_options *part;           /* name NULL: these rows here */
    const tdm_cli_options *(*built)(void); /* name NULL: these, made when asked */
};

/* --help, as every command spells it ("this text"). */
#define TDM_CLI_HELP_ROW(what) \
    {.name = "help", .short_name = 'h', .help = (what)}

/* What a command's help says and which options it takes. */
typedef struct tdm_cli_spec {
    const char *usage;          /* the text before the options */
    tdm_cli_options options;
    const char *after;          /* the text after them, or NULL */
    void (*more)(FILE *out);    /* then this (the tables of formats), or NULL */
    int operand_ends_options;   /* `run`: the first operand starts the command */
} tdm_cli_spec;

/* Most options one command takes, its stack options included. */
#define TDM_CLI_MAX_OPTIONS 64

/* The option rows of `t` in order, parts opened: *n of them into `out`
 * (room for `cap`).  -1 when they do not fit. */
int tdm__cli_options_flatten(const tdm_cli_options *t, const tdm_cli_option **out, size_t cap,
                             size_t *n);
/* The help lines of `t`'s rows. */
void tdm__cli_options_help(FILE *out, const tdm_cli_options *t);
/* The code tdm__cli_parse_next returns for row `o`. */
int tdm__cli_option_code(const tdm_cli_option *o);

struct tdm_cli_command;

/* One command's parse: begin, then next until it returns 0 (the operands
 * are argv[optind..argc)) or -1 (stop: `exit` says with what; the help or
 * the usage error was printed). */
typedef struct tdm_cli_parse {
    const struct tdm_cli_command *cmd;
    int argc;
    char **argv;
    size_t count;
    const tdm_cli_option *rows[TDM_CLI_MAX_OPTIONS];
    struct option longopts[TDM_CLI_MAX_OPTIONS + 1];
    char shortopts[3 * TDM_CLI_MAX_OPTIONS + 3];
    int exit;
} tdm_cli_parse;

/* Starts parsing command `name`'s arguments (argv[0] is its name) by its
 * table, with the stack options when it shows stacks.  0, or -1 with
 * p->exit set (a table too large: a tool error, said). */
int tdm__cli_parse_begin(tdm_cli_parse *p, const char *name, int argc, char **argv);
/* The next option's code (its value in optarg); 0 at the operands, after
 * the stack options were applied; -1 to stop with p->exit: --help printed
 * (TDM_EXIT_OK), an unknown option or a missing value said with the
 * closest name and "Try 'tidemark help CMD'." (TDM_EXIT_USAGE). */
int tdm__cli_parse_next(tdm_cli_parse *p);
/* The row whose code is `code`, or NULL. */
const tdm_cli_option *tdm__cli_parse_row(const tdm_cli_parse *p, int code);

#endif
