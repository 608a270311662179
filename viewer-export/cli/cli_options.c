/* viewer-export/cli/cli_options.c: parsing a command's arguments by its
 * option table (cli_options.h) with getopt_long, the help lines of the
 * table, and the one line that refuses an option getopt_long could not
 * take: the closest name of the same table, the names an abbreviation
 * stands for, or the value it lacks.  No state but getopt's own. */
#include "cli.h"
#include "cli_options.h"
#include "common.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ------------------------------------------------------------------ */

int tdm__cli_option_code(const tdm_cli_option *o)
{
    return o->code ? o->code : o->short_name;
}

int tdm__cli_options_flatten(const tdm_cli_options *t, const tdm_cli_option **out, size_t cap,
                             size_t *n)
{
    for (const tdm_cli_option *o = t->rows; o->name || o->text || o->part || o->built; o++) {
        const tdm_cli_options *part = o->part ? o->part : o->built ? o->built() : NULL;
        if (part && tdm__cli_options_flatten(part, out, cap, n) != 0)
            return -1;
        if (!o->name)
            continue;
        if (*n == cap)
            return -1;
        out[(*n)++] = o;
    }
    return 0;
}

/* "-o, --output FILE", "--top N": the left column of `o`'s help line. */
static void label_of(const tdm_cli_option *o, char *buf, size_t len)
{
    if (o->label) {
        snprintf(buf, len, "%s", o->label);
        return;
    }
    char letter[8] = "";
    if (o->short_name)
        snprintf(letter, sizeof letter, "-%c, ", o->short_name);
    snprintf(buf, len, "%s--%s%s%s", letter, o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
}

void tdm__cli_options_help(FILE *out, const tdm_cli_options *t)
{
    for (const tdm_cli_option *o = t->rows; o->name || o->text || o->part || o->built; o++) {
        const tdm_cli_options *part = o->part ? o->part : o->built ? o->built() : NULL;
        if (part)
            tdm__cli_options_help(out, part);
        if (o->text)
            fprintf(out, "%s\n", o->text);
        if (!o->name || !o->help)
            continue;
        char label[128];
        label_of(o, label, sizeof label);
        int used = fprintf(out, "  %s", label);
        /* A label too wide for the column puts the text on the next line. */
        if (used >= t->column) {
            fputc('\n', out);
            used = 0;
        }
        fprintf(out, "%*s", t->column - used, "");
        for (const char *p = o->help; *p; p++) {
            fputc(*p, out);
            if (*p == '\n')
                fprintf(out, "%*s", t->column, "");
        }
        fputc('\n', out);
    }
}

/* ---- refusing an option ------------------------------------------------------------- */

/* Prints the line for unknown long option `arg` ("--name" or
 * "--name=value"): the closest of the table's names, or the ones it
 * abbreviates when several do. */
static void unknown_long(const char *cmd, const char *arg, const tdm_cli_parse *p)
{
    const char *word = arg + 2;
    size_t len = strcspn(word, "=");
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(len < 63 ? len : 63), word);
    const char *bare[TDM_CLI_MAX_OPTIONS];
    size_t nb = 0, prefixed = 0;
    for (size_t i = 0; i < p->count; i++) {
        bare[nb] = p->rows[i]->name;
        prefixed += len && strncmp(bare[nb], word, len) == 0;
        nb++;
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

/* The row that long option `arg` ("--name=value") names, as getopt_long
 * finds it (the name, or the one name it abbreviates); NULL for none or
 * several. */
static const tdm_cli_option *long_named(const char *arg, const tdm_cli_parse *p)
{
    const char *word = arg + 2;
    size_t len = strcspn(word, "=");
    const tdm_cli_option *hit = NULL;
    for (size_t i = 0; i < p->count; i++) {
        const char *name = p->rows[i]->name;
        if (strncmp(name, word, len) != 0)
            continue;
        if (name[len] == '\0')
            return p->rows[i]; /* the whole name */
        if (hit)
            return NULL; /* ambiguous */
        hit = p->rows[i];
    }
    return hit;
}

/* After getopt_long (opterr = 0, optstring starting with ':') returned
 * `c` for an option it could not take (':': its value is missing; else
 * unknown), prints the line saying which. */
static void bad_option(const tdm_cli_parse *p, int c)
{
    const char *cmd = p->cmd->name, *arg = p->argv[optind - 1];
    int is_long = strncmp(arg, "--", 2) == 0 && arg[2];
    const tdm_cli_option *named = is_long ? long_named(arg, p) : NULL;
    if (c == ':') {
        /* optopt: the option's code, long or short. */
        const tdm_cli_option *o = tdm__cli_parse_row(p, optopt);
        fprintf(stderr, "tidemark %s: option '%s' needs %s\n", cmd, arg,
                o && o->value_is ? o->value_is : "a value");
    } else if (named && named->has_arg == no_argument && strchr(arg, '=')) {
        /* getopt_long's '?' for "--flag=value", with optopt the flag's
         * code (not a short option of the user's). */
        fprintf(stderr, "tidemark %s: option '--%s' takes no value\n", cmd, named->name);
    } else if (optopt && !is_long) {
        /* The word it came in: getopt is still inside it (argv[optind])
         * when more letters follow, past it when it was the last. */
        const char *next = optind < p->argc ? p->argv[optind] : NULL;
        const char *word = next && next[0] == '-' && strchr(next + 1, optopt) ? next : arg;
        if (word[0] == '-' && word[1] == optopt && word[2] == '\0')
            fprintf(stderr, "tidemark %s: unknown option '-%c'\n", cmd, optopt);
        else
            fprintf(stderr, "tidemark %s: unknown option '-%c' in '%s'\n", cmd, optopt, word);
    } else if (is_long) {
        unknown_long(cmd, arg, p);
    } else {
        fprintf(stderr, "tidemark %s: unknown option '%s'\n", cmd, arg);
    }
}

/* ---- parsing ------------------------------------------------------------------------- */

const tdm_cli_option *tdm__cli_parse_row(const tdm_cli_parse *p, int code)
{
    for (size_t i = 0; i < p->count; i++)
        if (tdm__cli_option_code(p->rows[i]) == code)
            return p->rows[i];
    return NULL;
}

int tdm__cli_parse_begin(tdm_cli_parse *p, const char *name, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->argc = argc;
    p->argv = argv;
    p->cmd = tdm__cli_command_find(name);
    if (!p->cmd ||
        tdm__cli_options_flatten(&p->cmd->spec->options, p->rows, TDM_CLI_MAX_OPTIONS,
                                 &p->count) != 0 ||
        (p->cmd->shows_stacks &&
         tdm__cli_options_flatten(&tdm__cli_stack_options, p->rows, TDM_CLI_MAX_OPTIONS,
                                  &p->count) != 0)) {
        fprintf(stderr, "tidemark %s: its table of options does not fit the parser\n", name);
        p->exit = TDM_EXIT_TOOL_ERROR;
        return -1;
    }
    char *s = p->shortopts;
    if (p->cmd->spec->operand_ends_options)
        *s++ = '+'; /* the first word that is not an option ends them */
    *s++ = ':';     /* a missing value returns ':' */
    for (size_t i = 0; i < p->count; i++) {
        const tdm_cli_option *o = p->rows[i];
        p->longopts[i] = (struct option){o->name, o->has_arg, NULL, tdm__cli_option_code(o)};
        if (o->short_name) {
            *s++ = o->short_name;
            if (o->has_arg == required_argument)
                *s++ = ':';
        }
    }
    *s = '\0';
    if (p->cmd->shows_stacks && tdm__cli_stack_begin(name, argc) != TDM_EXIT_OK) {
        p->exit = TDM_EXIT_TOOL_ERROR;
        return -1;
    }
    opterr = 0;
    optind = 0; /* GNU: full re-initialisation; argv[0] is the command's name */
    return 0;
}

int tdm__cli_parse_next(tdm_cli_parse *p)
{
    for (;;) {
        int c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
        if (c == -1) {
            p->exit = p->cmd->shows_stacks ? tdm__cli_stack_apply(p->cmd->name) : TDM_EXIT_OK;
            return p->exit == TDM_EXIT_OK ? 0 : -1;
        }
        if (c == 'h') {
            tdm__cli_command_help(p->cmd, stdout);
            p->exit = TDM_EXIT_OK;
            return -1;
        }
        if (c == ':' || c == '?') {
            bad_option(p, c);
            fprintf(stderr, "Try 'tidemark help %s'.\n", p->cmd->name);
            p->exit = TDM_EXIT_USAGE;
            return -1;
        }
        if (p->cmd->shows_stacks && tdm__cli_stack_take(c, optarg))
            continue;
        return c;
    }
}
