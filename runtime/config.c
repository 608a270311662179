/* runtime/config.c: the TIDEMARK_CONF key table and its parser.
 *
 * Owns: the table of keys (one row per setting), their value parsers, the
 * defaults (the default of every key is text in its row, parsed by the same
 * parser, so a default can never be something the parser would refuse), the
 * help text and the error line.
 *
 * Invariants: the parser is strict.  It accepts exactly what the table
 * documents and stops at the first thing it cannot accept, producing one
 * line that names the key and the value; the caller prints that line and
 * leaves recording off.  It never prints, allocates or touches globals, so
 * it is safe in a load-time constructor and in tests.
 *
 * Lock: none; every function works on caller-owned memory.
 */
#include "config.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <regex.h>
#include <string.h>

#include "common.h"
#include "format_rules.h"
#include "vendor.h"

/* Longest key we look at; longer ones are unknown by definition. */
#define KEY_MAX 64
/* Most sim devices one `device` setting may ask for. */
#define SIM_MAX_DEVICES 64

static const char *const record_names[] = {"off", "state", "all", NULL};
static const char *const context_names[] = {"none", "state", "alloc", "all",
                                            NULL};
static const char *const stacks_names[] = {"none", "native", "python", "all",
                                           "auto", NULL};
_Static_assert(TDM__CONF_STACKS_AUTO == 4, "stacks_names: auto after the API's modes");
/* The allocator's modes, as alloc/ names them (tdm__alloc_config.mode). */
static const char *const alloc_mode_names[] = {"cache", "passthrough", NULL};
/* The hooks' modes (TDM__CONF_MODE_*) and the fork choices
 * (TDM__CONF_FORK_*), in enum order. */
static const char *const hook_mode_names[] = {"observe", "cache", NULL};
static const char *const fork_names[] = {"follow", "stop", NULL};
static const char *const stop_signals_names[] = {"snapshot", "off", NULL};
static const char *const torch_tensors_names[] = {"history", "pluggable", "off",
                                                  NULL};

/* The device= forms of every vendor (base/vendors.def), each after a
 * '|': the key table documents device_forms + 1.  A vendor absent at run
 * time reports "not available" at the first allocation. */
static const char device_forms[] =
#define TDM_VENDOR(id, name, forms, ...) "|" forms
#include "vendors.def"
    ;

