/* tests/unit/test_config_load.c: TIDEMARK_CONF at load time, run in
 * forked children (bad text changes nothing; help records nothing; good
 * text records and dumps at exit); tdm_conf_check, which accepts what
 * loading accepts and refuses the rest with the very line loading prints,
 * changing nothing; and the `ranks` key: its lists and ranges, the ranks
 * it selects, and a rank left out running untouched. */
#include <stdlib.h>
#include <signal.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "config_fixtures.h"
#include "preload.h"
#include "procinfo.h"
#include "snap_model.h"

/* ---- the load-time path, in forked children --------------------------------- */

/* Runs tdm__autoinit_apply(text) in a child with stderr captured; the child
 * reports whether it records, allocates and frees once if it does, and
 * exits (running atexit) with 0 or 10 + the status.  Returns that exit
 * code; the child's stderr is in buf. */
static int run_apply_in_child(const char *text, char *buf, size_t len,
                              int *recording)
{
    int out[2], res[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(res), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(out[0]);
        close(res[0]);
        dup2(out[1], STDERR_FILENO);
        tdm_status st = tdm__autoinit_apply(text);
        /* After non-blank text, a second call never acts again. */
        tdm_status again = TDM_OK;
        if (text[strspn(text, " \t")] != '\0')
            again = tdm__autoinit_apply("record=bogus");
        char r = (char)('0' + tdm_is_recording());
        if (write(res[1], &r, 1) != 1)
            _exit(90);
        if (again != TDM_OK)
            _exit(91);
        if (st == TDM_OK && tdm_is_recording()) {
            void *p = NULL;
            if (tdm_malloc(&p, 4096, 0, 0) != TDM_OK || tdm_free(p) != TDM_OK)
                _exit(92);
        }
        exit(st == TDM_OK ? 0 : 10 + (int)st); /* exit(): runs atexit */
    }
    close(out[1]);
    close(res[1]);
    size_t used = 0;
    ssize_t n;
    while ((n = read(out[0], buf + used, len - 1 - used)) > 0)
        used += (size_t)n;
    buf[used] = '\0';
    char r = '?';
    assert_int_equal(read(res[0], &r, 1), 1);
    *recording = r - '0';
    close(out[0]);
    close(res[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void autoinit_bad_text_prints_one_line_and_stays_off(void **state)
{
    (void)state;
    static char buf[16384];
    int rec = -1;
    int rc = run_apply_in_child("record=all,max_entries=0x10", buf, sizeof buf, &rec);
    assert_int_equal(rc, 10 + TDM_BAD_CONFIG);
    assert_int_equal(rec, 0);
    assert_int_equal(count_lines(buf), 1);
    assert_non_null(strstr(buf, "'max_entries'"));
    assert_non_null(strstr(buf, "'0x10'"));
    assert_non_null(strstr(buf, "recording is off\n"));

    rc = run_apply_in_child("  ", buf, sizeof buf, &rec); /* blank: nothing */
    assert_int_equal(rc, 0);
    assert_int_equal(rec, 0);
    assert_string_equal(buf, "");
}

static void autoinit_help_prints_keys_and_stays_off(void **state)
{
    (void)state;
    static char buf[16384];
    int rec = -1;
    int rc = run_apply_in_child("help", buf, sizeof buf, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec, 0);
    size_t n;
    const tdm__conf_key *keys = tdm__config_keys(&n);
    for (size_t i = 0; i < n; i++)
        assert_non_null(strstr(buf, keys[i].name));
    assert_true(count_lines(buf) > n);
}

static void autoinit_records_and_dumps_at_exit(void **state)
{
    (void)state;
    char base[] = "/tmp/tdm-conf-XXXXXX";
    assert_non_null(mkdtemp(base));
    char text[512], path[512];
    snprintf(text, sizeof text,
             "device=sim:2x64MiB,max_entries=1000,dump=%s/new/dir/s-%%p-r%%r.tdm",
             base);
    static char buf[16384];
    int rec = -1;
    unsetenv("RANK");
    int rc = run_apply_in_child(text, buf, sizeof buf, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec, 1);
    assert_int_equal(count_lines(buf), 1);
    assert_non_null(strstr(buf, "tidemark: wrote snapshot to "));
    /* The child's pid is in the name: take it from the message. */
    const char *p = strstr(buf, base);
    assert_non_null(p);
    size_t plen = strcspn(p, " ");
    assert_true(plen < sizeof path);
    memcpy(path, p, plen);
    path[plen] = '\0';
    assert_non_null(strstr(path, "/new/dir/s-"));
    assert_non_null(strstr(path, "-r0.tdm"));

    tdm_snap *snap = NULL;
    tdm_read_error rerr;
    assert_int_equal(tdm__snap_read_file(path, 0, &snap, &rerr), TDM_OK);
    /* alloc + free of the 4096 bytes, at least; the count matches the line. */
    assert_true(snap->event_count >= 2);
    char want[64];
    snprintf(want, sizeof want, "(%zu events)", snap->event_count);
    assert_non_null(strstr(buf, want));
    assert_int_equal(snap->device_count, 2);
    assert_int_equal(snap->devices[0].capacity, 64u << 20);
    assert_int_equal(snap->header.max_entries, 1000);
    assert_string_equal(snap->header.config, text);
    tdm__snap_free(snap);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* ---- tdm_conf_check ------------------------------------------------------------ */

static void conf_check_accepts_what_loading_accepts(void **state)
{
    (void)state;
    static const char *const good[] = {
        "",
        "  ",
        ",,",
        "help",
        "record=all",
        "record=state, context=alloc, stacks=none, max_entries=1000",
        "dump=out/%h-r%r-l%l-%p-%t%%.tdm,dump_on=exit+signal|oom,signal=SIGRTMIN+2",
        "device=sim:2x8GiB,alloc_mode=passthrough,sim_host_access=yes",
        "max_split_size=64 MiB,roundup_power2_divisions=[256:1,512:2,>:4],"
        "garbage_collection_threshold=0.6",
        "mode=cache,fork=stop,ranks=0,8-15,dump=x.tdm",
        "ranks=local:[0,2]",
        "device=cuda",
    };
    char msg[TDM_CONF_MESSAGE_MAX];
    assert_int_equal(tdm_conf_check(NULL, msg, sizeof msg), TDM_OK);
    assert_string_equal(msg, "");
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        memcpy(msg, "junk", 5);
        tdm_status st = tdm_conf_check(good[i], msg, sizeof msg);
        if (st != TDM_OK)
            fail_msg("'%s' should be accepted, got %s: %s", good[i], tdm_status_name(st), msg);
        assert_string_equal(msg, "");
    }
    assert_int_equal(tdm_conf_check("record=all", NULL, 0), TDM_OK);
}

/* Each text is refused by tdm_conf_check with exactly the line that
 * applying it at load time prints (in a child), and the same status. */
static void conf_check_refuses_with_the_line_loading_prints(void **state)
{
    (void)state;
    static char many_times[8 + 2 * 2000 + 8]; /* %t is 15 bytes: 30000 */
    memcpy(many_times, "dump=", 5);
    for (int i = 0; i < 2000; i++)
        memcpy(many_times + 5 + 2 * i, "%t", 2);
    memcpy(many_times + 5 + 2 * 2000, ".tdm", 5);
    static const struct { const char *text, *want1, *want2; } bad[] = {
        {"record=al", "bad value 'al' for key 'record'", "expected off|state|all"},
        {"DUMP=x.tdm", "unknown key 'DUMP'", "did you mean 'dump'?"},
        {"Record=all", "unknown key 'Record'", "did you mean 'record'?"},
        {"recrod=all", "unknown key 'recrod'", "did you mean 'record'?"},
        {"colour=blue", "unknown key 'colour'", "valid keys: record"},
        {"max_entries=0x10", "'max_entries'", "'0x10'"},
        {"device=sim:8GB", "'device'", "ambiguous"},
        {"max_split_size=12 parsecs", "'max_split_size'", "unknown unit"},
        {"dump=run-%q.tdm", "'dump'", "'run-%q.tdm'"},
        {"ranks=5-3", "'ranks'", "'5-3'"},
        {"signal=KILL", "'signal'", "SIGUSR1"},
        {"dump_on=exit+never", "'dump_on'", "'never'"},
        {"stacks=mixed", "'stacks'", "none|native|python|all"},
        {"record=all,nokey", "item 'nokey' has no '='", NULL},
        {"record=", "empty value for key 'record'", NULL},
        {many_times, "dump path '", "too long once expanded"},
    };
    char msg[TDM_CONF_MESSAGE_MAX];
    static char buf[16384];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *text = bad[i].text;
        tdm_status st = tdm_conf_check(text, msg, sizeof msg);
        if (st != TDM_BAD_CONFIG)
            fail_msg("'%.80s' should be refused, got %s", text, tdm_status_name(st));
        assert_ptr_equal(strstr(msg, "tidemark: TIDEMARK_CONF: "), msg);
        assert_null(strchr(msg, '\n'));
        assert_non_null(strstr(msg, "; recording is off"));
        if (!strstr(msg, bad[i].want1) || (bad[i].want2 && !strstr(msg, bad[i].want2)))
            fail_msg("'%.80s': unexpected message: %s", text, msg);
        int rec = -1;
        int rc = run_apply_in_child(text, buf, sizeof buf, &rec);
        assert_int_equal(rc, 10 + (int)st);
        assert_int_equal(rec, 0);
        size_t n = strlen(msg);
        if (strlen(buf) != n + 1 || memcmp(buf, msg, n) != 0 || buf[n] != '\n')
            fail_msg("'%.80s': loading printed\n%s\ncheck said\n%s", text, buf, msg);
    }
}

/* A sim device the machine cannot reserve (2^62 bytes: no address space
 * holds it) or whose size wraps when rounded to pages: one line at start
 * and recording off, as for any setting the machine cannot honour.  Both
 * were taken, recording said on, and every allocation then failed. */
static void conf_check_refuses_a_device_it_cannot_set_up(void **state)
{
    (void)state;
    static const struct { const char *text; tdm_status st; } bad[] = {
        {"device=sim:4194304TiB", TDM_HOST_OUT_OF_MEMORY},
        {"device=sim:2x4194304TiB", TDM_HOST_OUT_OF_MEMORY},
        {"device=sim:18446744073709551615", TDM_BAD_CONFIG},
    };
    char msg[TDM_CONF_MESSAGE_MAX];
    static char buf[16384];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tdm_status st = tdm_conf_check(bad[i].text, msg, sizeof msg);
        if (st != bad[i].st)
            fail_msg("'%s': got %s: %s", bad[i].text, tdm_status_name(st), msg);
        assert_non_null(strstr(msg, "tidemark: TIDEMARK_CONF: cannot set up device sim"));
        assert_non_null(strstr(msg, "; recording is off"));
        int rec = -1;
        int rc = run_apply_in_child(bad[i].text, buf, sizeof buf, &rec);
        assert_int_equal(rc, 10 + (int)st);
        assert_int_equal(rec, 0);
        size_t n = strlen(msg);
        if (strlen(buf) != n + 1 || memcmp(buf, msg, n) != 0)
            fail_msg("'%s': loading printed\n%s\ncheck said\n%s", bad[i].text, buf, msg);
    }
}

static void conf_check_message_buffer(void **state)
{
    (void)state;
    char msg[8];
    /* No buffer: the status alone. */
    assert_int_equal(tdm_conf_check("record=al", NULL, 0), TDM_BAD_CONFIG);
    assert_int_equal(tdm_conf_check("record=al", msg, 0), TDM_BAD_CONFIG);
    /* A short one gets the start of the line. */
    assert_int_equal(tdm_conf_check("record=al", msg, sizeof msg), TDM_BAD_CONFIG);
    assert_string_equal(msg, "tidemar");
    assert_int_equal(tdm_conf_check("record=al", msg, 1), TDM_BAD_CONFIG);
    assert_string_equal(msg, "");
}

/* Checking enables nothing, configures nothing and prints nothing; the
 * load-time application that follows still acts. */
static void conf_check_changes_nothing(void **state)
{
    (void)state;
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(out[0]);
        dup2(out[1], STDERR_FILENO);
        char msg[TDM_CONF_MESSAGE_MAX];
        if (tdm_conf_check("device=sim:3x64MiB,record=all,dump_on=signal,mode=cache", msg,
                           sizeof msg) != TDM_OK ||
            tdm_conf_check("record=al", msg, sizeof msg) != TDM_BAD_CONFIG ||
            tdm_conf_check("help", msg, sizeof msg) != TDM_OK)
            _exit(20);
        if (tdm_is_recording())
            _exit(21);
        if (tdm__autoinit_hook_mode() != TDM__HOOK_OFF) /* TIDEMARK_CONF= is empty */
            _exit(22);
        /* Applying now acts: the check left the one-shot application alone. */
        if (tdm__autoinit_apply("device=sim:2x64MiB,max_entries=10,dump_on=none") != TDM_OK)
            _exit(23);
        int count = 0;
        if (!tdm_is_recording() || tdm_device_count(&count) != TDM_OK || count != 2)
            _exit(24);
        _exit(0);
    }
    close(out[1]);
    static char buf[16384];
    size_t used = 0;
    ssize_t n;
    while ((n = read(out[0], buf + used, sizeof buf - 1 - used)) > 0)
        used += (size_t)n;
    buf[used] = '\0';
    close(out[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(buf, "");
}

/* ---- ranks ------------------------------------------------------------------ */

static void ranks_take_lists_and_ranges(void **state)
{
    (void)state;
    parse_ok("");
    assert_int_equal(cfg.ranks.count, 0); /* default: every rank */
    parse_ok("ranks=0,8-15");
    assert_int_equal(cfg.ranks.count, 2);
    assert_int_equal(cfg.ranks.local, 0);
    assert_int_equal(cfg.ranks.range[0].first, 0);
    assert_int_equal(cfg.ranks.range[0].last, 0);
    assert_int_equal(cfg.ranks.range[1].first, 8);
    assert_int_equal(cfg.ranks.range[1].last, 15);
    /* The list ends at the next key; the keys after it still apply. */
    parse_ok("dump=x-%r.tdm, ranks = 3 , 5 - 6 ,record=state,max_entries=7");
    assert_int_equal(cfg.ranks.count, 2);
    assert_int_equal(cfg.ranks.range[0].first, 3);
    assert_int_equal(cfg.ranks.range[1].first, 5);
    assert_int_equal(cfg.ranks.range[1].last, 6);
    assert_int_equal(cfg.record, TDM_RECORD_STATE);
    assert_int_equal(cfg.max_entries, 7);
    assert_string_equal(cfg.dump, "x-%r.tdm");
    parse_ok("ranks=[0,2147483647],dump=y.tdm");
    assert_int_equal(cfg.ranks.count, 2);
    assert_int_equal(cfg.ranks.range[1].first, INT32_MAX);
    assert_string_equal(cfg.dump, "y.tdm");
    parse_ok("ranks=local:0");
    assert_int_equal(cfg.ranks.local, 1);
    assert_int_equal(cfg.ranks.count, 1);
    parse_ok("ranks=LOCAL:[1,3]");
    assert_int_equal(cfg.ranks.local, 1);
    assert_int_equal(cfg.ranks.count, 2);
    parse_ok("ranks=0,ranks=all"); /* last wins */
    assert_int_equal(cfg.ranks.count, 0);
    /* 64 entries fit. */
    char text[512] = "ranks=0";
    for (int i = 1; i < TDM__CONF_RANKS_MAX; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), ",%d", 2 * i);
    parse_ok(text);
    assert_int_equal(cfg.ranks.count, TDM__CONF_RANKS_MAX);
    assert_int_equal(cfg.ranks.range[63].first, 126);
}

static void ranks_refuse_bad_lists(void **state)
{
    (void)state;
    parse_bad("ranks=5-3", "'ranks'", "'5-3'");
    parse_bad("ranks=0,8-x", "'ranks'", "'8-x'");
    parse_bad("ranks=-1", "'ranks'", "'-1'");
    parse_bad("ranks=2147483648", "'ranks'", "A-B");
    parse_bad("ranks=one", "'ranks'", "'one'");
    parse_bad("ranks=local:", "'ranks'", "no rank listed");
    parse_bad("ranks=[]", "'ranks'", "no rank listed");
    parse_bad("ranks=0-", "'ranks'", "'0-'");
    parse_bad("ranks=", "'ranks'", "empty value");
    /* A comma followed by something that is not a rank ends the list: here
     * an item without '='. */
    parse_bad("ranks=1,,2", "'2'", "no '='");
    char text[512] = "ranks=0";
    for (int i = 1; i <= TDM__CONF_RANKS_MAX; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), ",%d", 2 * i);
    parse_bad(text, "'ranks'", "at most 64");
}

