/* viewer-export/cli/cmd_replay.c: `tidemark replay`: would a recorded run
 * fit under other caching-allocator settings?  The recording's request
 * stream (replay_ops.c) is replayed through libtidemark's caching
 * allocator on a sim device (tdm__replay, loaded with dlopen: the tool is
 * not linked with the recorder), once per setting, and the outcomes are
 * printed side by side (replay_table.c); --save's files get the
 * recording's stacks and phases (replay_enrich.c).  Single-threaded; no
 * state beyond the call.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "format_size.h"
#include "gate.h"
#include "load.h"
#include "replay_enrich.h"
#include "replay_ops.h"
#include "replay_table.h"
#include "run.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BISECT_STEP ((uint64_t)1 << 20) /* --min-capacity's granularity */

typedef struct seg_log {
    tdm_replay_seg_event *ev;
    size_t n, cap;
    int failed;
} seg_log;

static void log_segment(void *ctx, int freed, uint64_t size)
{
    seg_log *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        tdm_replay_seg_event *ev = realloc(l->ev, cap * sizeof *ev);
        if (!ev) {
            l->failed = 1;
            return;
        }
        l->ev = ev;
        l->cap = cap;
    }
    l->ev[l->n++] = (tdm_replay_seg_event){.size = size, .freed = freed};
}

