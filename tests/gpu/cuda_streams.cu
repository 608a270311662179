// tests/gpu/cuda_streams.cu: the stream-ordered corners of a CUDA program,
// for tests/gpu/run.sh, run on a real GPU under libtidemark_preload.so.
// Built with nvcc's defaults and with --default-stream per-thread.
//
//   default stream  cudaMallocAsync / cudaFreeAsync on stream 0: a snapshot
//                   must show stream 0 (or 1, the legacy handle) for the
//                   legacy build and 2 (CU_STREAM_PER_THREAD) for the
//                   per-thread build, where stream 0 means the thread's own.
//   cross stream    a buffer allocated on stream s1 and freed with
//                   cudaFreeAsync on stream s2 while a slow kernel on s2
//                   still reads it; then an allocation of the same size on
//                   s1 is filled at once.  CUDA's rule: the memory is free
//                   only when s2 reaches the free, so the new allocation
//                   must not be the same memory before then.  An allocator
//                   that takes the free as done on s1 hands the buffer out
//                   again and the slow kernel reads the new contents: the
//                   program then reports "result WRONG".
//   graph           cudaMallocAsync / kernels / cudaFreeAsync captured into
//                   a CUDA graph (memory nodes the graph owns) and launched
//                   twice: under mode=cache those calls must reach the
//                   driver, not tidemark's cache.
// Each region uses a size no other allocation has, printed for run.sh to
// find its events; "result ok" when every kernel result is right.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "cuda_check.h"

static const size_t default_bytes = (3u << 20) + 4096;  // 3 MiB + 4 KiB
static const size_t cross_bytes = (16u << 20) + 8192;   // 16 MiB + 8 KiB
static const size_t graph_bytes = (5u << 20) + 12288;   // 5 MiB + 12 KiB

__global__ void fill(float *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

__global__ void add_into(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

// Waits about `cycles` clock ticks, then copies src into dst: the read
// comes long after the host has gone on to free src and allocate again.
__global__ void slow_copy(float *dst, const float *src, size_t n, long long cycles)
{
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static int all_equal(const float *dev, size_t n, float want)
{
    float *h = (float *)std::malloc(n * sizeof(float));
    CHECK(cudaMemcpy(h, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= h[i] == want;
    std::free(h);
    return ok;
}

static int app_default_stream(void)
{
    float *d = nullptr;
    size_t n = default_bytes / sizeof(float);
    CHECK(cudaMallocAsync(&d, default_bytes, 0));
    fill<<<64, 256, 0, 0>>>(d, n, 7.0f);
    int ok = all_equal(d, n, 7.0f);
    CHECK(cudaFreeAsync(d, 0));
    CHECK(cudaStreamSynchronize(0));
    return ok;
}

static int app_cross_stream(cudaStream_t s1, cudaStream_t s2)
{
    size_t n = cross_bytes / sizeof(float);
    float *a = nullptr, *b = nullptr, *out = nullptr;
    cudaEvent_t filled;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    CHECK(cudaMalloc(&out, cross_bytes + 4096)); // not cross_bytes: its own size
    CHECK(cudaMallocAsync(&a, cross_bytes, s1));
    fill<<<256, 256, 0, s1>>>(a, n, 1.0f);
    CHECK(cudaEventRecord(filled, s1));
    CHECK(cudaStreamWaitEvent(s2, filled, 0));
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    // About 200 ms: far longer than the host needs to get to the fill below.
    slow_copy<<<256, 256, 0, s2>>>(out, a, n, (long long)clock_khz * 200);
    CHECK(cudaFreeAsync(a, s2));
    CHECK(cudaMallocAsync(&b, cross_bytes, s1));
    fill<<<256, 256, 0, s1>>>(b, n, 99.0f);
    CHECK(cudaDeviceSynchronize());
    std::printf("cross-stream reuse %s\n", a == b ? "same address" : "other address");
    int ok = all_equal(out, n, 1.0f) && all_equal(b, n, 99.0f);
    CHECK(cudaFreeAsync(b, s1));
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaFree(out));
    CHECK(cudaEventDestroy(filled));
    return ok;
}

static int app_graph(cudaStream_t s)
{
    size_t n = graph_bytes / sizeof(float);
    float *acc = nullptr, *g = nullptr;
    CHECK(cudaMalloc(&acc, n * sizeof(float) + 8192));
    CHECK(cudaMemset(acc, 0, n * sizeof(float)));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(&g, graph_bytes, s));
    fill<<<128, 256, 0, s>>>(g, n, 3.0f);
    add_into<<<128, 256, 0, s>>>(acc, g, n);
    CHECK(cudaFreeAsync(g, s));
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    int ok = all_equal(acc, n, 6.0f);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(acc));
    return ok;
}

int main()
{
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int ok_default = app_default_stream();
    int ok_cross = app_cross_stream(s1, s2);
    int ok_graph = app_graph(s1);
    CHECK(cudaStreamDestroy(s1));
    CHECK(cudaStreamDestroy(s2));
    std::printf("default-stream bytes %zu %s\n", default_bytes, ok_default ? "ok" : "WRONG");
    std::printf("cross-stream bytes %zu %s\n", cross_bytes, ok_cross ? "ok" : "WRONG");
    std::printf("graph bytes %zu %s\n", graph_bytes, ok_graph ? "ok" : "WRONG");
    int ok = ok_default && ok_cross && ok_graph;
    std::printf("result %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
