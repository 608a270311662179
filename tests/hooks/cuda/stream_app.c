/* tests/hooks/cuda/stream_app.c: a CUDA runtime program whose device work
 * runs "later": the fake driver completes work queued on a stream only
 * when the program says so (fake_cuda_stream_enqueue / _complete).  It
 * checks, itself, what a correct allocator must do, and exits 1 with a
 * "FAIL:" line when something is wrong.  Run under the preload in cache
 * mode (test_cuda.sh, scenarios rt_stream_free and rt_capture):
 *
 *   stream_app free    cudaFreeAsync(p, s2) of a block of stream s1 is not
 *                      handed out on s1 while s2's work is queued, and is
 *                      once it completed; a free on the block's own stream
 *                      is reusable at once; when memory is short the
 *                      allocator waits for s2 instead of failing; cudaFree
 *                      waits for the device as CUDA's does
 *   stream_app capture during a global-mode capture nothing CUDA forbids
 *                      is called (no event query, no free), a cached block
 *                      is still served, cudaMallocAsync on the capturing
 *                      stream is the driver's (graph memory); during a
 *                      relaxed capture an out-of-memory cudaMalloc frees
 *                      no cached segment
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void (*enqueue)(void *);
static void (*complete)(void *);
static long (*pending)(void *);
static long (*violations)(void);
static long (*calls)(const char *);
static int failed;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAIL: " __VA_ARGS__);                                      \
            printf("\n");                                                      \
            failed = 1;                                                        \
        }                                                                      \
    } while (0)
#define OK(call) CHECK((call) == cudaSuccess, "%s", #call)

static void load_controls(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) {
        printf("FAIL: the fake driver is not loaded\n");
        exit(1);
    }
    enqueue = (void (*)(void *))dlsym(h, "fake_cuda_stream_enqueue");
    complete = (void (*)(void *))dlsym(h, "fake_cuda_stream_complete");
    pending = (long (*)(void *))dlsym(h, "fake_cuda_stream_pending");
    violations = (long (*)(void))dlsym(h, "fake_cuda_capture_violations");
    calls = (long (*)(const char *))dlsym(h, "fake_cuda_calls");
    if (!enqueue || !complete || !pending || !violations || !calls) {
        printf("FAIL: not the fake driver\n");
        exit(1);
    }
}

static void app_free_on_other_stream(void)
{
    cudaStream_t s1, s2;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));
    void *p = NULL, *q = NULL, *r = NULL, *t = NULL;
    OK(cudaMallocAsync(&p, 4096, s1));
    enqueue(s2); /* a kernel on s2 reads p */
    OK(cudaFreeAsync(p, s2));
    OK(cudaMallocAsync(&q, 4096, s1));
    CHECK(q != p, "block %p handed out again on s1 while s2's work on it was queued", p);
    complete(s2);
    OK(cudaMallocAsync(&r, 4096, s1));
    CHECK(r == p, "block %p not reused after s2's work completed (got %p)", p, r);
    /* Freed on its own stream: stream order protects it, reuse at once. */
    enqueue(s1);
    OK(cudaFreeAsync(r, s1));
    OK(cudaMallocAsync(&t, 4096, s1));
    CHECK(t == r, "a block freed on its own stream was not reused at once");
    CHECK(pending(s1) == 1, "a same-stream free waited for the stream");
    complete(s1);
    OK(cudaFreeAsync(q, s1));
    OK(cudaFreeAsync(t, s1));

    /* Memory short: the only memory is a block still used by s2. */
    void *big = NULL, *big2 = NULL;
    OK(cudaMallocAsync(&big, 40u << 20, s1));
    enqueue(s2);
    OK(cudaFreeAsync(big, s2));
    OK(cudaMallocAsync(&big2, 40u << 20, s1));
    CHECK(pending(s2) == 0, "out of memory while s2 held a freed block: s2 not waited for");
    OK(cudaFreeAsync(big2, s1));

    /* cudaFree synchronizes the device, under tidemark too. */
    void *m = NULL;
    OK(cudaMalloc(&m, 8192));
    enqueue(s2);
    OK(cudaFree(m));
    CHECK(pending(s2) == 0, "cudaFree of a cached block did not wait for the device");
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
}

static void app_capture(void)
{
    cudaStream_t s1, s2;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));
    void *a = NULL, *c = NULL, *g = NULL, *h = NULL, *z = NULL;
    OK(cudaMallocAsync(&a, 4096, s1));
    OK(cudaMalloc(&c, 8192)); /* a block of stream 0, cached below */
    OK(cudaFree(c));
    long frees = calls("cuMemFree_v2");

    cudaGraph_t graph = NULL;
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    enqueue(s2);
    OK(cudaFreeAsync(a, s2));          /* waits for s2: no event query now */
    void *c2 = NULL;
    OK(cudaMalloc(&c2, 8192));         /* served from the cache */
    CHECK(c2 == c, "a cached block was not served during the capture");
    OK(cudaMallocAsync(&g, 1u << 20, s1)); /* a graph memory node: the driver's */
    OK(cudaFreeAsync(g, s1));
    OK(cudaStreamEndCapture(s1, &graph));
    CHECK(graph != NULL, "the capture was invalidated");
    CHECK(violations() == 0, "%ld calls CUDA forbids during a capture", violations());

    /* After the capture the deferred free waits for s2 as any other. */
    OK(cudaMallocAsync(&z, 4096, s1));
    CHECK(z != a, "block freed on s2 during the capture reused while s2 ran");
    complete(s2);
    OK(cudaFree(c2)); /* waits for the device: after the check above */

    /* Relaxed capture: out of memory, but no cached segment is freed. */
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&h, (size_t)1 << 40) == cudaErrorMemoryAllocation,
          "an impossible cudaMalloc during a capture did not fail as out of memory");
    OK(cudaStreamEndCapture(s1, &graph));
    CHECK(calls("cuMemFree_v2") == frees, "%ld segments freed during the captures",
          calls("cuMemFree_v2") - frees);
    cudaGetLastError();
    OK(cudaFreeAsync(z, s1));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    OK(cudaFree(NULL)); /* the context, and the driver loaded */
    load_controls();
    if (strcmp(what, "free") == 0)
        app_free_on_other_stream();
    else if (strcmp(what, "capture") == 0)
        app_capture();
    else {
        printf("usage: stream_app free|capture\n");
        return 2;
    }
    printf("%s\n", failed ? "failed" : "ok");
    return failed;
}
