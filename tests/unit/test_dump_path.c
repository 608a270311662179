/* tests/unit/test_dump_path.c: the dump-path templates of TIDEMARK_CONF's
 * `dump` key (runtime/dump_path.c): the % codes with and without rank
 * variables in the environment, bad templates, numbered dump names, and
 * the creation of missing folders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "config.h"

static const tdm__dump_vars vars = {
    .host = "node07", .pid = 4242, .rank = 3, .local_rank = 1,
    /* 2023-11-14 22:13:20.123456 UTC */
    .start_time_us = UINT64_C(1700000000123456),
};

static void expand_ok(const char *tmpl, const tdm__dump_vars *v, const char *want)
{
    char out[TDM__CONF_PATH_MAX];
    assert_int_equal(tdm__dump_path_expand(tmpl, v, out, sizeof out), TDM_OK);
    assert_string_equal(out, want);
}

static void template_codes_expand(void **state)
{
    (void)state;
    expand_ok("%p", &vars, "4242");
    expand_ok("%h", &vars, "node07");
    expand_ok("%r", &vars, "3");
    expand_ok("%l", &vars, "1");
    expand_ok("%t", &vars, "20231114-221320");
    expand_ok("%%", &vars, "%");
    expand_ok("plain.tdm", &vars, "plain.tdm");
    expand_ok("out/%h-r%r-l%l/%p_%t.%%.tdm", &vars,
              "out/node07-r3-l1/4242_20231114-221320.%.tdm");
    expand_ok("%p%p", &vars, "42424242");

    tdm__dump_vars solo = vars;
    solo.rank = -1;
    solo.local_rank = -1;
    solo.host = "a/b";
    solo.start_time_us = 0;
    expand_ok("%h-r%r-l%l-%t", &solo, "a_b-r0-l0-19700101-000000");
    solo.host = "";
    expand_ok("%h", &solo, "localhost");
}

static void template_errors(void **state)
{
    (void)state;
    char out[64];
    char why[128];
    assert_int_equal(tdm__dump_path_expand("%q", &vars, out, sizeof out),
                     TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__dump_path_expand("abc%", &vars, out, sizeof out),
                     TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__dump_path_expand("", &vars, out, sizeof out),
                     TDM_INVALID_ARGUMENT);
    /* Too long for the buffer: error, and the buffer stays a C string. */
    assert_int_equal(tdm__dump_path_expand("%h%h%h%h%h%h%h%h%h%h%h", &vars, out,
                                           sizeof out),
                     TDM_INVALID_ARGUMENT);
    assert_true(strlen(out) < sizeof out);
    assert_int_equal(tdm__dump_path_expand("1234567", &vars, out, 7),
                     TDM_INVALID_ARGUMENT);
    assert_int_equal(tdm__dump_path_expand("123456", &vars, out, 7), TDM_OK);
    assert_int_equal(tdm__dump_path_check("ok-%p", why, sizeof why), 0);
    assert_int_equal(tdm__dump_path_check("bad-%z", why, sizeof why), -1);
    assert_non_null(strstr(why, "%z"));
}

static void template_takes_ranks_from_the_environment(void **state)
{
    (void)state;
    static const char *const vars_used[] = {
        "RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
        "PMIX_RANK", "PALS_RANKID", "PALS_LOCAL_RANKID", "MV2_COMM_WORLD_RANK",
        "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
    };
    for (size_t i = 0; i < sizeof vars_used / sizeof vars_used[0]; i++)
        unsetenv(vars_used[i]);
    char out[TDM__CONF_PATH_MAX], want[128];
    const uint64_t t = UINT64_C(1700000000000000);

    assert_int_equal(tdm__dump_path_for_process("r%r-l%l-%p", t, out, sizeof out),
                     TDM_OK);
    snprintf(want, sizeof want, "r0-l0-%d", (int)getpid());
    assert_string_equal(out, want);

    /* Each launcher's pair of variables, set alone. */
    static const struct {
        const char *rank_var, *rank, *local_var, *local, *want;
    } launchers[] = {
        {"RANK", "5", "LOCAL_RANK", "2", "r5-l2"},
        {"SLURM_PROCID", "17", "SLURM_LOCALID", "3", "r17-l3"},
        {"OMPI_COMM_WORLD_RANK", "9", "OMPI_COMM_WORLD_LOCAL_RANK", "4", "r9-l4"},
    };
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        setenv(launchers[i].rank_var, launchers[i].rank, 1);
        setenv(launchers[i].local_var, launchers[i].local, 1);
        assert_int_equal(tdm__dump_path_for_process("r%r-l%l", t, out, sizeof out),
                         TDM_OK);
        assert_string_equal(out, launchers[i].want);
        unsetenv(launchers[i].rank_var);
        unsetenv(launchers[i].local_var);
    }

    char host[256] = "";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    assert_int_equal(tdm__dump_path_for_process("%h", t, out, sizeof out), TDM_OK);
    assert_string_equal(out, host[0] ? host : "localhost");
}

static void suffix_goes_before_the_extension(void **state)
{
    (void)state;
    static const struct { const char *in, *suffix, *want; } c[] = {
        {"a.tdm", "-1", "a-1.tdm"},
        {"out/r0.tdm", "-12", "out/r0-12.tdm"},
        {"out.d/snap", "-2", "out.d/snap-2"},
        {"noext", "-3", "noext-3"},
        {"dir/.hidden", "-4", "dir/.hidden-4"},
        {"x.tar.gz", "-5", "x.tar-5.gz"},
        {"/abs/p.q/r.tdm", "-oom-6", "/abs/p.q/r-oom-6.tdm"},
    };
    char out[128];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        assert_int_equal(tdm__dump_path_with_suffix(c[i].in, c[i].suffix, out,
                                                    sizeof out),
                         TDM_OK);
        assert_string_equal(out, c[i].want);
    }
    assert_int_equal(tdm__dump_path_with_suffix("abcdef.tdm", "-1", out, 8),
                     TDM_INVALID_ARGUMENT);
}

static void missing_folders_are_created(void **state)
{
    (void)state;
    char base[] = "/tmp/tdm-conf-XXXXXX";
    assert_non_null(mkdtemp(base));
    char path[512];
    struct stat st;

    snprintf(path, sizeof path, "%s/a/b//c/snap.tdm", base);
    assert_int_equal(tdm__dump_path_make_parent(path), TDM_OK);
    snprintf(path, sizeof path, "%s/a/b/c", base);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    /* Again: nothing to do, still fine. */
    snprintf(path, sizeof path, "%s/a/b/c/other.tdm", base);
    assert_int_equal(tdm__dump_path_make_parent(path), TDM_OK);
    /* No folder part: nothing to make. */
    assert_int_equal(tdm__dump_path_make_parent("just-a-name.tdm"), TDM_OK);
    assert_int_equal(tdm__dump_path_make_parent("/root-level.tdm"), TDM_OK);

    /* A file where a folder should be is an error. */
    snprintf(path, sizeof path, "%s/file", base);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/file/sub/x.tdm", base);
    assert_int_equal(tdm__dump_path_make_parent(path), TDM_IO_ERROR);
    snprintf(path, sizeof path, "%s/file/x.tdm", base);
    assert_int_equal(tdm__dump_path_make_parent(path), TDM_IO_ERROR);
    assert_int_equal(errno, ENOTDIR);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(template_codes_expand),
        cmocka_unit_test(template_errors),
        cmocka_unit_test(template_takes_ranks_from_the_environment),
        cmocka_unit_test(suffix_goes_before_the_extension),
        cmocka_unit_test(missing_folders_are_created),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