static const tdm_cli_option options[] = {
    {.name = "conf", .code = 'c', .has_arg = required_argument, .metavar = "K=V[,K=V]",
     .help = "a setting to try (repeatable): max_split_size,\n"
             "roundup_power2_divisions, garbage_collection_threshold,\n"
             "expandable_segments, with TIDEMARK_CONF's syntax"},
    {.name = "sweep", .code = 's', .help = "also a built-in set of settings; marks the best"},
    {.name = "capacity", .code = 'C', .has_arg = required_argument, .metavar = "SIZE",
     .help = "device size for the OOM column (e.g. 40GiB; default the\n"
             "recorded device's, else unlimited)"},
    {.name = "min-capacity", .code = 'm',
     .help = "also the smallest device each setting fits on (1 MiB steps)"},
    {.name = "device", .code = 'd', .has_arg = required_argument, .metavar = "N",
     .help = "the recorded device to replay (default: the busiest)"},
    {.name = "save", .code = 'S', .has_arg = required_argument, .metavar = "DIR",
     .help = "also write each setting's replay as a .tdm in DIR\n"
             "(recorded.tdm, default.tdm, max_split_size=64MiB.tdm...),\n"
             "for summary, view, diff and gate"},
    {.name = "force", .code = 'f',
     .help = "with --save, replace files that exist (refused otherwise)"},
    {.name = "json", .code = 'j', .help = "one JSON object on stdout"},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_replay_spec = {
    .usage = "usage: tidemark replay [options] RUN.tdm|SNAPSHOT.pickle|TRACE.csv\n"
             "Replays the recorded allocation requests (sizes, streams, order, frees)\n"
             "through tidemark's caching allocator on a simulated device, under the\n"
             "recording's own settings (\"recorded\") and the ones given, and prints peak\n"
             "reserved, peak allocated, reserved/allocated at the peak, segments, device\n"
             "allocation calls, retries after freeing the cache, and whether the run\n"
             "would run out of memory at the capacity.\n",
    .options = {options, 20},
};

/* Checks one --conf: keys replay can change.  Prints the line and returns
 * -1 when refused. */
static int check_conf_keys(const char *conf)
{
    const char *p = conf, *b, *e;
    while ((b = tdm__replay_conf_item(&p, &e))) {
        const char *eq = NULL;
        for (const char *q = b; q < e && !eq; q++)
            if (*q == '=')
                eq = q;
        const char *k = eq ? eq : e;
        while (k > b && (k[-1] == ' ' || k[-1] == '\t'))
            k--;
        if (k == b && e == b)
            continue;
        if (!eq || !tdm__replay_key_allowed(b, (size_t)(k - b))) {
            fprintf(stderr, "tidemark replay: --conf %s: '%.*s' is not a setting replay can "
                            "change (max_split_size, roundup_power2_divisions, "
                            "garbage_collection_threshold, expandable_segments; K=V)\n",
                    conf, (int)(k - b), b);
            return -1;
        }
    }
    return 0;
}

static void add_setting(setting *s, size_t *n, const char *label, const char *conf)
{
    if (*n >= MAX_SETTINGS)
        return;
    memset(&s[*n], 0, sizeof s[*n]);
    snprintf(s[*n].label, sizeof s[*n].label, "%s", label);
    snprintf(s[*n].conf, sizeof s[*n].conf, "%s", conf);
    (*n)++;
}

static void add_sweep(setting *s, size_t *n)
{
    static const char *const sweep[] = {
        "max_split_size=64MiB", "max_split_size=128MiB", "max_split_size=256MiB",
        "max_split_size=512MiB", "max_split_size=1GiB", "max_split_size=2GiB",
        "roundup_power2_divisions=1", "roundup_power2_divisions=4",
        "roundup_power2_divisions=8", "roundup_power2_divisions=16",
        "garbage_collection_threshold=0.6", "garbage_collection_threshold=0.8",
        "garbage_collection_threshold=0.95", "expandable_segments=1"};
    add_setting(s, n, "default", "");
    for (size_t i = 0; i < sizeof sweep / sizeof sweep[0]; i++)
        add_setting(s, n, sweep[i], sweep[i]);
}

typedef struct replayer {
    tdm_replay_fn fn;
    tdm_replay_save_fn save_fn; /* NULL: the library has none */
    int replace;                /* --force */
    const tdm_replay_input *in;
    const tdm_snap *snap; /* the recording: its stacks and phases go into --save's files */
    uint64_t roomy; /* a device size tried first for "unlimited" */
    uint64_t live_floor; /* most requested bytes live at once */
} replayer;

/* The most requested bytes live at once: no device smaller holds the run,
 * whatever the setting (blocks are at least their request, and segments
 * hold the blocks).  A free counts from its request, a waiting one too:
 * too early, never too late, so this stays a lower bound. */
static uint64_t live_floor(const tdm_replay_input *in)
{
    uint64_t *size = calloc(in->ids ? in->ids : 1, sizeof *size);
    if (!size)
        return 0;
    uint64_t live = 0, most = 0;
    for (size_t i = 0; i < in->op_count; i++) {
        const tdm_replay_op *o = &in->ops[i];
        if (o->id >= in->ids)
            continue;
        if (o->kind == TDM_REPLAY_ALLOC) {
            live -= size[o->id]; /* an id allocated twice: the older one ends */
            size[o->id] = o->size;
            live += o->size;
            most = live > most ? live : most;
        } else if (o->kind == TDM_REPLAY_FREE || o->kind == TDM_REPLAY_FREE_DEFERRED) {
            live -= size[o->id];
            size[o->id] = 0;
        }
    }
    free(size);
    return most;
}

/* A device the replay is unlikely to fill: four times every byte the
 * trace asks for, at least 1 GiB.  "Unlimited" is tried on it first and
 * on UNLIMITED only if it runs out: the sim device reserves its whole
 * address range, and a range of 1 TiB is more than some processes may
 * map (ThreadSanitizer's, under `ulimit -v`). */
static uint64_t roomy_capacity(const tdm_replay_input *in)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < in->op_count; i++)
        if (in->ops[i].kind == TDM_REPLAY_ALLOC)
            sum += in->ops[i].size < UNLIMITED ? in->ops[i].size : UNLIMITED;
    if (sum > UNLIMITED / 4)
        return UNLIMITED;
    sum *= 4;
    return sum < ((uint64_t)1 << 30) ? (uint64_t)1 << 30 : sum;
}

