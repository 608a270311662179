/* tests/unit/test_config.c: TIDEMARK_CONF and the dump-path templates.
 *
 * Every key with good values (the parsed fields are checked), each kind of
 * bad value for every key type (one line naming key and value, recording
 * off), unknown keys, duplicates, empty items, blanks, help, the % codes of
 * the dump template with and without rank variables, numbered dump names,
 * folder creation, docs/configuration.md listing every key, and the
 * load-time path itself run in forked children (bad text changes nothing;
 * good text records and dumps at exit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "config.h"
#include "procinfo.h"
#include "snap_model.h"

#define GiB (UINT64_C(1) << 30)

static tdm__config cfg; /* 4 KiB+: not on the stack of every test */
static char err[TDM__CONF_ERR_MAX];

static void parse_ok(const char *text)
{
    tdm_status st = tdm__config_parse(text, &cfg, err, sizeof err);
    if (st != TDM_OK)
        fail_msg("'%s' should parse, got: %s", text, err);
    assert_string_equal(err, "");
}

/* Parses text that must be refused and checks the shape of the one line:
 * prefix, no newline, the key and the value named, "recording is off". */
static void parse_bad(const char *text, const char *must_contain1,
                      const char *must_contain2)
{
    tdm_status st = tdm__config_parse(text, &cfg, err, sizeof err);
    if (st != TDM_BAD_CONFIG)
        fail_msg("'%s' should be refused", text);
    assert_non_null(strstr(err, "tidemark: TIDEMARK_CONF: "));
    assert_ptr_equal(strstr(err, "tidemark: TIDEMARK_CONF: "), err);
    assert_null(strchr(err, '\n'));
    const char *tail = "; recording is off";
    assert_true(strlen(err) > strlen(tail));
    assert_string_equal(err + strlen(err) - strlen(tail), tail);
    if (must_contain1 && !strstr(err, must_contain1))
        fail_msg("'%s': message lacks '%s': %s", text, must_contain1, err);
    if (must_contain2 && !strstr(err, must_contain2))
        fail_msg("'%s': message lacks '%s': %s", text, must_contain2, err);
}

/* ---- defaults and the table ----------------------------------------------- */

static void defaults_are_documented_values(void **state)
{
    (void)state;
    tdm__config_defaults(&cfg);
    assert_int_equal(cfg.record, TDM_RECORD_ALL);
    assert_int_equal(cfg.context, TDM_CONTEXT_ALL);
    assert_int_equal(cfg.stacks, TDM_STACKS_NATIVE);
    assert_int_equal(cfg.max_entries, 1000000);
    assert_string_equal(cfg.dump, "tidemark-%h-%p.tdm");
    assert_int_equal(cfg.dump_on, TDM__DUMP_ON_EXIT);
    assert_int_equal(cfg.signal, SIGUSR2);
    assert_string_equal(cfg.alloc.device_kind, "sim");
    assert_int_equal(cfg.alloc.device_count, 1);
    assert_int_equal(cfg.alloc.device_capacity, 16 * GiB); /* as the docs say */
    assert_int_equal(cfg.alloc.host_accessible, 0);
    assert_int_equal(cfg.mode, TDM__CONF_MODE_OBSERVE);
    assert_int_equal(cfg.fork, TDM__CONF_FORK_FOLLOW);
    assert_int_equal(cfg.alloc.max_split_size, 0);
    for (int i = 0; i < TDM_ROUNDUP_INTERVALS; i++)
        assert_int_equal(cfg.alloc.roundup_power2_divisions[i], 0);
    assert_true(cfg.alloc.garbage_collection_threshold == 0.0);
    assert_int_equal(cfg.help, 0);
    /* The allocator's own defaults are the documented ones: a change there
     * must come with a change of the table and docs/configuration.md. */
    tdm__alloc_config alloc;
    tdm__alloc_config_defaults(&alloc);
    assert_string_equal(cfg.alloc.mode, alloc.mode);
    assert_string_equal(cfg.alloc.mode, "cache");
    assert_int_equal(cfg.alloc.device_capacity, alloc.device_capacity);
    assert_int_equal(cfg.alloc.device_count, alloc.device_count);
    assert_null(cfg.alloc.on_oom);

    /* NULL and "" are the defaults too. */
    parse_ok("");
    assert_int_equal(cfg.record, TDM_RECORD_ALL);
    parse_ok(NULL);
    assert_int_equal(cfg.max_entries, 1000000);
}

