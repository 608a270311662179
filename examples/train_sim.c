/* examples/train_sim.c: a training loop on tidemark's sim device.
 *
 * It allocates device memory the way a deep-learning framework does while
 * training a multi-layer perceptron with Adam:
 *   init       parameters, made once and kept;
 *   data       one input batch per step;
 *   forward    activations saved for backward, plus short-lived temporaries;
 *   backward   gradients made, activations freed in reverse layer order;
 *   optimizer  Adam's two state buffers per parameter, made at the first step;
 *   zero_grad  gradients freed (PyTorch 2's set_to_none default).
 * and marks its phases and steps so the snapshot can say when the peak was.
 *
 * Two ways to record it:
 *   TIDEMARK_CONF=dump=train.tdm ./train_sim           (no code changes)
 *   ./train_sim --dump train.tdm                        (the C API below)
 * then: tidemark summary train.tdm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tidemark.h"

#define MAX_LAYERS 64

typedef struct model {
    int layers;
    size_t hidden;   /* features per layer */
    size_t batch;    /* samples per step */
    int device;
    long compute_us; /* simulated kernel time per layer and pass */
    void *weight[MAX_LAYERS], *bias[MAX_LAYERS];
    void *grad_w[MAX_LAYERS], *grad_b[MAX_LAYERS];
    void *adam_m[MAX_LAYERS], *adam_v[MAX_LAYERS];
    void *activation[MAX_LAYERS];  /* saved for backward */
    void *preact[MAX_LAYERS];      /* pre-activation, saved too */
} model;

#define NOINLINE __attribute__((noinline))

static void *device_alloc(model *m, size_t bytes, const char *what)
{
    void *p = NULL;
    tdm_status st = tdm_malloc(&p, bytes, m->device, 0);
    if (st != TDM_OK) {
        fprintf(stderr, "train_sim: allocating %zu bytes for %s: %s\n", bytes,
                what, tdm_strerror(st));
        exit(1);
    }
    return p;
}

static void device_free(void *p)
{
    tdm_status st = tdm_free(p);
    if (st != TDM_OK) {
        fprintf(stderr, "train_sim: free: %s\n", tdm_strerror(st));
        exit(1);
    }
}

/* Stands in for the kernels a real layer would run, so the timeline has
 * the shape of a real one (memory held while compute happens). */
