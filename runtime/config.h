/* runtime/config.h: TIDEMARK_CONF, the environment switch that turns
 * recording on when the library is loaded, and the dump-path templates.
 *
 * config.c owns the key table (one row per setting: name, values, default,
 * help, parser, where the value goes) and the parser over it.  dump_path.c
 * owns the `dump` template: checking it, expanding its % codes and making
 * the folders a dump goes into.  autoinit.c applies a parsed configuration
 * at load time and writes the snapshots at exit and on a signal.
 *
 * Nothing here is on a hot path: it runs at load time, at exit and when a
 * dump is asked for.  The parser is pure (no globals, and no I/O but
 * reading the file a `category_rules` key names, to check it) so that
 * tests can run it on any text; it never prints, it hands back the one
 * line that autoinit.c prints.
 *
 * Names: a key of TIDEMARK_CONF, its field here and its entry in
 * docs/configuration.md carry the same name.
 */
#ifndef TDM_RUNTIME_CONFIG_H
#define TDM_RUNTIME_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"
#include "alloc.h"

/* Longest dump path, template or expanded, including the NUL. */
#define TDM__CONF_PATH_MAX 4096
/* Longest `simulate` value (a GPU such as 8xa100-80g or cuda:80GiB). */
#define TDM__CONF_SIMULATE_MAX 32
/* Longest `ipc_libraries` value, including the NUL. */
#define TDM__CONF_IPC_LIBRARIES_MAX 256
/* Room for the one error line the parser hands back. */
#define TDM__CONF_ERR_MAX 1024

/* dump_on bits; 0 means "none". */
enum {
    TDM__DUMP_ON_EXIT = 1u << 0,   /* at normal process exit */
    TDM__DUMP_ON_SIGNAL = 1u << 1, /* when `signal` arrives; program goes on */
    TDM__DUMP_ON_OOM = 1u << 2,    /* when a device allocation runs out of memory */
};

/* `mode`: what libtidemark_preload.so's hooks do with vendor calls. */
enum { TDM__CONF_MODE_OBSERVE = 0, TDM__CONF_MODE_CACHE = 1 };
/* `fork`: what a forked child does. */
enum { TDM__CONF_FORK_FOLLOW = 0, TDM__CONF_FORK_STOP = 1 };
/* `stacks=auto` (the default): tdm_stacks_mode's values, then this one. */
#define TDM__CONF_STACKS_AUTO 4
/* stop_signals: the exit snapshot on SIGINT/SIGTERM, or nothing. */
enum { TDM__CONF_STOP_SNAPSHOT = 0, TDM__CONF_STOP_OFF = 1 };

/* `ranks`: the ranks that record; the others run untouched. */
#define TDM__CONF_RANKS_MAX 64
typedef struct tdm__conf_ranks {
    unsigned count; /* ranges in use; 0 = every rank (`all`) */
    int local;      /* 1: the ranges are local ranks (`local:`) */
    struct { int32_t first, last; } range[TDM__CONF_RANKS_MAX]; /* inclusive */
} tdm__conf_ranks;

typedef struct tdm__config {
    int record;              /* tdm_record_mode (the API's `enabled`) */
    int context;             /* tdm_context_mode */
    int stacks;              /* tdm_stacks_mode, or TDM__CONF_STACKS_AUTO */
    size_t max_entries;      /* ring capacity, events, >= 1 */
    char dump[TDM__CONF_PATH_MAX]; /* path template, checked */
    char spill[TDM__CONF_PATH_MAX]; /* kill-safe history: a path template,
                                "off", or "" for the default place */
    unsigned dump_on;        /* TDM__DUMP_ON_* bits */
    int signal;              /* signal number that asks for a dump */
    int stop_signals;        /* TDM__CONF_STOP_*: SIGINT/SIGTERM snapshots */
    tdm__alloc_config alloc; /* `device` (kind, count, capacity in bytes),
                                `alloc_mode` (mode), `sim_host_access`
                                (host_accessible) and the cache knobs
                                `max_split_size`, `roundup_power2_divisions`,
                                `garbage_collection_threshold` */
    int mode;                /* hooks: TDM__CONF_MODE_* */
    char ipc_libraries[TDM__CONF_IPC_LIBRARIES_MAX]; /* cache mode: more
                                programs and libraries (file-name starts,
                                joined by ':') whose allocations the driver
                                serves, since they export them over CUDA
                                IPC; "" = NCCL and the objects that import
                                the export only (hooks/preload/cuda_ipc.c) */
    int fork;                /* after fork(): TDM__CONF_FORK_* */
    int torch_phases;        /* python/autostart marks torch phases (read
                                by the Python side; checked here) */
    int torch_tensors;       /* python/autostart's tensor events: history,
                                pluggable, off (read by the Python side) */
    tdm__conf_ranks ranks;   /* `ranks`: which ranks record */
    int hides;               /* `hide` patterns given (checked here; the
                                readers apply them from the config text
                                the snapshot carries) */
    int category_rules;      /* a `category_rules` file was given (read and
                                checked here; the readers read it again
                                from the path the snapshot's config text
                                carries) */
    char simulate[TDM__CONF_SIMULATE_MAX]; /* `simulate`: the GPU tidemark
                                run starts the command on; "" = off (read
                                by tidemark run; checked here) */
    unsigned file_mode;      /* permissions of written snapshots */
    int help;                /* the text asked for the key list */
} tdm__config;