static void every_default_parses_to_the_default(void **state)
{
    (void)state;
    size_t n;
    const tdm__conf_key *keys = tdm__config_keys(&n);
    assert_true(n >= 10);
    static tdm__config defaults;
    tdm__config_defaults(&defaults);
    for (size_t i = 0; i < n; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s=%s", keys[i].name, keys[i].def);
        parse_ok(text);
        assert_memory_equal(&cfg, &defaults, sizeof cfg);
        assert_non_null(keys[i].help);
        assert_true(strlen(keys[i].help) > 10);
        assert_non_null(keys[i].values);
        /* Key names are unique. */
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(keys[i].name, keys[j].name);
    }
}

static void history_options_follow_the_config(void **state)
{
    (void)state;
    parse_ok("record=state,context=alloc,stacks=none,max_entries=77");
    tdm_history_options o;
    tdm__config_history_options(&cfg, &o);
    assert_int_equal(o.size, sizeof o);
    assert_int_equal(o.enabled, TDM_RECORD_STATE);
    assert_int_equal(o.context, TDM_CONTEXT_ALLOC);
    assert_int_equal(o.stacks, TDM_STACKS_NONE);
    assert_int_equal(o.max_entries, 77);
    assert_int_equal(o.clear_history, 0);
}

/* ---- each key, good values --------------------------------------------------- */

/* Integer-valued fields: the text and the value it must leave. */
static void int_keys_take_each_value(void **state)
{
    (void)state;
    /* dump_on is unsigned; reading it as int is allowed (same rank). */
    int *const dump_on = (int *)&cfg.dump_on;
    const struct { const char *text; const int *field; int want; } c[] = {
        {"record=off", &cfg.record, TDM_RECORD_OFF},
        {"record=state", &cfg.record, TDM_RECORD_STATE},
        {"record=all", &cfg.record, TDM_RECORD_ALL},
        {"record=ALL", &cfg.record, TDM_RECORD_ALL}, /* values ignore case */
        {"context=none", &cfg.context, TDM_CONTEXT_NONE},
        {"context=state", &cfg.context, TDM_CONTEXT_STATE},
        {"context=alloc", &cfg.context, TDM_CONTEXT_ALLOC},
        {"context=all", &cfg.context, TDM_CONTEXT_ALL},
        {"stacks=none", &cfg.stacks, TDM_STACKS_NONE},
        {"stacks=native", &cfg.stacks, TDM_STACKS_NATIVE},
        {"dump_on=exit", dump_on, TDM__DUMP_ON_EXIT},
        {"dump_on=signal", dump_on, TDM__DUMP_ON_SIGNAL},
        {"dump_on=oom", dump_on, TDM__DUMP_ON_OOM},
        {"dump_on=none", dump_on, 0},
        {"dump_on=exit+signal", dump_on, TDM__DUMP_ON_EXIT | TDM__DUMP_ON_SIGNAL},
        {"dump_on=signal|oom|exit", dump_on,
         TDM__DUMP_ON_EXIT | TDM__DUMP_ON_SIGNAL | TDM__DUMP_ON_OOM},
        {"dump_on= exit + signal ", dump_on, TDM__DUMP_ON_EXIT | TDM__DUMP_ON_SIGNAL},
        {"dump_on=exit+exit", dump_on, TDM__DUMP_ON_EXIT},
        {"signal=SIGUSR1", &cfg.signal, SIGUSR1},
        {"signal=USR1", &cfg.signal, SIGUSR1},
        {"signal=sigusr2", &cfg.signal, SIGUSR2},
        {"signal=10", &cfg.signal, 10}, /* SIGUSR1 on Linux */
        {"signal=SIGHUP", &cfg.signal, SIGHUP},
        {"signal=WINCH", &cfg.signal, SIGWINCH},
        {"signal=urg", &cfg.signal, SIGURG},
        {"sim_host_access=1", &cfg.alloc.host_accessible, 1},
        {"sim_host_access=true", &cfg.alloc.host_accessible, 1},
        {"sim_host_access=Yes", &cfg.alloc.host_accessible, 1},
        {"sim_host_access=on", &cfg.alloc.host_accessible, 1},
        {"sim_host_access=0", &cfg.alloc.host_accessible, 0},
        {"sim_host_access=FALSE", &cfg.alloc.host_accessible, 0},
        {"sim_host_access=no", &cfg.alloc.host_accessible, 0},
        {"sim_host_access=off", &cfg.alloc.host_accessible, 0},
        {"mode=observe", &cfg.mode, TDM__CONF_MODE_OBSERVE},
        {"mode=cache", &cfg.mode, TDM__CONF_MODE_CACHE},
        {"mode=Cache", &cfg.mode, TDM__CONF_MODE_CACHE},
        {"fork=follow", &cfg.fork, TDM__CONF_FORK_FOLLOW},
        {"fork=stop", &cfg.fork, TDM__CONF_FORK_STOP},
    };
    const size_t n = sizeof c / sizeof c[0];
    for (size_t i = 0; i < n; i++) {
        /* Set the key to another value first (the last one wins), so that
         * a value equal to the default must still be parsed to pass. */
        const char *before = NULL;
        for (size_t j = 0; j < n && !before; j++)
            if (c[j].field == c[i].field && c[j].want != c[i].want)
                before = c[j].text;
        char text[128];
        snprintf(text, sizeof text, "%s,%s", before, c[i].text);
        parse_ok(text);
        if (*c[i].field != c[i].want)
            fail_msg("'%s' gave %d, want %d", text, *c[i].field, c[i].want);
    }
    /* Real-time signals are not compile-time constants in glibc. */
    parse_ok("signal=SIGRTMIN");
    assert_int_equal(cfg.signal, SIGRTMIN);
    parse_ok("signal=SIGRTMIN+3");
    assert_int_equal(cfg.signal, SIGRTMIN + 3);
    parse_ok("signal=rtmax-1");
    assert_int_equal(cfg.signal, SIGRTMAX - 1);
}