void tdm__config_why(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

/* Parses decimal digits [s, ...) into *out, stopping at the first
 * non-digit (*end).  -1 on no digits or overflow. */
static int parse_u64_prefix(const char *s, uint64_t *out, const char **end)
{
    uint64_t v = 0;
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    *end = p;
    return 0;
}

/* ---- value parsers ------------------------------------------------------ */

static int parse_enum(const tdm__conf_key *key, const char *value, void *field,
                      char *why, size_t why_len)
{
    for (int i = 0; key->names[i]; i++) {
        if (strcasecmp(value, key->names[i]) == 0) {
            *(int *)field = i;
            return 0;
        }
    }
    tdm__config_why(why, why_len, "expected %s", key->values);
    return -1;
}

static int parse_alloc_mode(const tdm__conf_key *key, const char *value,
                            void *field, char *why, size_t why_len)
{
    int v;
    if (parse_enum(key, value, &v, why, why_len) != 0)
        return -1;
    snprintf(field, sizeof ((tdm__alloc_config *)0)->mode, "%s", key->names[v]);
    return 0;
}

static int parse_count(const tdm__conf_key *key, const char *value,
                       void *field, char *why, size_t why_len)
{
    uint64_t v;
    const char *end;
    if (parse_u64_prefix(value, &v, &end) != 0 || *end != '\0' || v < 1 ||
        v > SIZE_MAX) {
        tdm__config_why(why, why_len, "expected a whole number >= 1, such as %s",
                        key->def);
        return -1;
    }
    *(size_t *)field = (size_t)v;
    return 0;
}

static int parse_template(const tdm__conf_key *key, const char *value,
                          void *field, char *why, size_t why_len)
{
    if (strlen(value) >= TDM__CONF_PATH_MAX) {
        tdm__config_why(why, why_len, "longer than %d bytes", TDM__CONF_PATH_MAX - 1);
        return -1;
    }
    if (tdm__dump_path_check(value, why, why_len) != 0)
        return -1;
    memcpy(field, value, strlen(value) + 1);
    return 0;
}

/* `spill`: off, or a path template as `dump` takes. */
static int parse_spill(const tdm__conf_key *key, const char *value, void *field,
                       char *why, size_t why_len)
{
    if (strcasecmp(value, "off") == 0 || value[0] == '\0') {
        /* "off" as readers test it, in whatever case it was written;
         * "": the default place. */
        memcpy(field, value[0] ? "off" : "", value[0] ? 4 : 1);
        return 0;
    }
    return parse_template(key, value, field, why, why_len);
}

/* `hide`: an extended regular expression (POSIX, as the readers' --hide
 * takes it).  Recording does not use it: it is checked here so that a bad
 * one is said when the program starts, and travels in the snapshot's
 * config text to every command that shows stacks.  May be given more than
 * once; the default, empty, hides nothing. */
static int parse_regex(const tdm__conf_key *key, const char *value, void *field, char *why,
                       size_t why_len)
{
    (void)key;
    if (!value[0])
        return 0;
    regex_t re;
    char msg[128];
    if (tdm__regex_compile(&re, value, msg, sizeof msg) != 0) {
        tdm__config_why(why, why_len, "not a regular expression: %s", msg);
        return -1;
    }
    regfree(&re);
    ++*(int *)field;
    return 0;
}

/* `category_rules`: a rules file (format/format_rules.h).  Recording does
 * not use it: it is read and checked here so that a bad one is said when
 * the program starts, with its file:line, and its path travels in the
 * snapshot's config text to the commands that show categories. */
static int parse_rules_file(const tdm__conf_key *key, const char *value, void *field,
                            char *why, size_t why_len)
{
    (void)key;
    if (!value[0]) {
        *(int *)field = 0;
        return 0;
    }
    tdm_category_rules rules = {0};
    int rc = tdm__category_rules_load(&rules, value, why, why_len);
    tdm__category_rules_free(&rules);
    if (rc != 0)
        return -1;
    *(int *)field = 1;
    return 0;
}

static int parse_bool(const tdm__conf_key *key, const char *value, void *field,
                      char *why, size_t why_len)
{
    static const char *const no[] = {"0", "false", "no", "off"};
    static const char *const yes[] = {"1", "true", "yes", "on"};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        if (strcasecmp(value, no[i]) == 0) {
            *(int *)field = 0;
            return 0;
        }
        if (strcasecmp(value, yes[i]) == 0) {
            *(int *)field = 1;
            return 0;
        }
    }
    tdm__config_why(why, why_len, "expected 0 or 1");
    return -1;
}

static int parse_dump_on(const tdm__conf_key *key, const char *value,
                         void *field, char *why, size_t why_len)
{
    static const struct { const char *name; unsigned bit; } words[] = {
        {"exit", TDM__DUMP_ON_EXIT},
        {"signal", TDM__DUMP_ON_SIGNAL},
        {"oom", TDM__DUMP_ON_OOM},
        {"none", 0},
    };
    unsigned bits = 0;
    int saw_none = 0, saw_other = 0;
    const char *p = value;
    for (;;) {
        const char *b = p, *e = p + strcspn(p, "+|");
        const char *next = *e ? e + 1 : NULL;
        tdm__config_trim(&b, &e);
        size_t n = (size_t)(e - b);
        size_t i;
        for (i = 0; i < sizeof words / sizeof words[0]; i++) {
            if (strlen(words[i].name) == n && strncasecmp(b, words[i].name, n) == 0)
                break;
        }
        if (i == sizeof words / sizeof words[0]) {
            if (n == 0)
                tdm__config_why(why, why_len, "empty item; expected %s", key->values);
            else
                tdm__config_why(why, why_len, "unknown event '%.*s'; expected %s",
                                (int)(n > 64 ? 64 : n), b, key->values);
            return -1;
        }
        if (words[i].bit == 0)
            saw_none = 1;
        else
            saw_other = 1;
        bits |= words[i].bit;
        if (!next)
            break;
        p = next;
    }
    if (saw_none && saw_other) {
        tdm__config_why(why, why_len, "'none' cannot be combined with other events");
        return -1;
    }
    *(unsigned *)field = bits;
    return 0;
}

/* Signals a dump may be asked with.  Others are refused: SIGKILL/SIGSTOP
 * cannot be caught; fault signals (SEGV, BUS, ...) would re-fault forever
 * once handled; INT, TERM, QUIT and the like are how programs are stopped,
 * and a handler that lets the program go on would change that. */
