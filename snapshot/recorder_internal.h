/* snapshot/recorder_internal.h: state shared by the recorder's own files
 * (recorder.c: configuration and the hot path; annotate.c: phases, steps,
 * tags; dump.c: building and writing snapshots).  Nothing outside
 * snapshot/ includes this. */
#ifndef TDM_SNAPSHOT_RECORDER_INTERNAL_H
#define TDM_SNAPSHOT_RECORDER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "recorder.h"
#include "ring.h"

/* Distinct phase names kept; names are cut at TDM_PHASE_NAME_MAX - 1. */
#define TDM_MAX_PHASES 1024
#define TDM_PHASE_NAME_MAX 64

/* The ring in use and the phase and step in force live in tdm__rec
 * (recorder.h), beside the switches: every event reads them. */
typedef struct tdm__recorder {
    /* Events dropped by rings retired with clear_history=0. */
    _Atomic uint64_t carried_drops;
    _Atomic(tdm__state_source_fn) state_source;
    _Atomic(tdm__tag_listener_fn) tag_listener;

    /* Everything below is guarded by `lock` (rare paths only). */
    pthread_mutex_t lock;
    tdm_history_options opts;  /* as last configured */
    uint64_t start_time_us;    /* when recording was last switched on */
    char *config_text;         /* TIDEMARK_CONF, malloc'd */
    char *metadata;            /* tdm_set_metadata, malloc'd */
    const char *alloc_mode;    /* static string from alloc/ */
    uint32_t phase_count;      /* names in use, [0] = "" */
    char phase_names[TDM_MAX_PHASES][TDM_PHASE_NAME_MAX];
} tdm__recorder;

extern tdm__recorder tdm__recorder_state TDM__HIDDEN;

/* dump.c: a child starts with no dump in progress. */
void tdm__dump_after_fork_child(void);

#endif