static void alloc_mode_accepts_each_mode(void **state)
{
    (void)state;
    parse_ok("alloc_mode=passthrough,alloc_mode=cache");
    assert_string_equal(cfg.alloc.mode, "cache");
    parse_ok("alloc_mode=PassThrough");
    assert_string_equal(cfg.alloc.mode, "passthrough");
    parse_ok("alloc_mode=passthrough,device=sim:2x1G"); /* device keeps it */
    assert_string_equal(cfg.alloc.mode, "passthrough");
    assert_int_equal(cfg.alloc.device_count, 2);
    parse_bad("alloc_mode=caching", "'caching'", "cache|passthrough");
}

static void max_entries_accepts_whole_numbers(void **state)
{
    (void)state;
    parse_ok("max_entries=1");
    assert_int_equal(cfg.max_entries, 1);
    parse_ok("max_entries=250000");
    assert_int_equal(cfg.max_entries, 250000);
    parse_ok("max_entries=18446744073709551615");
    assert_true(cfg.max_entries == SIZE_MAX);
}

static void dump_accepts_templates(void **state)
{
    (void)state;
    parse_ok("dump=out/%h-r%r.tdm");
    assert_string_equal(cfg.dump, "out/%h-r%r.tdm");
    parse_ok("dump=/tmp/a b/%p-%l-%t-100%%.tdm"); /* inner blanks kept */
    assert_string_equal(cfg.dump, "/tmp/a b/%p-%l-%t-100%%.tdm");
    parse_ok("dump=plain");
    assert_string_equal(cfg.dump, "plain");
}