static const struct { const char *name; int number; } dump_signals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
    {"WINCH", SIGWINCH}, {"URG", SIGURG},
};

static int signal_allowed(int sig)
{
    for (size_t i = 0; i < sizeof dump_signals / sizeof dump_signals[0]; i++)
        if (dump_signals[i].number == sig)
            return 1;
    return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

static int parse_signal(const tdm__conf_key *key, const char *value,
                        void *field, char *why, size_t why_len)
{
    const char *s = value;
    int sig = -1;
    uint64_t n;
    const char *end;
    if (parse_u64_prefix(s, &n, &end) == 0) {
        if (*end == '\0' && n <= (uint64_t)SIGRTMAX)
            sig = (int)n;
    } else {
        if (strncasecmp(s, "SIG", 3) == 0)
            s += 3;
        for (size_t i = 0; i < sizeof dump_signals / sizeof dump_signals[0]; i++)
            if (strcasecmp(s, dump_signals[i].name) == 0)
                sig = dump_signals[i].number;
        if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
            int base = strncasecmp(s, "RTMIN", 5) == 0 ? SIGRTMIN : SIGRTMAX;
            int dir = base == SIGRTMIN ? 1 : -1;
            const char *r = s + 5;
            if (*r == '\0') {
                sig = base;
            } else if (*r == (dir > 0 ? '+' : '-') &&
                       parse_u64_prefix(r + 1, &n, &end) == 0 && *end == '\0' &&
                       n <= (uint64_t)(SIGRTMAX - SIGRTMIN)) {
                sig = base + dir * (int)n;
            }
        }
    }
    if (sig <= 0 || !signal_allowed(sig)) {
        tdm__config_why(why, why_len,
                        "expected one of SIGUSR1, SIGUSR2, SIGHUP, SIGWINCH, SIGURG, "
                        "SIGRTMIN+n, SIGRTMAX-n or its number");
        return -1;
    }
    *(int *)field = sig;
    return 0;
}

static int parse_device(const tdm__conf_key *key, const char *value,
                        void *field, char *why, size_t why_len)
{
    tdm__alloc_config *alloc = field;
    tdm__alloc_config defaults;
    size_t kind_len = strcspn(value, ":");
    int k;
    for (k = 0; k < TDM_VENDOR_COUNT; k++) {
        const char *name = tdm__vendor_name((tdm_vendor)k);
        if (strlen(name) == kind_len && strncasecmp(value, name, kind_len) == 0)
            break;
    }
    if (k == TDM_VENDOR_COUNT) {
        tdm__config_why(why, why_len, "unknown device kind '%.*s'; expected %s",
                        (int)(kind_len > 32 ? 32 : kind_len), value, key->values);
        return -1;
    }
    tdm__alloc_config_defaults(&defaults);
    uint64_t count = (uint64_t)defaults.device_count;
    uint64_t capacity = defaults.device_capacity;
    if (k != TDM_VENDOR_SIM && value[kind_len] != '\0') {
        tdm__config_why(why, why_len, "a vendor's devices are its own: write just %s",
                        tdm__vendor_name((tdm_vendor)k));
        return -1;
    }
    if (value[kind_len] == ':') {
        const char *spec = value + kind_len + 1;
        const char *x = strpbrk(spec, "xX");
        const char *size_text = spec;
        if (x) {
            const char *end;
            if (parse_u64_prefix(spec, &count, &end) != 0 || end != x ||
                count < 1 || count > SIM_MAX_DEVICES) {
                tdm__config_why(why, why_len,
                                "device count before 'x' must be 1 to %d (as in sim:2x8GiB)",
                                SIM_MAX_DEVICES);
                return -1;
            }
            size_text = x + 1;
        }
        char size_why[160];
        if (tdm__config_parse_size(size_text, &capacity, size_why,
                                   sizeof size_why) != 0) {
            tdm__config_why(why, why_len, "capacity: %s; e.g. sim:8GiB or sim:2x8GiB",
                            size_why);
            return -1;
        }
        if (capacity == 0) {
            tdm__config_why(why, why_len, "capacity must be more than 0 bytes");
            return -1;
        }
    }
    alloc->device_kind = (tdm_vendor)k;
    alloc->device_count = (int)count;
    alloc->device_capacity = capacity;
    return 0;
}