static void note_event_op(void *ctx, size_t event, size_t op)
{
    tdm__replay_event_op_note(ctx, event, op);
}

/* One replay; with `save_path`, its run written there too. */
static int replay_call(const replayer *rp, const char *conf, uint64_t capacity,
                       tdm_replay_result *r, seg_log *log, char *why, size_t why_len,
                       const char *save_path, int replace)
{
    if (!save_path)
        return rp->fn(conf, capacity, rp->in->ops, rp->in->op_count, rp->in->ids,
                      log ? log_segment : NULL, log, r, why, why_len);
    tdm_replay_event_ops eo = {0};
    tdm_replay_save save = {.path = save_path, .op_times = rp->in->op_times,
                            .replace = replace, .on_event_op = note_event_op, .op_ctx = &eo};
    int st = rp->save_fn(conf, capacity, rp->in->ops, rp->in->op_count, rp->in->ids,
                         log ? log_segment : NULL, log, r, why, why_len, &save);
    /* The replay records no stacks, phases or categories: the file gets
     * the recording's, each event those of the request it came from. */
    if (st == TDM_OK && rp->snap && tdm__replay_enrich(save_path, rp->snap, rp->in, &eo) != 0)
        fprintf(stderr, "tidemark replay: note: %s has the replay's events without the "
                        "recording's stacks and phases (out of memory)\n", save_path);
    free(eo.op);
    return st;
}

static int run_one(const replayer *rp, const char *conf, uint64_t capacity,
                   tdm_replay_result *r, seg_log *log, const char *save_path)
{
    char why[512];
    int st;
    int replace = rp->replace;
    if (capacity == UNLIMITED && rp->roomy < UNLIMITED) {
        size_t mark_n = log ? log->n : 0;
        int mark_failed = log ? log->failed : 0;
        st = replay_call(rp, conf, rp->roomy, r, log, why, sizeof why, save_path, replace);
        if (st != TDM_OK || r->ooms == 0)
            goto done;
        if (log) { /* the segments of the try are not the replay's */
            log->n = mark_n;
            log->failed = mark_failed;
        }
        replace = 1; /* the try's file, written a moment ago */
    }
    st = replay_call(rp, conf, capacity, r, log, why, sizeof why, save_path, replace);
done:
    if (st == TDM_BAD_CONFIG) {
        /* The parser words its line for TIDEMARK_CONF in a running
         * program; here only the reason is news. */
        const char *reason = why;
        static const char lead[] = "tidemark: TIDEMARK_CONF: ";
        static const char tail[] = "; recording is off";
        if (strncmp(reason, lead, sizeof lead - 1) == 0)
            reason += sizeof lead - 1;
        size_t len = strlen(reason);
        if (len >= sizeof tail - 1 && strcmp(reason + len - (sizeof tail - 1), tail) == 0)
            len -= sizeof tail - 1;
        if (len == 0) {
            reason = "refused";
            len = strlen(reason);
        }
        fprintf(stderr, "tidemark replay: --conf %s: %.*s\n", conf, (int)len, reason);
        return TDM_EXIT_BAD_INPUT;
    }
    if (st == TDM_IO_ERROR && save_path) {
        fprintf(stderr, "tidemark replay: cannot write %s: %s\n", save_path,
                errno == EEXIST ? "it appeared meanwhile; use --force to replace it"
                                : strerror(errno));
        return TDM_EXIT_TOOL_ERROR;
    }
    if (st != TDM_OK) {
        fprintf(stderr, "tidemark replay: the replay failed%s%s: %s\n",
                save_path ? " or could not be saved to " : "", save_path ? save_path : "",
                tdm_strerror(st));
        return TDM_EXIT_TOOL_ERROR;
    }
    return TDM_EXIT_OK;
}

/* The smallest capacity, in BISECT_STEP units, on which the replay has no
 * OOM: bisection between a size that fails and one that fits. */