static void device_accepts_sim_forms(void **state)
{
    (void)state;
    parse_ok("device=sim");
    assert_string_equal(cfg.alloc.device_kind, "sim");
    assert_int_equal(cfg.alloc.device_count, 1);
    assert_int_equal(cfg.alloc.device_capacity, 16 * GiB);
    parse_ok("device=sim:8GiB");
    assert_int_equal(cfg.alloc.device_count, 1);
    assert_int_equal(cfg.alloc.device_capacity, 8 * GiB);
    parse_ok("device=sim:2x8GiB");
    assert_int_equal(cfg.alloc.device_count, 2);
    assert_int_equal(cfg.alloc.device_capacity, 8 * GiB);
    parse_ok("device=sim:4X512M");
    assert_int_equal(cfg.alloc.device_count, 4);
    assert_int_equal(cfg.alloc.device_capacity, 512u << 20);
    parse_ok("device=sim:1048576");
    assert_int_equal(cfg.alloc.device_capacity, 1048576);
    parse_ok("device=sim:64x1T");
    assert_int_equal(cfg.alloc.device_count, 64);
    assert_int_equal(cfg.alloc.device_capacity, UINT64_C(1) << 40);
    /* device and sim_host_access fill different fields of one struct. */
    parse_ok("sim_host_access=1,device=sim:2x1G");
    assert_int_equal(cfg.alloc.host_accessible, 1);
    assert_int_equal(cfg.alloc.device_count, 2);
    /* "sim" again goes back to the allocator's defaults. */
    parse_ok("device=sim:3x1G,device=sim");
    assert_int_equal(cfg.alloc.device_count, 1);
    assert_int_equal(cfg.alloc.device_capacity, 16 * GiB);
}

static void sizes_take_every_unit(void **state)
{
    (void)state;
    static const struct { const char *text; uint64_t want; } ok[] = {
        {"0", 0},           {"123", 123},        {"5B", 5},
        {"5b", 5},          {"1K", 1024},        {"1k", 1024},
        {"1KiB", 1024},     {"3M", 3u << 20},    {"3MiB", 3u << 20},
        {"2G", 2 * GiB},    {"2gib", 2 * GiB},   {"7 GiB", 7 * GiB},
        {"1T", UINT64_C(1) << 40}, {"1TiB", UINT64_C(1) << 40},
        {"16777215T", UINT64_C(16777215) << 40},
    };
    char why[200];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 42;
        if (tdm__config_parse_size(ok[i].text, &v, why, sizeof why) != 0)
            fail_msg("size '%s' refused: %s", ok[i].text, why);
        assert_int_equal(v, ok[i].want);
    }
    static const struct { const char *text, *why; } bad[] = {
        {"", "expected a number"},      {"GiB", "expected a number"},
        {"-1", "expected a number"},    {"1.5G", "unknown unit"},
        {"8X", "unknown unit"},         {"8GB", "ambiguous"},
        {"8kb", "ambiguous"},           {"16777216T", "too large"},
        {"99999999999999999999", "too large"}, {"1 2", "unknown unit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        why[0] = '\0';
        if (tdm__config_parse_size(bad[i].text, &v, why, sizeof why) == 0)
            fail_msg("size '%s' accepted", bad[i].text);
        if (!strstr(why, bad[i].why))
            fail_msg("size '%s': reason '%s' lacks '%s'", bad[i].text, why,
                     bad[i].why);
        assert_int_equal(v, 42);
    }
}

/* ---- bad values, one kind of key at a time ---------------------------------- */

