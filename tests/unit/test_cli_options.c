/* tests/unit/test_cli_options.c: every command's option table against the
 * `tidemark` tool built from it.  For each command of the command table
 * (cli_commands.c), every option of its table (the stack options too when
 * it shows stacks):
 *   - `tidemark CMD --help` lists it ("--name", and "-x" for a short one);
 *   - `tidemark CMD --TYPO`, the name with one letter changed, is refused
 *     in one line naming it: "unknown option '--TYPO' (did you mean
 *     '--name'?)", exit 1;
 *   - `tidemark CMD --name[=1]` and `-x[1]` are taken (what the command
 *     then says of the missing operands is not looked at);
 * and a command that shows no stacks refuses the stack options.  An option
 * added to a table without help, or a table the parser does not use, fails
 * here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"

#ifndef TDM_CLI_BINARY
#error "TDM_CLI_BINARY names the tidemark tool under test"
#endif

/* Where the tool runs: an option taken may write there (replay --save). */
static char scratch[] = "/tmp/tdm-cli-options-XXXXXX";

typedef struct ran {
    int status;    /* the exit code; -1 when it did not exit */
    char out[65536];
    char err[4096];
} ran;

/* Reads what `fd` holds from its start into buf (NUL-terminated). */
static void slurp(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t got;
    lseek(fd, 0, SEEK_SET);
    while (n + 1 < cap && (got = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    buf[n] = '\0';
}

/* Runs `tidemark CMD ARG [OPERAND]` with stdout and stderr kept, in a
 * folder of its own, stopped after 30 s. */
static void run_tool2(const char *cmd, const char *arg, const char *operand, ran *r)
{
    char out_path[] = "/tmp/tdm-cli-options-out-XXXXXX";
    char err_path[] = "/tmp/tdm-cli-options-err-XXXXXX";
    int out = mkstemp(out_path), err = mkstemp(err_path);
    assert_true(out >= 0 && err >= 0);
    unlink(out_path);
    unlink(err_path);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out, 1);
        dup2(err, 2);
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
        if (chdir(scratch) != 0)
            _exit(126);
        alarm(30); /* (kept across exec) */
        execl(TDM_CLI_BINARY, "tidemark", cmd, arg, operand, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    slurp(out, r->out, sizeof r->out);
    slurp(err, r->err, sizeof r->err);
    close(out);
    close(err);
}

static void run_tool(const char *cmd, const char *arg, ran *r)
{
    run_tool2(cmd, arg, NULL, r);
}

/* Nonzero when `text` holds `word` as a whole word of an option's
 * spelling (not inside a longer name: "--top" is not in "--topology"). */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        char before = p == text ? ' ' : p[-1], after = p[n];
        int in_name = (after >= 'a' && after <= 'z') || (after >= '0' && after <= '9') ||
                      after == '-' || after == '_';
        if (!in_name && before != '-' && !(before >= 'a' && before <= 'z'))
            return 1;
    }
    return 0;
}

/* The rows `cmd` parses by: its table's, then the stack options'. */
static size_t rows_of(const tdm_cli_command *cmd, const tdm_cli_option **rows)
{
    size_t n = 0;
    assert_int_equal(tdm__cli_options_flatten(&cmd->spec->options, rows, TDM_CLI_MAX_OPTIONS,
                                              &n), 0);
    if (cmd->shows_stacks)
        assert_int_equal(tdm__cli_options_flatten(&tdm__cli_stack_options, rows,
                                                  TDM_CLI_MAX_OPTIONS, &n), 0);
    return n;
}

static void help_lists_every_option(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t c = 0; c < tdm__cli_command_count; c++) {
        const tdm_cli_command *cmd = &tdm__cli_commands[c];
        const tdm_cli_option *rows[TDM_CLI_MAX_OPTIONS];
        size_t n = rows_of(cmd, rows);
        assert_true(n > 0);
        ran *r = malloc(sizeof *r);
        assert_non_null(r);
        run_tool(cmd->name, "--help", r);
        if (r->status != 0)
            fail_msg("tidemark %s --help: exit %d: %s", cmd->name, r->status, r->err);
        for (size_t i = 0; i < n; i++) {
            char word[80];
            snprintf(word, sizeof word, "--%s", rows[i]->name);
            if (!has_word(r->out, word))
                fail_msg("tidemark %s --help does not list %s", cmd->name, word);
            snprintf(word, sizeof word, "-%c", rows[i]->short_name);
            if (rows[i]->short_name && !has_word(r->out, word))
                fail_msg("tidemark %s --help does not list %s (%s's)", cmd->name, word,
                         rows[i]->name);
            checked++;
        }
        free(r);
    }
    assert_true(checked > 60);
}

/* `name` with one letter changed, as a user might misspell it, such that
 * the parser cannot take it for `name` or another option (not a prefix of
 * any) and `name` is the closest: 0, or -1 when no such change was found. */
static int typo_of(const char *name, const tdm_cli_option **rows, size_t n, char *typo,
                   size_t cap)
{
    const char *names[TDM_CLI_MAX_OPTIONS];
    for (size_t i = 0; i < n; i++)
        names[i] = rows[i]->name;
    size_t len = strlen(name);
    for (size_t at = len / 2, tries = 0; tries < len; tries++, at = (at + 1) % len) {
        for (const char *sub = "qxz"; *sub; sub++) {
            if (name[at] == *sub || len + 1 > cap)
                continue;
            memcpy(typo, name, len + 1);
            typo[at] = *sub;
            int prefix = 0;
            for (size_t i = 0; i < n; i++)
                prefix |= strncmp(names[i], typo, len) == 0;
            const char *near = tdm__did_you_mean(typo, names, n);
            if (!prefix && near && strcmp(near, name) == 0)
                return 0;
        }
    }
    return -1;
}