/* One row of the key table. */
typedef struct tdm__conf_key tdm__conf_key;
typedef int (*tdm__conf_parse_fn)(const tdm__conf_key *key, const char *value,
                                  void *field, char *why, size_t why_len);
struct tdm__conf_key {
    const char *name;          /* the key, as written in TIDEMARK_CONF */
    const char *values;        /* the accepted values, for help and errors */
    const char *def;           /* the default, as text; parsed at init */
    const char *help;          /* one sentence */
    tdm__conf_parse_fn parse;  /* 0 on success; else fills `why` */
    size_t offset;             /* where the value goes in tdm__config */
    const char *const *names;  /* enum keys: value names, index = value */
};

/* The key table, in documentation order. */
const tdm__conf_key *tdm__config_keys(size_t *count);

/* Fills *cfg with every key's default. */
void tdm__config_defaults(tdm__config *cfg);

/* Parses TIDEMARK_CONF text over the defaults.  Items are separated by
 * commas; empty items are skipped; blanks around items, keys and values
 * are ignored; a key given twice keeps its last value; the item `help`
 * sets cfg->help.  On TDM_BAD_CONFIG, err gets one line (no newline) that
 * names the key and the offending value, and *cfg is unspecified. */
tdm_status tdm__config_parse(const char *text, tdm__config *cfg, char *err,
                             size_t err_len);

/* The key list as TIDEMARK_CONF=help prints it (several lines).  Returns
 * the length it needed, like snprintf. */
size_t tdm__config_format_help(char *buf, size_t len);

/* config_check.c */
/* Whether s is empty or only blanks (TIDEMARK_CONF then means: off). */
int tdm__config_blank(const char *s);
/* Everything applying `text` checks before it changes anything; the
 * constructor and tdm_conf_check both run exactly this.  Parses into
 * *cfg; unless cfg->help, also makes the dump template absolute into
 * tmpl[0..TDM__CONF_PATH_MAX), checks that it expands for this process
 * (with start time start_us), and that the allocator takes the device
 * settings.  On failure err gets the one line and the status is not
 * TDM_OK. */
tdm_status tdm__config_prepare(const char *text, tdm__config *cfg, char *tmpl,
                               uint64_t start_us, char *err, size_t err_len);
/* Writes the help text (help=1) to stderr. */
void tdm__config_print_help(void);
/* The one line for a configuration whose device the allocator refused
 * with st. */
void tdm__config_device_error(char *err, size_t err_len, const tdm__config *cfg,
                              tdm_status st);

/* ---- what the value parsers of config*.c share (config.c) -------------- */

/* A blank as isspace() says in the C locale, whatever the program's
 * locale is. */
static inline int tdm__config_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
}

/* Trims blanks from both ends of [*b, *e). */
static inline void tdm__config_trim(const char **b, const char **e)
{
    while (*b < *e && tdm__config_is_blank(**b))
        (*b)++;
    while (*e > *b && tdm__config_is_blank((*e)[-1]))
        (*e)--;
}

/* Writes why a value was refused (one line, printf-style) into
 * why[0..why_len). */
