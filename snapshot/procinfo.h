/* snapshot/procinfo.h: who this process is in a job (host, pid, rank),
 * read from the environment variables of MPI launchers, Slurm, torchrun and
 * PBS/PALS.  Read once; cheap to ask again. */
#ifndef TDM_SNAPSHOT_PROCINFO_H
#define TDM_SNAPSHOT_PROCINFO_H

#include <stdint.h>

typedef struct tdm_procinfo {
    char host[256];
    int64_t pid;
    int32_t rank;       /* -1 when not in a multi-rank job */
    int32_t local_rank; /* -1 when unknown */
    int32_t world_size; /* 0 when unknown */
} tdm_procinfo;

/* Fills *info from the current process and environment (fresh each call,
 * so a forked child sees its own pid). */
void tdm__procinfo_read(tdm_procinfo *info);

/* Microseconds since the Unix epoch, CLOCK_REALTIME. */
uint64_t tdm__now_us(void);

#endif