static int min_capacity(const replayer *rp, setting *s, uint64_t *out)
{
    tdm_replay_result r;
    uint64_t hi = (s->r.peak_reserved + BISECT_STEP - 1) / BISECT_STEP;
    if (hi == 0)
        hi = 1;
    for (;;) {
        int rc = run_one(rp, s->conf, hi * BISECT_STEP, &r, NULL, NULL);
        if (rc)
            return rc;
        if (r.ooms == 0)
            break;
        if (hi * BISECT_STEP >= UNLIMITED) {
            *out = 0;
            return TDM_EXIT_OK;
        }
        hi *= 2;
    }
    /* A device that cannot hold the bytes live at once fits nothing: the
     * search starts below the most requested bytes live, not at 0. */
    uint64_t lo = (rp->live_floor + BISECT_STEP - 1) / BISECT_STEP;
    lo = lo > 0 ? lo - 1 : 0;
    if (lo >= hi)
        lo = hi - 1;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = run_one(rp, s->conf, mid * BISECT_STEP, &r, NULL, NULL);
        if (rc)
            return rc;
        if (r.ooms == 0)
            hi = mid;
        else
            lo = mid;
    }
    *out = hi * BISECT_STEP;
    return TDM_EXIT_OK;
}

/* One line: whether the "recorded" replay's segment timeline is the
 * recording's.  Returns 1 when reproduced. */
static int compare_timeline(const tdm_replay_input *in, const seg_log *log, char *line,
                            size_t len)
{
    size_t n = in->seg_count < log->n ? in->seg_count : log->n;
    for (size_t i = 0; i < n; i++)
        if (in->segs[i].freed != log->ev[i].freed || in->segs[i].size != log->ev[i].size) {
            snprintf(line, len,
                     "differs at segment event %zu: recorded %s of %llu bytes, replay %s of "
                     "%llu bytes",
                     i + 1, in->segs[i].freed ? "segment_free" : "segment_alloc",
                     (unsigned long long)in->segs[i].size,
                     log->ev[i].freed ? "segment_free" : "segment_alloc",
                     (unsigned long long)log->ev[i].size);
            return 0;
        }
    if (in->seg_count != log->n) {
        snprintf(line, len, "differs in length: recorded %zu segment events, replay %zu",
                 in->seg_count, log->n);
        return 0;
    }
    snprintf(line, len, "reproduced (%zu segment events)", n);
    return 1;
}

typedef struct replay_opts {
    char *confs[MAX_SETTINGS];
    size_t conf_count;
    const char *save_dir; /* --save */
    int sweep, find_min, json, device, force;
    uint64_t capacity; /* 0: the recorded device's, else unlimited */
} replay_opts;

static tdm_replay_fn load_replayer(tdm_replay_save_fn *save_fn)
{
    char lib[PATH_MAX];
    /* The library must not start recording this tool on load. */
    unsetenv("TIDEMARK_CONF");
    tdm__run_find_library(TDM_RUN_LIBRARY_NAME, NULL, lib, sizeof lib);
    if (!lib[0]) {
        fprintf(stderr, "tidemark replay: cannot find %s (beside the tool, or installed)\n",
                TDM_RUN_LIBRARY_NAME);
        return NULL;
    }
    void *h = dlopen(lib, RTLD_LOCAL | RTLD_NOW);
    if (!h) {
        fprintf(stderr, "tidemark replay: %s: %s\n", lib, dlerror());
        return NULL;
    }
    /* The entry points below are called by name with this build's types
     * (tidemark_private.h): a library of another build must say so first. */
    tdm_private_abi_fn abi;
    *(void **)&abi = dlsym(h, TDM_PRIVATE_ABI_SYMBOL);
    unsigned version = abi ? abi() : 0;
    if (version != TDM_PRIVATE_ABI_VERSION) {
        fprintf(stderr,
                "tidemark replay: %s is from another build of tidemark (its private "
                "interface is version %u, this tool's is %u); install the tool and the "
                "library together\n",
                lib, version, TDM_PRIVATE_ABI_VERSION);
        dlclose(h);
        return NULL;
    }
    tdm_replay_fn fn;
    *(void **)&fn = dlsym(h, TDM_REPLAY_SYMBOL);
    *(void **)save_fn = dlsym(h, TDM_REPLAY_SAVE_SYMBOL);
    if (!fn) {
        fprintf(stderr, "tidemark replay: %s: has no replay entry point\n", lib);
        dlclose(h);
        return NULL;
    }
    return fn;
}