/* file_mode: an octal permission mode such as 0600 or 640, within 0777;
 * snapshots are private unless the user says otherwise. */
static int parse_file_mode(const tdm__conf_key *key, const char *value, void *field,
                           char *why, size_t why_len)
{
    (void)key;
    unsigned mode = 0;
    size_t n = 0;
    for (; value[n] >= '0' && value[n] <= '7' && n < 5; n++)
        mode = mode * 8 + (unsigned)(value[n] - '0');
    if (n == 0 || value[n] != '\0' || mode > 0777) {
        tdm__config_why(why, why_len, "expected an octal mode from 0 to 0777, as 0600 or 0640");
        return -1;
    }
    *(unsigned *)field = mode;
    return 0;
}

/* simulate: the GPU of the simulated CUDA platform `tidemark run` starts the
 * command on (simcuda/, docs/simulate.md): off, or [Nx]PRESET or
 * [Nx]cuda:SIZE.  The presets are simcuda/core/preset.c's
 * (tests/simcuda/test_run_simulate.sh checks both lists agree). */
static int parse_simulate(const tdm__conf_key *key, const char *value, void *field,
                          char *why, size_t why_len)
{
    static const char *const presets[] = {"h100", "h200", "a100-40g", "a100-80g"};
    (void)key;
    const char *gpu = value;
    if (strcmp(value, "off") == 0) {
        ((char *)field)[0] = '\0';
        return 0;
    }
    if (isdigit((unsigned char)*gpu)) {
        const char *end;
        uint64_t n;
        if (parse_u64_prefix(gpu, &n, &end) != 0 || (*end != 'x' && *end != 'X') || n < 1 ||
            n > 16) {
            tdm__config_why(why, why_len, "device count before 'x' must be 1 to 16 (as in 8xh100)");
            return -1;
        }
        gpu = end + 1;
    }
    int ok = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        ok |= strcasecmp(gpu, presets[i]) == 0;
    if (!ok && strncasecmp(gpu, "cuda:", 5) == 0) {
        uint64_t size;
        char size_why[160];
        ok = tdm__config_parse_size(gpu + 5, &size, size_why, sizeof size_why) == 0 && size > 0;
    }
    if (!ok || strlen(value) >= TDM__CONF_SIMULATE_MAX) {
        tdm__config_why(why, why_len, "expected off, h100, h200, a100-40g, a100-80g, "
                                      "cuda:SIZE, or Nx one of them (as in 8xh100)");
        return -1;
    }
    memcpy(field, value, strlen(value) + 1);
    return 0;
}

/* ipc_libraries: names of programs or libraries, joined by ':', each the
 * start of a file name (libnccl matches libnccl.so.2).  Names only: a '/' or a blank
 * would never match a file name, so it is refused rather than ignored. */
static int parse_ipc_libraries(const tdm__conf_key *key, const char *value, void *field,
                               char *why, size_t why_len)
{
    (void)key;
    size_t n = strlen(value);
    if (n >= TDM__CONF_IPC_LIBRARIES_MAX) {
        tdm__config_why(why, why_len, "longer than %d characters",
                        TDM__CONF_IPC_LIBRARIES_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];
        int name_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' || c == '+';
        int empty_item = c == ':' && (i == 0 || value[i - 1] == ':' || i + 1 == n);
        if ((!name_char && c != ':') || empty_item) {
            tdm__config_why(why, why_len, "expected library names joined by ':' "
                                          "(as libfoo:libbar), each the start of a file name");
            return -1;
        }
    }
    memcpy(field, value, n + 1);
    return 0;
}

/* ---- the table ----------------------------------------------------------- */

#define FIELD(member) offsetof(tdm__config, member)