static void a_misspelt_option_names_the_nearest(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t c = 0; c < tdm__cli_command_count; c++) {
        const tdm_cli_command *cmd = &tdm__cli_commands[c];
        const tdm_cli_option *rows[TDM_CLI_MAX_OPTIONS];
        size_t n = rows_of(cmd, rows), here = 0;
        ran *r = malloc(sizeof *r);
        assert_non_null(r);
        for (size_t i = 0; i < n; i++) {
            char typo[64], arg[80], want[256];
            if (typo_of(rows[i]->name, rows, n, typo, sizeof typo) != 0)
                continue;
            snprintf(arg, sizeof arg, "--%s", typo);
            run_tool(cmd->name, arg, r);
            snprintf(want, sizeof want,
                     "tidemark %s: unknown option '--%s' (did you mean '--%s'?)\n", cmd->name,
                     typo, rows[i]->name);
            if (r->status != 1 || strncmp(r->err, want, strlen(want)) != 0)
                fail_msg("tidemark %s %s: exit %d, stderr '%s'; expected exit 1 and '%s'",
                         cmd->name, arg, r->status, r->err, want);
            here++;
        }
        free(r);
        if (here == 0)
            fail_msg("no option of tidemark %s could be misspelt", cmd->name);
        checked += here;
    }
    assert_true(checked > 60);
}

static void every_option_is_taken(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t c = 0; c < tdm__cli_command_count; c++) {
        const tdm_cli_command *cmd = &tdm__cli_commands[c];
        const tdm_cli_option *rows[TDM_CLI_MAX_OPTIONS];
        size_t n = rows_of(cmd, rows);
        ran *r = malloc(sizeof *r);
        assert_non_null(r);
        for (size_t i = 0; i < n; i++) {
            int value = rows[i]->has_arg == required_argument;
            if (strcmp(rows[i]->name, "help") == 0)
                continue; /* (help_lists_every_option ran it) */
            for (int spelling = 0; spelling < 2; spelling++) {
                char arg[80];
                if (spelling == 0)
                    snprintf(arg, sizeof arg, "--%s%s", rows[i]->name, value ? "=1" : "");
                else if (rows[i]->short_name)
                    snprintf(arg, sizeof arg, "-%c%s", rows[i]->short_name, value ? "1" : "");
                else
                    continue;
                /* An operand that is nowhere, so that no command goes on
                 * to read, watch or run anything real. */
                run_tool2(cmd->name, arg, "/nonexistent/tdm-cli-options", r);
                if (r->status < 0 || strstr(r->err, "unknown option") ||
                    strstr(r->err, "is ambiguous") || strstr(r->err, "takes no value"))
                    fail_msg("tidemark %s %s was not taken (exit %d): %s", cmd->name, arg,
                             r->status, r->err);
                checked++;
            }
        }
        free(r);
    }
    assert_true(checked > 60);
}

static void stack_options_only_where_stacks_are_shown(void **state)
{
    (void)state;
    const tdm_cli_option *stack[TDM_CLI_MAX_OPTIONS];
    size_t ns = 0;
    assert_int_equal(tdm__cli_options_flatten(&tdm__cli_stack_options, stack,
                                              TDM_CLI_MAX_OPTIONS, &ns), 0);
    assert_true(ns > 0);
    size_t with = 0, without = 0;
    for (size_t c = 0; c < tdm__cli_command_count; c++) {
        const tdm_cli_command *cmd = &tdm__cli_commands[c];
        ran *r = malloc(sizeof *r);
        assert_non_null(r);
        char arg[80], want[256];
        snprintf(arg, sizeof arg, "--%s", stack[0]->name);
        run_tool(cmd->name, arg, r);
        snprintf(want, sizeof want, "tidemark %s: unknown option '%s'", cmd->name, arg);
        int refused = r->status == 1 && strncmp(r->err, want, strlen(want)) == 0;
        if (cmd->shows_stacks && refused)
            fail_msg("tidemark %s shows stacks but refuses %s", cmd->name, arg);
        if (!cmd->shows_stacks && !refused)
            fail_msg("tidemark %s shows no stacks but took %s (exit %d: %s)", cmd->name, arg,
                     r->status, r->err);
        run_tool(cmd->name, "--help", r);
        if (!cmd->shows_stacks != !has_word(r->out, arg))
            fail_msg("tidemark %s --help %s the stack options", cmd->name,
                     cmd->shows_stacks ? "lacks" : "lists");
        with += cmd->shows_stacks != 0;
        without += !cmd->shows_stacks;
        free(r);
    }
    assert_true(with > 0 && without > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_lists_every_option),
        cmocka_unit_test(a_misspelt_option_names_the_nearest),
        cmocka_unit_test(every_option_is_taken),
        cmocka_unit_test(stack_options_only_where_stacks_are_shown),
    };
    if (!mkdtemp(scratch))
        return 1;
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* What the options taken left there (replay --save=1 makes a folder). */
    char rm[sizeof scratch + 16];
    snprintf(rm, sizeof rm, "rm -rf '%s'", scratch);
    if (system(rm) != 0)
        return 1;
    return failed;
}