void tdm__config_why(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the caching allocator's keys (config_alloc.c) ------------------- */

/* `max_split_size`: a size, as tdm__config_parse_size (into a uint64_t). */
int tdm__config_parse_bytes(const tdm__conf_key *key, const char *value,
                            void *field, char *why, size_t why_len);
/* `roundup_power2_divisions`: 0, a power of two, or PyTorch's list
 * [MiB:N,...,>:N] (into uint32_t[TDM_ROUNDUP_INTERVALS]). */
int tdm__config_parse_roundup(const tdm__conf_key *key, const char *value,
                              void *field, char *why, size_t why_len);
/* `garbage_collection_threshold`: 0, or a decimal fraction in (0, 1)
 * (into a double). */
int tdm__config_parse_threshold(const tdm__conf_key *key, const char *value,
                                void *field, char *why, size_t why_len);

/* ---- `ranks` (config_ranks.c) ------------------------------------------ */

/* The `ranks` row's parser: `all`, or ranks and ranges A-B separated by
 * commas, optionally in [...], optionally after `local:`. */
int tdm__config_parse_ranks(const tdm__conf_key *key, const char *value,
                            void *field, char *why, size_t why_len);

/* Nonzero when `ranks` selects the process with this rank and local rank
 * (-1, unknown, counts as 0, as %r and %l expand it). */
int tdm__config_rank_selected(const tdm__config *cfg, int32_t rank,
                              int32_t local_rank);

/* The recording options a configuration asks for. */
void tdm__config_history_options(const tdm__config *cfg,
                                 tdm_history_options *opts);
/* The stacks a configuration asks for, `auto` decided: all (native and
 * Python frames) in a program that runs a CPython interpreter (found by
 * dlsym(RTLD_DEFAULT, "_PyRuntime"), as snapshot/pyframes.c finds it),
 * native otherwise.  A Python program's native stacks are the
 * interpreter's and libffi's frames, the same for every allocation. */
int tdm__config_stacks(const tdm__config *cfg);

/* Parses a byte size: digits, optional blanks, optional unit B, K, M, G, T
 * or KiB, MiB, GiB, TiB (any case; K = KiB = 1024).  0 on success; else
 * `why` says what is wrong. */
int tdm__config_parse_size(const char *text, uint64_t *out, char *why,
                           size_t why_len);

/* ---- dump paths (dump_path.c) ------------------------------------------ */

/* What the % codes of a dump template stand for. */
typedef struct tdm__dump_vars {
    const char *host;       /* %h; '/' becomes '_' */
    int64_t pid;            /* %p */
    int32_t rank;           /* %r; -1 (unknown) expands to 0 */
    int32_t local_rank;     /* %l; -1 (unknown) expands to 0 */
    uint64_t start_time_us; /* %t, as YYYYmmdd-HHMMSS in UTC */
} tdm__dump_vars;

/* 0 when every % in `tmpl` is a known code and the template is not empty;
 * else `why` says what is wrong. */
int tdm__dump_path_check(const char *tmpl, char *why, size_t why_len);

/* Expands `tmpl` into out[0..out_len).  TDM_INVALID_ARGUMENT for a bad
 * template or a result that does not fit. */
tdm_status tdm__dump_path_expand(const char *tmpl, const tdm__dump_vars *vars,
                                 char *out, size_t out_len);

/* Expands `tmpl` for this process now (host, pid, ranks from the
 * environment through tdm__procinfo_read) with the given start time. */
tdm_status tdm__dump_path_for_process(const char *tmpl, uint64_t start_time_us,
                                      char *out, size_t out_len);

/* `path` with `suffix` put before the extension of its last component
 * ("out/a.tdm", "-2" -> "out/a-2.tdm"; "out/a" -> "out/a-2"). */
tdm_status tdm__dump_path_with_suffix(const char *path, const char *suffix,
                                      char *out, size_t out_len);

/* Whether the template names the pid (%p, not the escaped %%p). */
int tdm__dump_template_has_pid(const char *tmpl);

/* tmpl = dump made absolute from the current folder ('%' in the folder's
 * name escaped); -1 when it does not fit tmpl_len. */
int tdm__dump_template_absolute(const char *dump, char *tmpl, size_t tmpl_len);

/* Creates the missing folders above `path` (mode 0777 less the umask).
 * TDM_IO_ERROR, with errno set, when one cannot be made. */
tdm_status tdm__dump_path_make_parent(const char *path);

/* The spill file's path (spill_path.c): `spill_tmpl` expanded (its folders
 * made), or, when it is "", the default place for the dump file
 * `dump_path` (see spill_path.c).  TDM_IO_ERROR with errno set when the
 * folder cannot be made or is not this user's. */
tdm_status tdm__spill_path_for_process(const char *spill_tmpl, const char *dump_path,
                                       int dump_has_pid, uint64_t start_time_us,
                                       char *out, size_t out_len);
/* Opens the spill file for a process applying `cfg` (dump_tmpl and
 * spill_tmpl made absolute; spill_tmpl "" for the default place; `text`
 * the configuration).  Returns 1 when `line` holds a line to say (where
 * the file is, on a terminal; or why there is none), else 0. */
int tdm__spill_start(const tdm__config *cfg, const char *dump_tmpl, const char *spill_tmpl,
                     int dump_has_pid, uint64_t start_time_us, const char *text,
                     char *line, size_t line_len);
/* 1 when a file at `path` was last written at or after `since_us` (µs
 * since the epoch): another process of the same run (an exec'd child, a
 * sibling) wrote it while this one was alive, and it must not be
 * replaced.  0 when there is none, or it is older (a previous run's). */
int tdm__dump_path_written_since(const char *path, uint64_t since_us);

/* When this process's group started (its leader's start time, from /proc;
 * at most own_start_us): the processes of one job (a shell script and the
 * programs it runs, a launcher and its workers) share a process group, so
 * a file written since then is another of them's.  own_start_us when the
 * leader cannot be read. */
uint64_t tdm__dump_path_group_start_us(uint64_t own_start_us);

/* ---- load-time enabling (autoinit.c) ----------------------------------- */

/* Applies TIDEMARK_CONF text as the load-time constructor does: prints
 * the error line or the help and returns TDM_BAD_CONFIG (or TDM_OK for
 * help) leaving everything off, or configures the allocator, starts
 * recording and arranges the dumps.  NULL or blank text does nothing;
 * of the calls with other text, only the first in a process acts, later
 * ones return TDM_OK and do nothing. */
tdm_status tdm__autoinit_apply(const char *text);

#endif