/* A file name for a setting: its text with what a file name or a shell
 * would trip on replaced ("," by "+", anything else but letters, digits,
 * ".", "_", "=", "-" by "_"; no leading "."), at most 200 bytes. */
static void safe_name(const char *label, char *out, size_t cap)
{
    size_t k = 0;
    for (const char *p = label; *p && k + 1 < cap && k < 200; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '=' || c == '-';
        out[k] = c == ',' ? '+' : ok && !(k == 0 && c == '.') ? c : '_';
        k++;
    }
    out[k] = '\0';
    if (k == 0)
        snprintf(out, cap, "default");
}

/* --save: makes the folder, names each setting's file (the recorded row
 * is "recorded"; a name taken twice gets "-2", "-3"...) and checks that
 * each may be written, before any replay runs: nothing is written when
 * one is refused. */
static int plan_saves(const replay_opts *o, setting *s, size_t n)
{
    size_t dlen = strlen(o->save_dir);
    char *probe = malloc(dlen + 3);
    if (!probe)
        return TDM_EXIT_TOOL_ERROR;
    snprintf(probe, dlen + 3, "%s/x", o->save_dir);
    int rc = tdm__cli_make_parents("replay", probe);
    free(probe);
    struct stat st;
    if (rc == TDM_EXIT_OK && (stat(o->save_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "tidemark replay: --save %s: not a folder\n", o->save_dir);
        return TDM_EXIT_USAGE;
    }
    for (size_t i = 0; i < n && rc == TDM_EXIT_OK; i++) {
        char base[256], name[272];
        safe_name(i == 0 ? "recorded" : s[i].label, base, sizeof base);
        snprintf(name, sizeof name, "%s", base);
        for (unsigned dup = 2;; dup++) {
            int taken = 0;
            for (size_t j = 0; j < i && !taken; j++) {
                const char *b = strrchr(s[j].save_path, '/');
                taken = strncmp(b + 1, name, strlen(name)) == 0 &&
                        strcmp(b + 1 + strlen(name), ".tdm") == 0;
            }
            if (!taken)
                break;
            snprintf(name, sizeof name, "%s-%u", base, dup);
        }
        size_t len = dlen + strlen(name) + 6;
        s[i].save_path = malloc(len);
        if (!s[i].save_path)
            return TDM_EXIT_TOOL_ERROR;
        snprintf(s[i].save_path, len, "%s/%s.tdm", o->save_dir, name);
        rc = tdm__cli_output_check("replay", s[i].save_path, o->force, 1);
    }
    return rc;
}

/* --device N: a device of the recording (in its device table, or named
 * by an event), else the line every command gives and exit 2. */
static int check_device(const char *path, const tdm_snap *snap, int device)
{
    size_t n = 0, cap = snap->device_count + 64; /* (the list shown is short) */
    int *have = calloc(cap, sizeof *have);
    if (!have) {
        fprintf(stderr, "tidemark replay: %s\n", tdm_strerror(TDM_HOST_OUT_OF_MEMORY));
        return TDM_EXIT_TOOL_ERROR;
    }
    for (size_t i = 0; i < snap->device_count + snap->event_count; i++) {
        int d = i < snap->device_count ? snap->devices[i].index
                                       : snap->events[i - snap->device_count].device;
        size_t k = 0;
        while (k < n && have[k] != d)
            k++;
        if (k == n && n < cap && d >= 0) /* (-1: events of no device, as markers) */
            have[n++] = d;
    }
    int rc = tdm__input_say_no_device("replay", tdm__input_operand_name(path), device, have, n);
    free(have);
    return rc;
}

static int replay_file(const char *path, replay_opts *o)
{
    tdm_snap *snap = NULL;
    int truncated = 0;
    uint64_t truncated_at = 0;
    int rc = tdm__input_read_snapshot("replay", path, &snap, &truncated, &truncated_at);
    if (!snap)
        return rc;
    if (o->device >= 0 && (rc = check_device(path, snap, o->device)) != TDM_EXIT_OK) {
        tdm__input_snap_free(snap);
        return rc;
    }
    tdm_replay_input in;
    setting *s = calloc(MAX_SETTINGS, sizeof *s);
    char(*notes)[256] = calloc(8, sizeof *notes);
    size_t n = 0, note_count = 0;
    seg_log log = {0};
    if (!s || !notes || tdm__replay_input_build(snap, o->device, &in) != 0) {
        fprintf(stderr, "tidemark replay: out of memory\n");
        free(s);
        free(notes);
        tdm__input_snap_free(snap);
        return TDM_EXIT_TOOL_ERROR;
    }
    const char *mode = snap->header.alloc_mode ? snap->header.alloc_mode : "";
    int faithful = strcmp(mode, "cache") == 0 && snap->dropped_events == 0 && !truncated;
    if (snap->dropped_events)
        snprintf(notes[note_count++], 256,
                 "the ring wrapped (%llu events dropped): only the kept window is replayed, "
                 "without what was live before it",
                 (unsigned long long)snap->dropped_events);
    int imported = snap->header.pid == 0; /* a trace or another tool's file */
    if (imported && strcmp(mode, "cache") != 0)
        snprintf(notes[note_count++], 256,
                 "an imported trace with no allocator settings: \"recorded\" replays it "
                 "under the defaults");
    else if (strcmp(mode, "observe") == 0)
        snprintf(notes[note_count++], 256,
                 "recorded in observe mode: its sizes are the vendor's segments, not tensors, "
                 "so the replay serves segments");
    else if (strcmp(mode, "cache") != 0)
        snprintf(notes[note_count++], 256,
                 "recorded without tidemark's cache (%s): its own reserved bytes are not a "
                 "cache's to compare with",
                 mode[0] ? mode : "no allocator");
    if (in.unmatched_frees && !snap->dropped_events)
        snprintf(notes[note_count++], 256,
                 "%zu frees of blocks allocated before the recording began are left out",
                 in.unmatched_frees);
    uint64_t capacity = o->capacity ? o->capacity : in.capacity ? in.capacity : UNLIMITED;

    add_setting(s, &n, "recorded", in.recorded_conf);
    if (in.recorded_conf[0])
        snprintf(s[0].label, sizeof s[0].label, "recorded (%.50s)", in.recorded_conf);
    if (o->sweep)
        add_sweep(s, &n);
    for (size_t i = 0; i < o->conf_count; i++)
        add_setting(s, &n, o->confs[i], o->confs[i]);

    replayer rp = {.in = &in, .snap = snap, .roomy = roomy_capacity(&in), .replace = o->force};
    if (o->find_min)
        rp.live_floor = live_floor(&in);
    rp.fn = load_replayer(&rp.save_fn);
    char timeline[256] = "";
    int timeline_ok = 0;
    if (!rp.fn)
        rc = TDM_EXIT_TOOL_ERROR;
    if (rp.fn && o->save_dir && !rp.save_fn) {
        fprintf(stderr, "tidemark replay: --save: the library has no replay recorder (an "
                        "older library?)\n");
        rc = TDM_EXIT_TOOL_ERROR;
    }
    if (rp.fn && rc != TDM_EXIT_TOOL_ERROR && o->save_dir) {
        int prc = plan_saves(o, s, n);
        if (prc != TDM_EXIT_OK)
            rc = prc;
    }
    for (size_t i = 0; i < n && rp.fn && rc != TDM_EXIT_TOOL_ERROR && rc != TDM_EXIT_USAGE; i++) {
        int r = run_one(&rp, s[i].conf, capacity, &s[i].r, i == 0 && faithful ? &log : NULL,
                        s[i].save_path);
        if (r != TDM_EXIT_OK) {
            rc = r;
            break;
        }
        if (o->find_min && (r = min_capacity(&rp, &s[i], &s[i].min_capacity)) != TDM_EXIT_OK) {
            rc = r;
            break;
        }
    }
    for (size_t i = 0; i < n && (rc == TDM_EXIT_OK || (rc == TDM_EXIT_BAD_INPUT && truncated));
         i++)
        if (s[i].save_path)
            fprintf(stderr, "tidemark replay: wrote %s\n", s[i].save_path);
    if (rc == TDM_EXIT_OK || (rc == TDM_EXIT_BAD_INPUT && truncated)) {
        if (faithful && !log.failed)
            timeline_ok = compare_timeline(&in, &log, timeline, sizeof timeline);
        if (o->sweep) {
            size_t best = tdm__replay_pick_best(s, n, o->find_min);
            if (best < n)
                s[best].best = 1;
        }
        int prc = o->json ? tdm__replay_print_json(path, &in, s, n, capacity, notes, note_count,
                                       timeline[0] ? timeline : NULL, timeline_ok)
                          : (tdm__replay_print_text(path, &in, s, n, capacity, o->find_min, notes, note_count,
                                        timeline[0] ? timeline : NULL,
                                        strcmp(mode, "cache") == 0),
                             TDM_EXIT_OK);
        rc = tdm__exit_worse(rc, prc);
    }
    free(log.ev);
    for (size_t i = 0; i < n; i++)
        free(s[i].save_path);
    free(s);
    free(notes);
    tdm__replay_input_free(&in);
    tdm__input_snap_free(snap);
    return rc;
}

int tdm__cli_replay(int argc, char **argv)
{
    replay_opts o = {.device = -1};
    unsigned long v;
    int c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "replay", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'c':
            if (check_conf_keys(optarg) != 0)
                return TDM_EXIT_BAD_INPUT;
            if (o.conf_count < MAX_SETTINGS - 20)
                o.confs[o.conf_count++] = optarg;
            break;
        case 's':
            o.sweep = 1;
            break;
        case 'C':
            /* Read as the gates read sizes: "10" is 10 B, said back. */
            if (tdm__gate_parse_size("replay", "--capacity", optarg, &o.capacity) != 0)
                goto usage;
            if (o.capacity == 0) {
                fprintf(stderr, "tidemark replay: --capacity %s: a device of 0 bytes holds "
                                "nothing (e.g. 40GiB)\n", optarg);
                goto usage;
            }
            if (o.capacity > UNLIMITED)
                o.capacity = UNLIMITED;
            break;
        case 'm':
            o.find_min = 1;
            break;
        case 'd':
            if (tdm__parse_count("replay", "--device", optarg, 32767, &v))
                goto usage;
            o.device = (int)v;
            break;
        case 'j':
            o.json = 1;
            break;
        case 'S':
            if (!optarg[0]) {
                fprintf(stderr, "tidemark replay: --save needs a folder\n");
                goto usage;
            }
            o.save_dir = optarg;
            break;
        case 'f':
            o.force = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (o.force && !o.save_dir) {
        fprintf(stderr, "tidemark replay: --force replaces the files of --save; give --save "
                        "DIR\n");
        goto usage;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tidemark replay: %s\n",
                optind >= argc ? "no recording given" : "one recording at a time");
        goto usage;
    }
    return tdm__cli_flush("replay", replay_file(argv[optind], &o));
usage:
    fprintf(stderr, "Try 'tidemark help replay'.\n");
    return TDM_EXIT_USAGE;
}