static const tdm__conf_key keys[] = {
    {"record", "off|state|all", "all",
     "what to record: off records nothing; state keeps the stack of every "
     "live block; all also keeps a ring of the last max_entries events",
     parse_enum, FIELD(record), record_names},
    {"context", "none|state|alloc|all", "all",
     "where stacks are kept: none; state (live blocks only); alloc (also on "
     "alloc events); all (also captured at free)",
     parse_enum, FIELD(context), context_names},
    {"stacks", "none|native|python|all|auto", "auto",
     "which stacks to capture: none; native return addresses (symbolized "
     "at dump); python, the Python frames of a thread running Python code "
     "(else native); all, native with the interpreter's frames replaced by "
     "the Python frames they ran; auto, all in a Python program and native "
     "in any other",
     parse_enum, FIELD(stacks), stacks_names},
    {"max_entries", "whole number >= 1", "1000000",
     "ring capacity in events; older events are overwritten and counted as "
     "dropped",
     parse_count, FIELD(max_entries), NULL},
    {"dump", "path template", "tidemark-%h-%p.tdm",
     "where snapshots go: %p pid, %h host, %r rank (0 if none), %l local rank "
     "(0 if none), %t start time (UTC, YYYYmmdd-HHMMSS), %% a percent sign; "
     "missing folders are created",
     parse_template, FIELD(dump), NULL},
    {"spill", "path template|off", "",
     "kill-safe history: the ring and stacks live in this file (shared "
     "memory the kernel keeps when the process is killed or crashes), read "
     "back by `tidemark recover`; removed after the exit snapshot; empty: "
     "$TMPDIR if absolute, else /dev/shm, else /tmp; then /tidemark-UID/ + "
     "the dump's name + .spill; codes as dump",
     parse_spill, FIELD(spill), NULL},
    {"dump_on", "exit|signal|oom|none, joined by + or |", "exit",
     "when to write a snapshot: exit (normal process exit), signal (on "
     "`signal`; the program goes on; a new file each time), oom (each time "
     "a device allocation runs out of memory, at most 16), none",
     parse_dump_on, FIELD(dump_on), NULL},
    {"stop_signals", "snapshot|off", "snapshot",
     "SIGINT and SIGTERM, where the program leaves them at their default: "
     "snapshot writes the exit snapshot (dump_on exit), then the signal ends "
     "the program as before; off leaves them alone (tidemark run asks for "
     "its own)",
     parse_enum, FIELD(stop_signals), stop_signals_names},
    {"signal", "SIGUSR1|SIGUSR2|SIGHUP|SIGWINCH|SIGURG|SIGRTMIN+n|SIGRTMAX-n",
     "SIGUSR2",
     "the signal that asks for a snapshot when dump_on has signal (name, with "
     "or without SIG, or number)",
     parse_signal, FIELD(signal), NULL},
    {"device", device_forms + 1, "sim",
     "the devices tidemark serves: N simulated devices (default 1) of "
     "CAPACITY bytes each (default 16GiB), as in sim:8GiB or sim:2x8GiB; or "
     "a vendor's devices",
     parse_device, FIELD(alloc), NULL},
    {"alloc_mode", "cache|passthrough", "cache",
     "how device memory is served: cache (a caching allocator, as PyTorch's) "
     "or passthrough (each allocation its own segment from the device)",
     parse_alloc_mode, FIELD(alloc.mode), alloc_mode_names},
    {"sim_host_access", "0|1", "0",
     "1 maps sim device memory readable and writable by the host, for "
     "programs that touch their data; 0 keeps it inaccessible like real "
     "device memory",
     parse_bool, FIELD(alloc.host_accessible), NULL},
    {"max_split_size", "size (0 = no limit)", "0",
     "cache: cached blocks this large or larger are never split (sizes "
     "under 20MiB count as 20MiB), as PyTorch's max_split_size_mb",
     tdm__config_parse_bytes, FIELD(alloc.max_split_size), NULL},
    {"roundup_power2_divisions", "power of two, or [MiB:N,...,>:N]", "0",
     "cache: round requests up to one of N equal steps between powers of two, "
     "for every size or per power-of-two interval in MiB, as PyTorch's; 0 "
     "or 1 = plain 512-byte rounding",
     tdm__config_parse_roundup, FIELD(alloc.roundup_power2_divisions), NULL},
    {"garbage_collection_threshold", "0 or a fraction in (0, 1)", "0",
     "cache: when reserved memory passes this fraction of the device, free "
     "the cached segments that have waited longest before taking a new one; "
     "0 = off",
     tdm__config_parse_threshold, FIELD(alloc.garbage_collection_threshold), NULL},
    {"expandable_segments", "0|1", "0",
     "cache: 1 makes segments expandable, as PyTorch's expandable_segments: "
     "per stream and pool one address range is reserved and physical pages "
     "are mapped into it as the cache grows and unmapped by empty_cache; a "
     "device without virtual memory management keeps normal segments",
     parse_bool, FIELD(alloc.expandable_segments), NULL},
    {"mode", "observe|cache", "observe",
     "what libtidemark_preload.so does with vendor allocations: observe "
     "(the vendor serves them, tidemark records each as its own segment) or "
     "cache (tidemark's caching allocator serves them from the vendor)",
     parse_enum, FIELD(mode), hook_mode_names},
    {"ipc_libraries", "program or library names joined by ':' (libfoo:myapp)", "",
     "mode=cache: programs and libraries that export their own CUDA "
     "allocations over IPC where tidemark cannot see it (a statically linked "
     "cudart); NCCL and any object importing cu/cudaIpcGetMemHandle are "
     "found without it; the driver serves what they allocate, as in observe "
     "mode, since an IPC handle names the driver's whole allocation and the "
     "peer would map a cached block's segment",
     parse_ipc_libraries, FIELD(ipc_libraries), NULL},
    {"fork", "follow|stop", "follow",
     "after fork(): follow (the child records into its own snapshot, named "
     "with its own pid) or stop (the child stops recording and writes nothing)",
     parse_enum, FIELD(fork), fork_names},
    {"ranks", "all|LIST|local:LIST (LIST as 0,8-15)", "all",
     "which ranks of a job record: all, or ranks and ranges A-B (local: for "
     "local ranks); the others run untouched, nothing recorded or written; "
     "a process with no rank counts as rank 0",
     tdm__config_parse_ranks, FIELD(ranks), NULL},
    {"hide", "extended regular expression", "",
     "frames whose function name matches are left out of the top "
     "of stacks where tidemark's commands show them (a wrapper of the "
     "program's own); may be given more than once; recording is unchanged",
     parse_regex, FIELD(hides), NULL},
    {"category_rules", "path of a rules file", "",
     "rules over stack frames that say what kind of memory an allocation "
     "is (docs/categories.md); checked at start, applied by the commands "
     "that show categories, before tidemark's own rules",
     parse_rules_file, FIELD(category_rules), NULL},
    {"torch_phases", "on|off", "on",
     "in Python programs started by `tidemark run` (or with python/autostart "
     "on PYTHONPATH): mark forward, backward, optimizer phases and steps "
     "from torch's own hooks when the program marks none",
     parse_bool, FIELD(torch_phases), NULL},
    {"torch_tensors", "history|pluggable|off", "history",
     "in Python programs started by `tidemark run` (or with python/autostart "
     "on PYTHONPATH) that use torch.cuda: one event per tensor, from torch's "
     "own memory history (merged into the snapshot by tidemark run) or "
     "with tidemark serving torch's allocator (pluggable); off: segments only",
     parse_enum, FIELD(torch_tensors), torch_tensors_names},
    {"simulate", "off|h100|h200|a100-40g|a100-80g|cuda:SIZE|Nx...", "off",
     "for `tidemark run`: start the command on the simulated CUDA platform "
     "as that GPU (docs/simulate.md): unmodified CUDA programs and PyTorch "
     "run without a GPU, kernels not run, memory as the GPU's",
     parse_simulate, FIELD(simulate), NULL},
    {"file_mode", "octal mode within 0777", "0600",
     "permissions of the snapshots tidemark writes, whatever the umask "
     "(0600: only their owner reads them)",
     parse_file_mode, FIELD(file_mode), NULL},
};

