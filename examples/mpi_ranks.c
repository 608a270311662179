/* examples/mpi_ranks.c: an MPI job whose ranks hold different amounts of
 * device memory, as uneven model shards do (a pipeline stage with more
 * layers, the rank that also holds the embedding table, ...).
 *
 * Rank r of the job:
 *   init      allocates (r + 1) parameter shards of --shard-mib MiB each
 *             on the sim device, kept to the end;
 *   forward   per step, --layers activations of --act-mib MiB each, kept
 *             for backward;
 *   backward  per layer, from the last: an activation gradient of
 *             --act-mib MiB, then that layer's activation and the gradient
 *             are freed;
 *   allreduce the ranks exchange a small host buffer (MPI_Allreduce), as
 *             data-parallel training does with gradients.
 * So rank r's peak of allocated device memory, reached at the first
 * layer of backward, is exactly
 *     (r + 1) * shard + layers * act + act
 * which is 64 (r + 1) + 80 MiB with the defaults, and what it holds at
 * exit is its parameters, (r + 1) * shard.
 *
 * Record every rank through TIDEMARK_CONF alone, one file per rank:
 *     mpirun -np 4 -x TIDEMARK_CONF=dump=out/%h-r%r.tdm ./mpi_ranks
 *     tidemark summary out/
 *     tidemark gate --max-peak 300MiB out/
 * (docs/multi-rank.md has Slurm, PBS and torchrun versions.)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidemark.h"

#define MiB ((size_t)1 << 20)
#define MAX_LAYERS 64
#define NOINLINE __attribute__((noinline))

typedef struct job {
    int rank, size;
    int steps, layers;
    size_t shard, act;        /* bytes of a parameter shard, an activation */
    void **params;            /* rank + 1 shards */
    void *acts[MAX_LAYERS];
} job;

static void *device_alloc(const job *j, size_t bytes, const char *what)
{
    void *p = NULL;
    tdm_status st = tdm_malloc(&p, bytes, 0, 0);
    if (st != TDM_OK) {
        fprintf(stderr, "mpi_ranks: rank %d: allocating %zu bytes for %s: %s\n", j->rank,
                bytes, what, tdm_strerror(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static void device_free(const job *j, void *p)
{
    tdm_status st = tdm_free(p);
    if (st != TDM_OK) {
        fprintf(stderr, "mpi_ranks: rank %d: free: %s\n", j->rank, tdm_strerror(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* This rank's share of the model: one shard more than the rank before. */
static NOINLINE void load_shards(job *j)
{
    tdm_phase("init");
    tdm_tag_push(TDM_CATEGORY_PARAMETER);
    for (int s = 0; s <= j->rank; s++)
        j->params[s] = device_alloc(j, j->shard, "parameter shard");
    tdm_tag_pop();
}

static NOINLINE void forward(job *j)
{
    tdm_phase("forward");
    for (int l = 0; l < j->layers; l++)
        j->acts[l] = device_alloc(j, j->act, "activation");
}

static NOINLINE void backward(job *j)
{
    tdm_phase("backward");
    for (int l = j->layers - 1; l >= 0; l--) {
        void *grad = device_alloc(j, j->act, "activation gradient");
        device_free(j, j->acts[l]);
        device_free(j, grad);
    }
}

static NOINLINE void allreduce(job *j)
{
    tdm_phase("allreduce");
    double local[64], total[64];
    for (int i = 0; i < 64; i++)
        local[i] = j->rank + i;
    MPI_Allreduce(local, total, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static long parse_arg(const char *flag, const char *v, long min, long max)
{
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || n < min || n > max) {
        fprintf(stderr, "mpi_ranks: %s needs a number from %ld to %ld\n", flag, min, max);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    job j = {.steps = 3, .layers = 4, .shard = 64 * MiB, .act = 16 * MiB};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--steps"))
            j.steps = (int)parse_arg(a, v, 1, 100000), i++;
        else if (!strcmp(a, "--layers"))
            j.layers = (int)parse_arg(a, v, 1, MAX_LAYERS), i++;
        else if (!strcmp(a, "--shard-mib"))
            j.shard = (size_t)parse_arg(a, v, 1, 1 << 20) * MiB, i++;
        else if (!strcmp(a, "--act-mib"))
            j.act = (size_t)parse_arg(a, v, 1, 1 << 20) * MiB, i++;
        else {
            fprintf(stderr, "usage: mpi_ranks [--steps N] [--layers N] [--shard-mib N] "
                            "[--act-mib N]\n");
            return 2;
        }
    }

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &j.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &j.size);
    j.params = calloc((size_t)j.rank + 1, sizeof *j.params);
    if (!j.params)
        MPI_Abort(MPI_COMM_WORLD, 1);

    char meta[96];
    snprintf(meta, sizeof meta, "example: mpi_ranks, rank %d of %d", j.rank, j.size);
    tdm_set_metadata(meta);
    load_shards(&j);
    for (int s = 0; s < j.steps; s++) {
        tdm_step();
        forward(&j);
        backward(&j);
        allreduce(&j);
    }
    tdm_phase("end");

    size_t peak = ((size_t)j.rank + 1) * j.shard + (size_t)j.layers * j.act + j.act;
    tdm_stats stats = {.size = sizeof stats};
    if (tdm_memory_stats(0, &stats) == TDM_OK)
        printf("mpi_ranks: rank %d of %d: peak allocated %lld B (expected %zu B), "
               "recording %s\n", j.rank, j.size, (long long)stats.allocated_bytes.peak, peak,
               tdm_is_recording() ? "on" : "off");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    /* The parameters stay live on the device: the exit snapshot shows them. */
    free(j.params);
    return 0;
}
