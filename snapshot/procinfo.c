/* snapshot/procinfo.c: host, pid and rank of this process.
 *
 * Rank variables are read in a fixed order of preference: the launcher
 * closest to the process wins (torchrun's RANK over Slurm's SLURM_PROCID,
 * which is also set when torchrun runs under srun; mpirun's OMPI_* and
 * Hydra's PMI_RANK/MPI_LOCALRANKID over the SLURM_PROCID=0 and
 * SLURM_LOCALID=0 that a batch script passes on to the mpirun it starts).
 * Launchers covered: torchrun (RANK, LOCAL_RANK, WORLD_SIZE), Open MPI
 * (OMPI_COMM_WORLD_*), PMIx (PMIX_RANK; PMIx exports no local rank, the
 * launcher's own variable gives it), MPICH/Intel MPI Hydra (PMI_RANK,
 * PMI_SIZE, MPI_LOCALRANKID), Cray PMI (PMI_LOCAL_RANK), MVAPICH2
 * (MV2_COMM_WORLD_*), PBS/PALS (PALS_RANKID, PALS_LOCAL_RANKID), LSF jsrun
 * (JSM_NAMESPACE_*), Flux (FLUX_TASK_RANK, FLUX_TASK_LOCAL_ID,
 * FLUX_JOB_SIZE), Cray ALPS (ALPS_APP_PE) and Slurm (SLURM_PROCID,
 * SLURM_LOCALID, SLURM_NTASKS).  A value that is not a plain non-negative
 * integer is ignored. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "procinfo.h"
#include "procinfo_vars.h"

static const char *const local_rank_vars[] = {
    "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "PALS_LOCAL_RANKID",
    "JSM_NAMESPACE_LOCAL_RANK", "FLUX_TASK_LOCAL_ID", "SLURM_LOCALID", NULL,
};
static const char *const world_size_vars[] = {
    "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE", "PALS_SIZE", "JSM_NAMESPACE_SIZE",
    "FLUX_JOB_SIZE", "SLURM_NTASKS", "SLURM_NPROCS", NULL,
};

/* The first variable of `names` holding a non-negative integer, or -1. */
static int32_t first_int_var(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v)
            continue;
        char *end = NULL;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n <= INT32_MAX)
            return (int32_t)n;
    }
    return -1;
}

void tdm__procinfo_read(tdm_procinfo *info)
{
    memset(info, 0, sizeof *info);
    if (gethostname(info->host, sizeof info->host - 1) != 0)
        strcpy(info->host, "unknown");
    info->pid = (int64_t)getpid();
    info->rank = first_int_var(tdm__rank_vars);
    info->local_rank = first_int_var(local_rank_vars);
    int32_t ws = first_int_var(world_size_vars);
    info->world_size = ws < 0 ? 0 : ws;
}

uint64_t tdm__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