#define KEY_COUNT (sizeof keys / sizeof keys[0])

const tdm__conf_key *tdm__config_keys(size_t *count)
{
    *count = KEY_COUNT;
    return keys;
}

void tdm__config_defaults(tdm__config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    tdm__alloc_config_defaults(&cfg->alloc);
    for (size_t i = 0; i < KEY_COUNT; i++) {
        char why[256];
        /* Cannot fail: test_config checks every default parses. */
        (void)keys[i].parse(&keys[i], keys[i].def,
                            (char *)cfg + keys[i].offset, why, sizeof why);
    }
}

/* ---- sizes ------------------------------------------------------------- */

int tdm__config_parse_size(const char *text, uint64_t *out, char *why,
                           size_t why_len)
{
    static const struct { const char *unit; unsigned shift; } units[] = {
        {"", 0},    {"b", 0},    {"k", 10},   {"kib", 10}, {"m", 20},
        {"mib", 20}, {"g", 30},  {"gib", 30}, {"t", 40},   {"tib", 40},
    };
    uint64_t v;
    const char *p;
    if (parse_u64_prefix(text, &v, &p) != 0) {
        tdm__config_why(why, why_len,
                        *text && isdigit((unsigned char)*text)
                    ? "number too large"
                    : "expected a number of bytes with an optional unit "
                      "B, K, M, G, T, KiB, MiB, GiB or TiB");
        return -1;
    }
    while (tdm__config_is_blank(*p))
        p++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(p, units[i].unit) != 0)
            continue;
        if (units[i].shift && v > (UINT64_MAX >> units[i].shift)) {
            tdm__config_why(why, why_len, "size too large");
            return -1;
        }
        *out = v << units[i].shift;
        return 0;
    }
    if (strlen(p) == 2 && strchr("kmgtKMGT", p[0]) && (p[1] == 'b' || p[1] == 'B'))
        tdm__config_why(why, why_len,
                        "unit '%s' is ambiguous: write %c or %ciB, both 1024-based", p,
                        toupper((unsigned char)p[0]), toupper((unsigned char)p[0]));
    else
        tdm__config_why(why, why_len,
                        "unknown unit '%.16s'; expected B, K, M, G, T, KiB, MiB, GiB "
                        "or TiB", p);
    return -1;
}

