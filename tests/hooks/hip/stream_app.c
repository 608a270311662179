/* tests/hooks/hip/stream_app.c: a HIP program whose device work runs
 * "later": the fake libamdhip64 completes work queued on a stream only
 * when the program says so (fake_hip_stream_enqueue / _complete).  It
 * checks, itself, what a correct allocator must do, and exits 1 with a
 * "FAIL:" line when something is wrong.  Run under the preload in cache
 * mode (test_hip.sh, scenarios stream_free and capture):
 *
 *   stream_app free    hipFreeAsync(p, s2) of a block of stream s1 is not
 *                      handed out on s1 while s2's work is queued, and is
 *                      once it completed; the poll leaves no error for
 *                      hipGetLastError; a free on the block's own stream
 *                      is reusable at once; when memory is short the
 *                      allocator waits for s2 instead of failing; hipFree
 *                      waits for the device as HIP's does
 *   stream_app capture during a global-mode capture nothing HIP forbids
 *                      is called (no event query, no free), a cached block
 *                      is still served, hipMallocAsync on the capturing
 *                      stream is HIP's (graph memory); during a relaxed
 *                      capture an out-of-memory hipMalloc frees no cached
 *                      segment
 */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>

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
#define OK(call) CHECK((call) == hipSuccess, "%s", #call)

static void load_controls(void)
{
    void *h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) {
        printf("FAIL: libamdhip64 is not loaded\n");
        exit(1);
    }
    enqueue = (void (*)(void *))dlsym(h, "fake_hip_stream_enqueue");
    complete = (void (*)(void *))dlsym(h, "fake_hip_stream_complete");
    pending = (long (*)(void *))dlsym(h, "fake_hip_stream_pending");
    violations = (long (*)(void))dlsym(h, "fake_hip_capture_violations");
    calls = (long (*)(const char *))dlsym(h, "fake_hip_calls");
    if (!enqueue || !complete || !pending || !violations || !calls) {
        printf("FAIL: not the fake libamdhip64\n");
        exit(1);
    }
}

static void app_free_on_other_stream(void)
{
    hipStream_t s1, s2;
    OK(hipStreamCreate(&s1));
    OK(hipStreamCreate(&s2));
    void *p = NULL, *q = NULL, *r = NULL, *t = NULL;
    OK(hipMallocAsync(&p, 4096, s1));
    enqueue(s2); /* a kernel on s2 reads p */
    OK(hipFreeAsync(p, s2));
    OK(hipMallocAsync(&q, 4096, s1));
    CHECK(q != p, "block %p handed out again on s1 while s2's work on it was queued", p);
    CHECK(hipGetLastError() == hipSuccess, "an error left for hipGetLastError by a served call");
    complete(s2);
    OK(hipMallocAsync(&r, 4096, s1));
    CHECK(r == p, "block %p not reused after s2's work completed (got %p)", p, r);
    /* Freed on its own stream: stream order protects it, reuse at once. */
    enqueue(s1);
    OK(hipFreeAsync(r, s1));
    OK(hipMallocAsync(&t, 4096, s1));
    CHECK(t == r, "a block freed on its own stream was not reused at once");
    CHECK(pending(s1) == 1, "a same-stream free waited for the stream");
    complete(s1);
    OK(hipFreeAsync(q, s1));
    OK(hipFreeAsync(t, s1));

    /* Memory short: the only memory is a block still used by s2. */
    void *big = NULL, *big2 = NULL;
    OK(hipMallocAsync(&big, 40u << 20, s1));
    enqueue(s2);
    OK(hipFreeAsync(big, s2));
    OK(hipMallocAsync(&big2, 40u << 20, s1));
    CHECK(pending(s2) == 0, "out of memory while s2 held a freed block: s2 not waited for");
    OK(hipFreeAsync(big2, s1));

    /* hipFree synchronizes the device, under tidemark too. */
    void *m = NULL;
    OK(hipMalloc(&m, 8192));
    enqueue(s2);
    OK(hipFree(m));
    CHECK(pending(s2) == 0, "hipFree of a cached block did not wait for the device");
    OK(hipStreamDestroy(s1));
    OK(hipStreamDestroy(s2));
}

static void app_capture(void)
{
    hipStream_t s1, s2;
    OK(hipStreamCreate(&s1));
    OK(hipStreamCreate(&s2));
    void *a = NULL, *c = NULL, *g = NULL, *h = NULL, *z = NULL;
    OK(hipMallocAsync(&a, 4096, s1));
    OK(hipMalloc(&c, 8192)); /* a block of stream 0, cached below */
    OK(hipFree(c));
    long frees = calls("hipFree");

    hipGraph_t graph = NULL;
    OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
    enqueue(s2);
    OK(hipFreeAsync(a, s2));          /* waits for s2: no event query now */
    void *c2 = NULL;
    OK(hipMalloc(&c2, 8192));         /* served from the cache */
    CHECK(c2 == c, "a cached block was not served during the capture");
    OK(hipMallocAsync(&g, 1u << 20, s1)); /* a graph memory node: HIP's */
    OK(hipFreeAsync(g, s1));
    OK(hipStreamEndCapture(s1, &graph));
    CHECK(graph != NULL, "the capture was invalidated");
    CHECK(violations() == 0, "%ld calls HIP forbids during a capture", violations());

    /* After the capture the deferred free waits for s2 as any other. */
    OK(hipMallocAsync(&z, 4096, s1));
    CHECK(z != a, "block freed on s2 during the capture reused while s2 ran");
    complete(s2);
    OK(hipFree(c2)); /* waits for the device: after the check above */

    /* Relaxed capture: out of memory, but no cached segment is freed. */
    OK(hipStreamBeginCapture(s1, hipStreamCaptureModeRelaxed));
    CHECK(hipMalloc(&h, (size_t)1 << 40) == hipErrorOutOfMemory,
          "an impossible hipMalloc during a capture did not fail as out of memory");
    OK(hipStreamEndCapture(s1, &graph));
    CHECK(calls("hipFree") == frees, "%ld segments freed during the captures",
          calls("hipFree") - frees);
    hipGetLastError();
    OK(hipFreeAsync(z, s1));
    OK(hipStreamDestroy(s1));
    OK(hipStreamDestroy(s2));
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    int n = 0;
    OK(hipGetDeviceCount(&n)); /* the library loaded */
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