static void ranks_select_by_rank_and_local_rank(void **state)
{
    (void)state;
    parse_ok("ranks=0,8-15");
    assert_true(tdm__config_rank_selected(&cfg, 0, 3));
    assert_false(tdm__config_rank_selected(&cfg, 7, 0));
    assert_true(tdm__config_rank_selected(&cfg, 8, 0));
    assert_true(tdm__config_rank_selected(&cfg, 15, 7));
    assert_false(tdm__config_rank_selected(&cfg, 16, 0));
    assert_true(tdm__config_rank_selected(&cfg, -1, -1)); /* no rank: rank 0 */
    parse_ok("ranks=1-3");
    assert_false(tdm__config_rank_selected(&cfg, -1, -1));
    parse_ok("ranks=local:0");
    assert_true(tdm__config_rank_selected(&cfg, 9, 0));
    assert_false(tdm__config_rank_selected(&cfg, 0, 1));
    assert_true(tdm__config_rank_selected(&cfg, 5, -1));
    parse_ok("record=all");
    assert_true(tdm__config_rank_selected(&cfg, 123456, 99));

    /* The launchers' variables reach it through procinfo; Cray PMI's local
     * rank and Flux's rank are among them. */
    static const char *const launcher_vars[] = {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "PMI_RANK",
                                       "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_PROCID",
                                       "SLURM_LOCALID", "FLUX_TASK_RANK"};
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    tdm_procinfo who;
    setenv("PMI_RANK", "6", 1);
    setenv("PMI_LOCAL_RANK", "2", 1);
    setenv("SLURM_PROCID", "0", 1); /* a batch script's, passed on: loses */
    tdm__procinfo_read(&who);
    assert_int_equal(who.rank, 6);
    assert_int_equal(who.local_rank, 2);
    parse_ok("ranks=local:2");
    assert_true(tdm__config_rank_selected(&cfg, who.rank, who.local_rank));
    parse_ok("ranks=0-5");
    assert_false(tdm__config_rank_selected(&cfg, who.rank, who.local_rank));
    unsetenv("PMI_RANK");
    unsetenv("PMI_LOCAL_RANK");
    unsetenv("SLURM_PROCID");
    setenv("FLUX_TASK_RANK", "11", 1);
    tdm__procinfo_read(&who);
    assert_int_equal(who.rank, 11);
    unsetenv("FLUX_TASK_RANK");
}

