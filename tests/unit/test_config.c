/* tests/unit/test_config.c: the TIDEMARK_CONF key table and its parser.
 *
 * Every key with good values (the parsed fields are checked), each kind of
 * bad value for every key type (one line naming key and value, recording
 * off), unknown keys, duplicates, empty items, blanks, help, and
 * docs/configuration.md listing every key.  The dump-path templates are in
 * test_dump_path.c, the load-time path and `ranks` in test_config_load.c. */
#include <stdlib.h>
#include <signal.h>

#include "config_fixtures.h"

#define GiB (UINT64_C(1) << 30)

/* ---- defaults and the table ----------------------------------------------- */

static void defaults_are_documented_values(void **state)
{
    (void)state;
    tdm__config_defaults(&cfg);
    assert_int_equal(cfg.record, TDM_RECORD_ALL);
    assert_int_equal(cfg.context, TDM_CONTEXT_ALL);
    assert_int_equal(cfg.stacks, TDM__CONF_STACKS_AUTO);
    assert_int_equal(cfg.max_entries, 1000000);
    assert_string_equal(cfg.dump, "tidemark-%h-%p.tdm");
    assert_int_equal(cfg.dump_on, TDM__DUMP_ON_EXIT);
    assert_int_equal(cfg.signal, SIGUSR2);
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_SIM);
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
        /* A key whose default is no value (hide) cannot be written so:
         * the empty text stands for it. */
        snprintf(text, sizeof text, keys[i].def[0] ? "%s=%s" : "", keys[i].name, keys[i].def);
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
    /* stacks=auto (the default): native here, a program without an
     * interpreter (tests/python/test_python_default_stacks.py has one). */
    parse_ok("record=all");
    tdm__config_history_options(&cfg, &o);
    assert_int_equal(o.stacks, TDM_STACKS_NATIVE);
    parse_ok("stacks=python");
    tdm__config_history_options(&cfg, &o);
    assert_int_equal(o.stacks, TDM_STACKS_PYTHON);
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
        {"stacks=python", &cfg.stacks, TDM_STACKS_PYTHON},
        {"stacks=all", &cfg.stacks, TDM_STACKS_ALL},
        {"stacks=auto", &cfg.stacks, TDM__CONF_STACKS_AUTO},
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

/* ipc_libraries= names the start of library file names, joined by ':';
 * anything that could never match a file name is refused. */
static void ipc_libraries_take_names(void **state)
{
    (void)state;
    parse_ok("");
    assert_string_equal(cfg.ipc_libraries, "");
    parse_ok("ipc_libraries=libmpi_cuda");
    assert_string_equal(cfg.ipc_libraries, "libmpi_cuda");
    parse_ok("ipc_libraries=libfoo:libbar.so.2,mode=cache");
    assert_string_equal(cfg.ipc_libraries, "libfoo:libbar.so.2");
    parse_bad("ipc_libraries=/usr/lib/libfoo.so", "'ipc_libraries'", "joined by ':'");
    parse_bad("ipc_libraries=libfoo::libbar", "'ipc_libraries'", "joined by ':'");
    parse_bad("ipc_libraries=libfoo:", "'ipc_libraries'", "joined by ':'");
    parse_bad("ipc_libraries=:libfoo", "'ipc_libraries'", "joined by ':'");
    char long_value[400] = "ipc_libraries=";
    memset(long_value + strlen(long_value), 'a', 300);
    parse_bad(long_value, "'ipc_libraries'", "longer than 255");
}

/* hide= is checked as an extended regular expression, may be given more
 * than once (each counted) and changes nothing in recording. */
static void hide_takes_regular_expressions(void **state)
{
    (void)state;
    parse_ok("hide=device_alloc");
    assert_int_equal(cfg.hides, 1);
    parse_ok("hide=^my_(malloc|alloc)$,hide=[a,b]wrap,dump=x.tdm");
    assert_int_equal(cfg.hides, 2);
    assert_string_equal(cfg.dump, "x.tdm");
    parse_bad("hide=(", "'('", "not a regular expression");
    parse_bad("hide=a{2", "'a{2'", "'hide'");
    /* Patterns the C library would expand into gigabytes when compiling
     * them, in the recorded program (a fuzzer's finding: 30 stacked '+'
     * took 3 GB): refused before they are compiled. */
    parse_bad("hide=\x01+++++++++++++++++++++++++++++^foo(bar|baz)$", "'hide'",
              "stacked repetition");
    parse_bad("hide=((((a{99}){99}){99}){99})", "'hide'", "too large");
    parse_ok("hide=^(c10::|at::)[a-z_]+(\\.isra)?$,hide=x{2}y*z?");
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
    /* spill: a template too; "off" in any case is off, not a file. */
    parse_ok("spill=run-%p.spill");
    assert_string_equal(cfg.spill, "run-%p.spill");
    parse_ok("spill=OFF");
    assert_string_equal(cfg.spill, "off");
    parse_ok("spill=Off");
    assert_string_equal(cfg.spill, "off");
}

static void device_accepts_sim_forms(void **state)
{
    (void)state;
    parse_ok("device=sim");
    assert_int_equal(cfg.alloc.device_kind, TDM_VENDOR_SIM);
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
        {"stacks=pyhton", "'pyhton'", "none|native|python|all"},
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
        {"dump=newdir/", "'newdir/'", "names a folder"},
        {"dump=out/.", "'out/.'", "names a folder"},
        {"dump=..", "'..'", "names a folder"},
        {"spill=spills/", "'spills/'", "names a folder"},
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
              "roundup_power2_divisions, garbage_collection_threshold, "
              "expandable_segments, mode, ipc_libraries, fork");
    parse_bad("mdoe=cache", "unknown key 'mdoe'", "did you mean 'mode'?");
    parse_bad("colour=blue", "unknown key 'colour'", "valid keys");
    assert_null(strstr(err, "did you mean"));
    /* Keys are lower case, as the table, the docs and `tidemark run` name
     * them; another case is refused, with the key it stands for. */
    parse_bad("Record=all", "unknown key 'Record'", "did you mean 'record'?");
    parse_bad("DUMP=x.tdm", "unknown key 'DUMP'", "did you mean 'dump'?");
    parse_bad("MAX_ENTRIES=5", "unknown key 'MAX_ENTRIES'", "did you mean 'max_entries'?");
    parse_bad("Dump_Onn=exit", "unknown key 'Dump_Onn'", "did you mean 'dump_on'?");
    parse_bad(" RANKS=0,8-15", "unknown key 'RANKS'", "did you mean 'ranks'?");
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
    /* Written as \xNN, as every tidemark message writes them. */
    parse_bad("record=a\x01" "b", "'a\\x01b'", NULL);
    parse_bad("rec\x02ord=all", "unknown key 'rec\\x02ord'", NULL);
    parse_bad("dump=a%\x1b.tdm", "unknown code '%\\x1b'", NULL);
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
        /* (an empty default, as `hide`'s, is written "none") */
        snprintf(want, sizeof want, keys[i].def[0] ? "`%s`" : "none", keys[i].def);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_documented_values),
        cmocka_unit_test(every_default_parses_to_the_default),
        cmocka_unit_test(history_options_follow_the_config),
        cmocka_unit_test(int_keys_take_each_value),
        cmocka_unit_test(alloc_mode_accepts_each_mode),
        cmocka_unit_test(hide_takes_regular_expressions),
        cmocka_unit_test(ipc_libraries_take_names),
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
        cmocka_unit_test(docs_list_every_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