static void compute(const model *m)
{
    if (m->compute_us <= 0)
        return;
    struct timespec ts = {m->compute_us / 1000000, (m->compute_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static size_t weight_bytes(const model *m) { return m->hidden * m->hidden * 4; }
static size_t bias_bytes(const model *m) { return m->hidden * 4; }
static size_t act_bytes(const model *m) { return m->batch * m->hidden * 4; }

static NOINLINE void init_parameters(model *m)
{
    tdm_phase("init");
    for (int l = 0; l < m->layers; l++) {
        m->weight[l] = device_alloc(m, weight_bytes(m), "weight");
        m->bias[l] = device_alloc(m, bias_bytes(m), "bias");
    }
}

static NOINLINE void *load_batch(model *m)
{
    tdm_phase("data");
    return device_alloc(m, act_bytes(m), "input batch");
}

/* One layer: a matmul workspace that lives only inside the layer, then the
 * pre-activation and the activation, both saved for backward. */
static NOINLINE void forward_layer(model *m, int l)
{
    void *workspace = device_alloc(m, act_bytes(m) / 2, "matmul workspace");
    m->preact[l] = device_alloc(m, act_bytes(m), "pre-activation");
    m->activation[l] = device_alloc(m, act_bytes(m), "activation");
    compute(m);
    device_free(workspace);
}

static NOINLINE void forward(model *m)
{
    tdm_phase("forward");
    for (int l = 0; l < m->layers; l++)
        forward_layer(m, l);
}

static NOINLINE void backward_layer(model *m, int l)
{
    void *grad_input = device_alloc(m, act_bytes(m), "input gradient");
    m->grad_w[l] = device_alloc(m, weight_bytes(m), "weight gradient");
    m->grad_b[l] = device_alloc(m, bias_bytes(m), "bias gradient");
    compute(m);
    device_free(m->activation[l]);
    device_free(m->preact[l]);
    device_free(grad_input);
}

static NOINLINE void backward(model *m)
{
    tdm_phase("backward");
    for (int l = m->layers - 1; l >= 0; l--)
        backward_layer(m, l);
}

static NOINLINE void optimizer_step(model *m)
{
    tdm_phase("optimizer");
    for (int l = 0; l < m->layers; l++) {
        if (!m->adam_m[l]) { /* Adam's state appears at the first step */
            m->adam_m[l] = device_alloc(m, weight_bytes(m), "adam exp_avg");
            m->adam_v[l] = device_alloc(m, weight_bytes(m), "adam exp_avg_sq");
        }
        /* the update itself needs a temporary the size of the weight */
        void *update = device_alloc(m, weight_bytes(m), "update temporary");
        compute(m);
        device_free(update);
    }
}

static NOINLINE void zero_grad(model *m)
{
    tdm_phase("zero_grad");
    for (int l = 0; l < m->layers; l++) {
        device_free(m->grad_w[l]);
        device_free(m->grad_b[l]);
        m->grad_w[l] = m->grad_b[l] = NULL;
    }
}

static NOINLINE void train(model *m, int steps)
{
    init_parameters(m);
    for (int s = 0; s < steps; s++) {
        tdm_step();
        void *batch = load_batch(m);
        forward(m);
        backward(m);
        optimizer_step(m);
        zero_grad(m);
        device_free(batch);
    }
    tdm_phase("end");
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: train_sim [--steps N] [--layers N] [--hidden N] [--batch N]\n"
            "                 [--device N] [--compute-us N] [--startup-ms N] [--dump PATH]\n"
            "Trains a simulated MLP on tidemark's sim device.\n"
            "  --steps N   training steps (default 5)\n"
            "  --layers N  layers, at most %d (default 6)\n"
            "  --hidden N  features per layer (default 2048)\n"
            "  --batch N   samples per step (default 512)\n"
            "  --device N  device ordinal (default 0)\n"
            "  --compute-us N  simulated compute per layer and pass, in us\n"
            "              (default 300; 0 runs as fast as it can)\n"
            "  --startup-ms N  wait N ms before the first allocation, as a\n"
            "              program's imports or MPI_Init do (default 0)\n"
            "  --dump PATH record with the C API and write a snapshot to PATH\n"
            "Without --dump, set TIDEMARK_CONF (e.g. dump=train.tdm) to record.\n",
            MAX_LAYERS);
}

static long parse_count(const char *flag, const char *v, long min, long max)
{
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || n < min || n > max) {
        fprintf(stderr, "train_sim: %s needs a number from %ld to %ld\n", flag, min, max);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    model m = {.layers = 6, .hidden = 2048, .batch = 512, .device = 0,
               .compute_us = 300};
    int steps = 5;
    long startup_ms = 0;
    const char *dump = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--steps")) {
            steps = (int)parse_count(a, v, 0, 1000000), i++;
        } else if (!strcmp(a, "--layers")) {
            m.layers = (int)parse_count(a, v, 1, MAX_LAYERS), i++;
        } else if (!strcmp(a, "--hidden")) {
            m.hidden = (size_t)parse_count(a, v, 1, 1 << 20), i++;
        } else if (!strcmp(a, "--batch")) {
            m.batch = (size_t)parse_count(a, v, 1, 1 << 24), i++;
        } else if (!strcmp(a, "--device")) {
            m.device = (int)parse_count(a, v, 0, 1023), i++;
        } else if (!strcmp(a, "--startup-ms")) {
            startup_ms = parse_count(a, v, 0, 100000), i++;
        } else if (!strcmp(a, "--compute-us")) {
            m.compute_us = parse_count(a, v, 0, 10000000), i++;
        } else if (!strcmp(a, "--dump") && v) {
            dump = v, i++;
        } else {
            fprintf(stderr, "train_sim: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }

    if (dump) {
        tdm_history_options opts;
        tdm_history_options_init(&opts);
        tdm_status st = tdm_record_memory_history(&opts);
        if (st != TDM_OK) {
            fprintf(stderr, "train_sim: cannot record: %s\n", tdm_strerror(st));
            return 1;
        }
    }
    tdm_set_metadata("example: train_sim (MLP + Adam on the sim device)");
    if (startup_ms > 0) {
        struct timespec ts = {startup_ms / 1000, (startup_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    train(&m, steps);

    tdm_stats stats = {.size = sizeof stats};
    if (tdm_memory_stats(m.device, &stats) == TDM_OK)
        printf("train_sim: %d steps, peak allocated %.1f MiB, live at end %.1f MiB\n",
               steps, stats.allocated_bytes.peak / 1048576.0,
               stats.allocated_bytes.current / 1048576.0);
    if (dump) {
        tdm_status st = tdm_dump_snapshot(dump);
        if (st != TDM_OK) {
            fprintf(stderr, "train_sim: writing %s: %s\n", dump, tdm_strerror(st));
            return 1;
        }
        printf("train_sim: wrote %s\n", dump);
    }
    return 0;
}