/* A rank that `ranks` leaves out runs untouched: no recording, nothing
 * printed, no file; a listed one records and writes its file. */
static void autoinit_ranks_left_out_run_untouched(void **state)
{
    (void)state;
    char base[] = "/tmp/tdm-ranks-XXXXXX";
    assert_non_null(mkdtemp(base));
    char text[512], path[600];
    snprintf(text, sizeof text, "dump=%s/r%%r.tdm,ranks=0,2-3,max_entries=100", base);
    static char buf[16384];
    int rec = -1;
    unsetenv("LOCAL_RANK");
    setenv("RANK", "1", 1);
    int rc = run_apply_in_child(text, buf, sizeof buf, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec, 0);
    assert_string_equal(buf, "");
    snprintf(path, sizeof path, "%s/r1.tdm", base);
    assert_int_equal(access(path, F_OK), -1);

    setenv("RANK", "2", 1);
    rc = run_apply_in_child(text, buf, sizeof buf, &rec);
    assert_int_equal(rc, 0);
    assert_int_equal(rec, 1);
    snprintf(path, sizeof path, "%s/r2.tdm", base);
    assert_int_equal(access(path, F_OK), 0);
    assert_non_null(strstr(buf, "tidemark: wrote snapshot to "));
    unsetenv("RANK");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(autoinit_bad_text_prints_one_line_and_stays_off),
        cmocka_unit_test(autoinit_help_prints_keys_and_stays_off),
        cmocka_unit_test(autoinit_records_and_dumps_at_exit),
        cmocka_unit_test(conf_check_accepts_what_loading_accepts),
        cmocka_unit_test(conf_check_refuses_with_the_line_loading_prints),
        cmocka_unit_test(conf_check_refuses_a_device_it_cannot_set_up),
        cmocka_unit_test(conf_check_message_buffer),
        cmocka_unit_test(conf_check_changes_nothing),
        cmocka_unit_test(ranks_take_lists_and_ranges),
        cmocka_unit_test(ranks_refuse_bad_lists),
        cmocka_unit_test(ranks_select_by_rank_and_local_rank),
        cmocka_unit_test(autoinit_ranks_left_out_run_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