/* ---- the parser -------------------------------------------------------- */

/* Copies [b, e) into dst for quoting in a message, as much as fits,
 * control characters (C0, DEL, C1) and invalid UTF-8 written as \xNN
 * (tdm__escape_text, as every tidemark message does), so
 * the message stays one line and shows what was there. */
static void quote(char *dst, size_t dst_len, const char *b, const char *e)
{
    size_t used = 0; /* (room for "..." and the NUL) */
    size_t n = dst_len > 4 ? tdm__escape_text(b, (size_t)(e - b), dst, dst_len - 4, 0, 1, &used) : 0;
    b += used;
    if (b < e && dst_len >= 4) {
        memcpy(dst + n, "...", 3);
        n += 3;
    }
    dst[n] = '\0';
}

static void fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t err_len, const char *fmt, ...)
{
    char middle[TDM__CONF_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(middle, sizeof middle, fmt, ap);
    va_end(ap);
    if (err && err_len)
        snprintf(err, err_len, "tidemark: TIDEMARK_CONF: %s; recording is off",
                 middle);
}

static void unknown_key(const char *key, char *err, size_t err_len)
{
    char list[512] = "";
    size_t used = 0;
    const char *names[KEY_COUNT];
    for (size_t i = 0; i < KEY_COUNT; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s",
                         i ? ", " : "", keys[i].name);
        if (n > 0 && (size_t)n < sizeof list - used)
            used += (size_t)n;
        names[i] = keys[i].name;
    }
    /* Within 2 edits, case aside: keys are lower case, and DUMP= is
     * refused, naming 'dump'. */
    const char *best = tdm__did_you_mean(key, names, KEY_COUNT);
    if (best)
        fail(err, err_len, "unknown key '%s' (did you mean '%s'? valid keys: %s)",
             key, best, list);
    else
        fail(err, err_len, "unknown key '%s' (valid keys: %s)", key, list);
}

/* The end of the item starting at p: the next comma outside [...] (so
 * that roundup_power2_divisions=[256:1,512:2] is one item), or the end. */
static const char *item_end(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && depth > 0)
            depth--;
        else if (*p == ',' && depth == 0)
            break;
    }
    return p;
}

/* `ranks=0,8-15`: the commas after `ranks=` belong to its value while the
 * next item starts with a digit, which no key does. */
static const char *ranks_item_end(const char *p, const char *e)
{
    while (tdm__config_is_blank(*p))
        p++;
    if (strncmp(p, "ranks", 5) != 0)
        return e;
    for (p += 5; tdm__config_is_blank(*p); p++)
        ;
    if (*p != '=')
        return e;
    while (*e == ',') {
        const char *n = e + 1;
        while (tdm__config_is_blank(*n))
            n++;
        if (!isdigit((unsigned char)*n))
            break;
        e = item_end(e + 1);
    }
    return e;
}

