/* viewer-export/cli/top.h: `tidemark top`, a live view of recording
 * processes read from their spill files (docs/live.md).  Private to cli/:
 *   top_find.c    which spill files an operand stands for (a pid, a spill
 *                 file, a folder, or every recording process of this user);
 *   top_read.c    one reading of one spill file: the figures a frame shows;
 *   top_labels.c  who the process is in its job (host, rank, job id);
 *   top_frame.c   the terminal frame;
 *   top_metrics.c the OpenMetrics text;
 *   cmd_top.c     options, the refresh loop, the terminal's raw mode.
 * Nothing here writes to, signals or pauses the programs it watches.
 * No state but what cmd_top.c keeps across refreshes; the tool is single
 * threaded. */
#ifndef TDM_VIEWER_CLI_TOP_H
#define TDM_VIEWER_CLI_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidemark.h"

/* A spill file to watch and the process that owns it. */
typedef struct tdm_top_source {
    char *path;
    int64_t pid;   /* from the file's header */
    int alive;     /* the process is running and maps the file */
} tdm_top_source;

typedef struct tdm_top_sources {
    tdm_top_source *v;
    size_t count;
} tdm_top_sources;

/* The spill files `operand` stands for: NULL, every spill file of this
 * user's recording processes in the default spill folders (and the
 * folders of `tidemark run`s in them); a number, that process's spill
 * file (from /proc/PID/maps, else the folders); a spill file, itself; a
 * folder, the spill files in it or, for a `tidemark run` snapshot
 * folder, those of the run writing into it.  TDM_EXIT_OK, or
 * TDM_EXIT_BAD_INPUT / TDM_EXIT_TOOL_ERROR after saying why on one line
 * on `diag` (NULL: silent, but for running out of memory). */
int tdm__top_find(const char *cmd, const char *operand, tdm_top_sources *out, FILE *diag);
void tdm__top_sources_free(tdm_top_sources *s);
/* Nonzero when process `pid` runs and maps the file at `path`. */
int tdm__top_process_maps(int64_t pid, const char *path);

/* Labels of a process in its job: from its /proc/PID/environ when it can
 * be read (the recorded process's own variables), else this process's. */
typedef struct tdm_top_labels {
    char host[128];
    char rank[16];   /* "" when not in a multi-rank job */
    char job[128];   /* the batch system's job id; "" when none */
} tdm_top_labels;
void tdm__top_labels_read(int64_t pid, const char *recorded_host, tdm_top_labels *out);

#define TDM_TOP_HISTORY 60 /* seconds the plot shows */
#define TDM_TOP_SITES 5    /* sites listed per device */

typedef struct tdm_top_site {
    uint64_t bytes, count;
    char where[192];       /* "function (file.c:12)", escaped */
} tdm_top_site;

typedef struct tdm_top_device {
    int32_t ordinal;
    char name[64];
    int64_t allocated, reserved;           /* now, bytes */
    int64_t peak_allocated, peak_reserved; /* over the history the ring holds */
    int reserved_known;
    uint64_t category_bytes[TDM_CATEGORY_COUNT_]; /* allocated now, by category */
    int64_t history[TDM_TOP_HISTORY]; /* allocated at the end of each of the
                                       * last seconds, oldest first; -1 before
                                       * the recording */
    tdm_top_site sites[TDM_TOP_SITES];
    size_t site_count;
} tdm_top_device;

typedef struct tdm_top_process {
    tdm_top_source source;    /* borrowed path */
    tdm_top_labels labels;
    char command[160];        /* escaped */
    uint64_t start_us;
    uint64_t last_event_ns;
    uint64_t events, dropped, torn;
    uint64_t copied_bytes;    /* read from the file for this reading */
    tdm_top_device *devices;
    size_t device_count;
} tdm_top_process;

/* What readings keep from one refresh to the next: per spill file, the
 * symbolizer over its modules (opening them costs far more than a
 * reading), opened again when the process has loaded more. */
typedef struct tdm_top_cache tdm_top_cache;
tdm_top_cache *tdm__top_cache_new(void);
void tdm__top_cache_free(tdm_top_cache *c);
/* Forgets the files not among `src` (processes that ended), so that a
 * view left running for days keeps the symbols of the living only. */
void tdm__top_cache_keep(tdm_top_cache *c, const tdm_top_sources *src);

/* One reading of `src` at time now_ns (CLOCK_REALTIME): its figures into
 * *out; with `sites` 0 no site is named, which spares the symbolizer
 * (opening a process's modules' symbols: up to 0.3 s and 200 MB for
 * libc's debug file) where only numbers are wanted (--openmetrics).
 * TDM_OK; else the status, with why[] saying it in one line. */
tdm_status tdm__top_read(tdm_top_cache *cache, const tdm_top_source *src, uint64_t now_ns,
                         int sites, tdm_top_process *out, char *why, size_t why_len);
void tdm__top_process_free(tdm_top_process *p);

/* The frame for a terminal (`ansi`: bold headings, drawn over the last
 * frame) or a plain one (--once into a pipe); when it would take more
 * than `rows` lines (0: no limit), one line per process and device. */
void tdm__top_frame_print(FILE *out, const tdm_top_process *procs, size_t n,
                          const char *const *failed, size_t nfailed, int ansi,
                          unsigned rows, uint64_t now_ns);

/* The OpenMetrics text of the processes, ending with "# EOF". */
void tdm__top_metrics_print(FILE *out, const tdm_top_process *procs, size_t n);

#endif
