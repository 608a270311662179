/* base/procinfo_vars.h: the environment variables that say a
 * process's rank in a job, closest to the process first (procinfo.c reads
 * them in the recorder; `tidemark top` reads them from a running
 * process's /proc/PID/environ, so both name the same rank). */
#ifndef TDM_BASE_PROCINFO_VARS_H
#define TDM_BASE_PROCINFO_VARS_H

static const char *const tdm__rank_vars[] = {
    "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
    "MV2_COMM_WORLD_RANK", "PALS_RANKID", "JSM_NAMESPACE_RANK",
    "FLUX_TASK_RANK", "ALPS_APP_PE", "SLURM_PROCID", NULL,
};

#endif