/* Each kind of bad value for every kind of key: one line naming both. */
static void bad_values_name_key_and_value(void **state)
{
    (void)state;
    static const struct { const char *text, *want1, *want2; } c[] = {
        {"record=everything", "'everything'", "'record'"},
        {"record=everything", "off|state|all", NULL},
        {"context=stack", "'stack'", "none|state|alloc|all"},
        {"stacks=mixed", "'mixed'", "'stacks'"},
        {"record=1", "'1'", "'record'"},
        {"stacks=python", "'python'", "not yet supported"},
        {"max_entries=0", "'0'", "'max_entries'"},
        {"max_entries=-5", "'-5'", ">= 1"},
        {"max_entries=abc", "'abc'", "'max_entries'"},
        {"max_entries=12x", "'12x'", NULL},
        {"max_entries=1.5", "'1.5'", NULL},
        {"max_entries=1M", "'1M'", NULL},
        {"max_entries=99999999999999999999999", "'99999999999999999999999'", NULL},
        {"dump=out/%x.tdm", "'out/%x.tdm'", "unknown code '%x'"},
        {"dump=out/100%", "'out/100%'", "lone '%'"},
        {"dump=%P.tdm", "'%P.tdm'", "'dump'"},
        {"dump_on=never", "'never'", "unknown event 'never'"},
        {"dump_on=exit+", "'exit+'", "empty item"},
        {"dump_on=exit||signal", "'exit||signal'", "empty item"},
        {"dump_on=none+exit", "'none+exit'", "cannot be combined"},
        {"dump_on=exit,signal", "item 'signal' has no '='", NULL},
        {"signal=SIGKILL", "'SIGKILL'", "'signal'"},
        {"signal=SEGV", "'SEGV'", NULL},
        {"signal=SIGTERM", "'SIGTERM'", NULL},
        {"signal=SIGINT", "'SIGINT'", NULL},
        {"signal=9", "'9'", NULL},
        {"signal=0", "'0'", NULL},
        {"signal=999", "'999'", NULL},
        {"signal=SIGFOO", "'SIGFOO'", "SIGUSR2"},
        {"signal=RTMIN-1", "'RTMIN-1'", NULL},
        {"signal=RTMIN+999", "'RTMIN+999'", NULL},
        {"device=rocm", "'rocm'", "unknown device kind 'rocm'"},
        {"device=cuda:8GiB", "'cuda:8GiB'", "write just cuda"},
        {"device=ze:2x1G", "'ze:2x1G'", "write just ze"},
        {"device=cudax", "'cudax'", "unknown device kind"},
        {"mode=serve", "'serve'", "observe|cache"},
        {"fork=child", "'child'", "follow|stop"},
        {"max_split_size=lots", "'lots'", "'max_split_size'"},
        {"max_split_size=20MB", "'20MB'", "ambiguous"},
        {"roundup_power2_divisions=3", "'3'", "power of two"},
        {"roundup_power2_divisions=-4", "'-4'", "power of two"},
        {"roundup_power2_divisions=[256:1,512:3]", "'[256:1,512:3]'",
         "divisions must be a power of two"},
        {"roundup_power2_divisions=[300:2]", "'[300:2]'", "MiB a power of two"},
        {"roundup_power2_divisions=[256:2", "'[256:2'", "end with ']'"},
        {"roundup_power2_divisions=[]", "'[]'", "empty"},
        {"roundup_power2_divisions=[256]", "'[256]'", "MiB:divisions"},
        {"garbage_collection_threshold=1", "'1'", "between 0 and 1"},
        {"garbage_collection_threshold=1.5", "'1.5'", NULL},
        {"garbage_collection_threshold=0.5x", "'0.5x'", NULL},
        {"garbage_collection_threshold=.", "'.'", NULL},
        {"garbage_collection_threshold=-0.1", "'-0.1'", NULL},
        {"device=simulator", "'simulator'", "unknown device kind"},
        {"device=sim:", "'sim:'", "capacity"},
        {"device=sim:8GB", "'sim:8GB'", "ambiguous"},
        {"device=sim:8XB", "'sim:8XB'", NULL},
        {"device=sim:0", "'sim:0'", "more than 0"},
        {"device=sim:2x", "'sim:2x'", "capacity"},
        {"device=sim:0x8G", "'sim:0x8G'", "device count"},
        {"device=sim:65x1G", "'sim:65x1G'", "1 to 64"},
        {"device=sim:ax8G", "'sim:ax8G'", "device count"},
        {"device=sim:99999999999T", "'sim:99999999999T'", "too large"},
        {"sim_host_access=2", "'2'", "'sim_host_access'"},
        {"sim_host_access=maybe", "'maybe'", "0 or 1"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        parse_bad(c[i].text, c[i].want1, c[i].want2);
    /* A value longer than any path. */
    static char big[TDM__CONF_PATH_MAX + 64];
    memcpy(big, "dump=", 5);
    memset(big + 5, 'a', TDM__CONF_PATH_MAX + 10);
    parse_bad(big, "'dump'", "too long");
}

static void empty_values_are_refused(void **state)
{
    (void)state;
    size_t n;
    const tdm__conf_key *keys = tdm__config_keys(&n);
    for (size_t i = 0; i < n; i++) {
        char text[128];
        snprintf(text, sizeof text, "%s=", keys[i].name);
        parse_bad(text, "empty value", keys[i].name);
        snprintf(text, sizeof text, "%s=  ", keys[i].name);
        parse_bad(text, "empty value", keys[i].name);
    }
}

/* ---- item syntax ------------------------------------------------------------- */

static void unknown_keys(void **state)
{
    (void)state;
    parse_bad("recrod=all", "unknown key 'recrod'", "did you mean 'record'?");
    parse_bad("recrod=all", "valid keys: record, context, stacks, max_entries",
              "alloc_mode, sim_host_access, max_split_size, "
              "roundup_power2_divisions, garbage_collection_threshold, mode, "
              "fork");
    parse_bad("mdoe=cache", "unknown key 'mdoe'", "did you mean 'mode'?");
    parse_bad("colour=blue", "unknown key 'colour'", "valid keys");
    assert_null(strstr(err, "did you mean"));
    parse_bad("Record=all", "unknown key 'Record'", NULL); /* keys are lower case */
    parse_bad("record=all,bogus=1", "unknown key 'bogus'", NULL);
}

static void items_without_equals(void **state)
{
    (void)state;
    parse_bad("recordall", "item 'recordall' has no '='", "help");
    parse_bad("record=all,max_entries", "item 'max_entries' has no '='", NULL);
    parse_bad("=all", "empty key", "'=all'");
    parse_bad("record=all,HELP", "item 'HELP'", NULL);
}

static void control_characters_stay_on_one_line(void **state)
{
    (void)state;
    parse_bad("record=a\x01" "b", "'a?b'", NULL);
    parse_bad("rec\x02ord=all", "unknown key 'rec?ord'", NULL);
}

static void duplicate_keys_last_wins(void **state)
{
    (void)state;
    parse_ok("record=off,max_entries=5,record=state,max_entries=9");
    assert_int_equal(cfg.record, TDM_RECORD_STATE);
    assert_int_equal(cfg.max_entries, 9);
}

static void empty_items_are_skipped(void **state)
{
    (void)state;
    parse_ok(",,record=state,,,context=none,");
    assert_int_equal(cfg.record, TDM_RECORD_STATE);
    assert_int_equal(cfg.context, TDM_CONTEXT_NONE);
    parse_ok(",");
    assert_int_equal(cfg.record, TDM_RECORD_ALL);
    parse_ok(" , ,\t,");
    assert_int_equal(cfg.max_entries, 1000000);
}

static void blanks_around_items_keys_and_values(void **state)
{
    (void)state;
    parse_ok("  record = state ,\tcontext=\talloc\t, max_entries =12 \n");
    assert_int_equal(cfg.record, TDM_RECORD_STATE);
    assert_int_equal(cfg.context, TDM_CONTEXT_ALLOC);
    assert_int_equal(cfg.max_entries, 12);
    parse_ok("dump= out dir/x.tdm ");
    assert_string_equal(cfg.dump, "out dir/x.tdm");
}

static void help_is_an_item(void **state)
{
    (void)state;
    parse_ok("help");
    assert_int_equal(cfg.help, 1);
    parse_ok(" record=state , help ");
    assert_int_equal(cfg.help, 1);
    parse_ok("record=state");
    assert_int_equal(cfg.help, 0);

    size_t need = tdm__config_format_help(NULL, 0);
    assert_true(need > 500);
    char *text = malloc(need + 1);
    assert_non_null(text);
    assert_int_equal(tdm__config_format_help(text, need + 1), need);
    assert_int_equal(strlen(text), need);
    size_t n;
    const tdm__conf_key *keys = tdm__config_keys(&n);
    for (size_t i = 0; i < n; i++) {
        char line[128];
        snprintf(line, sizeof line, "\n  %-16s %s\n", keys[i].name, keys[i].values);
        if (!strstr(text, line))
            fail_msg("help lacks key %s", keys[i].name);
        snprintf(line, sizeof line, "default: %s\n", keys[i].def);
        if (!strstr(text, line))
            fail_msg("help lacks default of %s", keys[i].name);
        assert_non_null(strstr(text, keys[i].help));
    }
    assert_non_null(strstr(text, "K = KiB = 1024"));
    /* A short buffer gets a cut, terminated copy and the full length. */
    char small[40];
    assert_int_equal(tdm__config_format_help(small, sizeof small), need);
    assert_int_equal(strlen(small), sizeof small - 1);
    free(text);
}

/* ---- dump path templates ------------------------------------------------------ */

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

    setenv("RANK", "5", 1);
    setenv("LOCAL_RANK", "2", 1);
    assert_int_equal(tdm__dump_path_for_process("r%r-l%l", t, out, sizeof out),
                     TDM_OK);
    assert_string_equal(out, "r5-l2");
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");

    setenv("SLURM_PROCID", "17", 1);
    setenv("SLURM_LOCALID", "3", 1);
    assert_int_equal(tdm__dump_path_for_process("r%r-l%l", t, out, sizeof out),
                     TDM_OK);
    assert_string_equal(out, "r17-l3");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_LOCALID");

    setenv("OMPI_COMM_WORLD_RANK", "9", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "4", 1);
    assert_int_equal(tdm__dump_path_for_process("r%r-l%l", t, out, sizeof out),
                     TDM_OK);
    assert_string_equal(out, "r9-l4");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");

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

/* ---- docs/configuration.md lists every key ---------------------------------- */

static void docs_list_every_key(void **state)
{
    (void)state;
    const char *path = TDM_TEST_DATA_DIR "/../../docs/configuration.md";
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    static char doc[256 * 1024];
    size_t len = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[len] = '\0';
    size_t n;
    const tdm__conf_key *keys = tdm__config_keys(&n);
    for (size_t i = 0; i < n; i++) {
        char want[256];
        /* Each key has a row of the reference table: | `key` | ... | `default` | */
        snprintf(want, sizeof want, "| `%s` |", keys[i].name);
        if (!strstr(doc, want))
            fail_msg("docs/configuration.md has no table row for key '%s'",
                     keys[i].name);
        const char *row = strstr(doc, want);
        const char *eol = strchr(row, '\n');
        snprintf(want, sizeof want, "`%s`", keys[i].def);
        const char *d = strstr(row, want);
        if (!d || (eol && d > eol))
            fail_msg("docs/configuration.md: the row of '%s' lacks its default %s",
                     keys[i].name, want);
        /* Every value name of enum keys is in the row too. */
        for (int k = 0; keys[i].names && keys[i].names[k]; k++) {
            snprintf(want, sizeof want, "`%s`", keys[i].names[k]);
            const char *v = strstr(row, want);
            if (!v || (eol && v > eol))
                fail_msg("docs/configuration.md: the row of '%s' lacks value %s",
                         keys[i].name, want);
        }
    }
}

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
        cmocka_unit_test(defaults_are_documented_values),
        cmocka_unit_test(every_default_parses_to_the_default),
        cmocka_unit_test(history_options_follow_the_config),
        cmocka_unit_test(int_keys_take_each_value),
        cmocka_unit_test(alloc_mode_accepts_each_mode),
        cmocka_unit_test(max_entries_accepts_whole_numbers),
        cmocka_unit_test(dump_accepts_templates),
        cmocka_unit_test(device_accepts_sim_forms),
        cmocka_unit_test(sizes_take_every_unit),
        cmocka_unit_test(bad_values_name_key_and_value),
        cmocka_unit_test(empty_values_are_refused),
        cmocka_unit_test(unknown_keys),
        cmocka_unit_test(items_without_equals),
        cmocka_unit_test(control_characters_stay_on_one_line),
        cmocka_unit_test(duplicate_keys_last_wins),
        cmocka_unit_test(empty_items_are_skipped),
        cmocka_unit_test(blanks_around_items_keys_and_values),
        cmocka_unit_test(help_is_an_item),
        cmocka_unit_test(template_codes_expand),
        cmocka_unit_test(template_errors),
        cmocka_unit_test(template_takes_ranks_from_the_environment),
        cmocka_unit_test(suffix_goes_before_the_extension),
        cmocka_unit_test(missing_folders_are_created),
        cmocka_unit_test(docs_list_every_key),
        cmocka_unit_test(autoinit_bad_text_prints_one_line_and_stays_off),
        cmocka_unit_test(autoinit_help_prints_keys_and_stays_off),
        cmocka_unit_test(autoinit_records_and_dumps_at_exit),
        cmocka_unit_test(ranks_take_lists_and_ranges),
        cmocka_unit_test(ranks_refuse_bad_lists),
        cmocka_unit_test(ranks_select_by_rank_and_local_rank),
        cmocka_unit_test(autoinit_ranks_left_out_run_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