tdm_status tdm__config_parse(const char *text, tdm__config *cfg, char *err,
                             size_t err_len)
{
    tdm__config_defaults(cfg);
    if (err && err_len)
        err[0] = '\0';
    if (!text)
        return TDM_OK;
    const char *p = text;
    for (;;) {
        const char *b = p, *e = ranks_item_end(p, item_end(p));
        const char *next = *e ? e + 1 : NULL;
        tdm__config_trim(&b, &e);
        if (b < e) {
            char shown[96];
            const char *eq = memchr(b, '=', (size_t)(e - b));
            if (!eq) {
                if ((size_t)(e - b) == 4 && strncmp(b, "help", 4) == 0) {
                    cfg->help = 1;
                } else {
                    quote(shown, sizeof shown, b, e);
                    fail(err, err_len,
                         "item '%s' has no '=' (expected key=value; "
                         "TIDEMARK_CONF=help lists the keys)", shown);
                    return TDM_BAD_CONFIG;
                }
            } else {
                const char *kb = b, *ke = eq, *vb = eq + 1, *ve = e;
                tdm__config_trim(&kb, &ke);
                tdm__config_trim(&vb, &ve);
                char key[KEY_MAX + 1];
                quote(key, sizeof key, kb, ke);
                if (kb == ke) {
                    quote(shown, sizeof shown, b, e);
                    fail(err, err_len, "item '%s' has an empty key", shown);
                    return TDM_BAD_CONFIG;
                }
                const tdm__conf_key *k = NULL;
                for (size_t i = 0; i < KEY_COUNT && (size_t)(ke - kb) <= KEY_MAX; i++)
                    if (strlen(keys[i].name) == (size_t)(ke - kb) &&
                        strncmp(keys[i].name, kb, (size_t)(ke - kb)) == 0)
                        k = &keys[i];
                if (!k) {
                    unknown_key(key, err, err_len);
                    return TDM_BAD_CONFIG;
                }
                char value[TDM__CONF_PATH_MAX + 1];
                char why[TDM__CONF_ERR_MAX / 2];
                quote(shown, sizeof shown, vb, ve);
                if ((size_t)(ve - vb) >= sizeof value) {
                    fail(err, err_len, "value '%s' for key '%s' is too long",
                         shown, k->name);
                    return TDM_BAD_CONFIG;
                }
                memcpy(value, vb, (size_t)(ve - vb));
                value[ve - vb] = '\0';
                if (value[0] == '\0') {
                    fail(err, err_len, "empty value for key '%s' (expected %s)",
                         k->name, k->values);
                    return TDM_BAD_CONFIG;
                }
                why[0] = '\0';
                if (k->parse(k, value, (char *)cfg + k->offset, why,
                             sizeof why) != 0) {
                    fail(err, err_len, "bad value '%s' for key '%s' (%s)", shown,
                         k->name, why);
                    return TDM_BAD_CONFIG;
                }
            }
        }
        if (!next)
            break;
        p = next;
    }
    return TDM_OK;
}

size_t tdm__config_format_help(char *buf, size_t len)
{
    size_t need = 0;
#define EMIT(...)                                                              \
    do {                                                                       \
        int n_ = snprintf(buf && need < len ? buf + need : NULL,               \
                          buf && need < len ? len - need : 0, __VA_ARGS__);    \
        if (n_ > 0)                                                            \
            need += (size_t)n_;                                                \
    } while (0)
    EMIT("tidemark: TIDEMARK_CONF is a comma-separated list of key=value "
         "items (asking for help leaves recording off).  Keys:\n");
    for (size_t i = 0; i < KEY_COUNT; i++)
        EMIT("  %-16s %s\n  %-16s default: %s\n  %-16s %s\n", keys[i].name,
             keys[i].values, "", keys[i].def, "", keys[i].help);
    EMIT("tidemark: sizes take B, K, M, G, T or KiB, MiB, GiB, TiB "
         "(K = KiB = 1024); see docs/configuration.md\n");
#undef EMIT
    return need;
}

int tdm__config_stacks(const tdm__config *cfg)
{
    if (cfg->stacks != TDM__CONF_STACKS_AUTO)
        return cfg->stacks;
    return dlsym(RTLD_DEFAULT, "_PyRuntime") ? TDM_STACKS_ALL : TDM_STACKS_NATIVE;
}

void tdm__config_history_options(const tdm__config *cfg,
                                 tdm_history_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->enabled = (tdm_record_mode)cfg->record;
    opts->context = (tdm_context_mode)cfg->context;
    opts->stacks = (tdm_stacks_mode)tdm__config_stacks(cfg);
    opts->max_entries = cfg->max_entries;
    opts->clear_history = 0;
}
