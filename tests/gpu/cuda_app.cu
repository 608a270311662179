// tests/gpu/cuda_app.cu: an ordinary CUDA program for tests/gpu/run.sh, run
// on a real GPU under libtidemark_preload.so.  Built twice by run.sh: with
// nvcc's defaults (libcudart_static.a linked in: tidemark sees it only
// through its dlsym / cuGetProcAddress hooks) and with -cudart shared.
//
// It keeps weights for the whole run and, per step, makes activations on
// a stream, runs a kernel over them, and frees them; it also takes pinned
// and managed memory once.  A kernel writes every buffer and the host
// checks the result, so memory served by tidemark's cache (mode=cache) is
// proven usable by kernels.  It prints the peak of device bytes it had
// live at once (what a snapshot must show) and "result ok".
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "cuda_check.h"

__global__ void fill(float *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (float)(i % 7);
}

__global__ void add_into(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

static float *app_alloc_weights(size_t n)
{
    float *w = nullptr;
    CHECK(cudaMalloc(&w, n * sizeof(float)));
    fill<<<256, 256>>>(w, n, 1.0f);
    return w;
}

static void app_step(float *w, size_t n, cudaStream_t s, int step)
{
    float *act = nullptr, *tmp = nullptr;
    CHECK(cudaMallocAsync(&act, n * sizeof(float), s));
    CHECK(cudaMalloc(&tmp, n / 2 * sizeof(float)));
    fill<<<256, 256, 0, s>>>(act, n, (float)step);
    fill<<<256, 256, 0, s>>>(tmp, n / 2, 0.0f);
    add_into<<<256, 256, 0, s>>>(w, act, n);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(tmp));
    CHECK(cudaFreeAsync(act, s));
}

int main()
{
    const size_t n = (size_t)16 << 20; // floats: 64 MiB of weights
    const int steps = 5;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    float *w = app_alloc_weights(n);
    float *pinned = nullptr, *managed = nullptr;
    CHECK(cudaMallocHost(&pinned, 4096));
    CHECK(cudaMallocManaged(&managed, 1 << 20));
    for (int i = 0; i < steps; i++)
        app_step(w, n, s, i);
    CHECK(cudaDeviceSynchronize());
    float h[7];
    CHECK(cudaMemcpy(h, w, sizeof h, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (int i = 0; i < 7; i++) {
        // 1 + i%7 once, then step + i%7 for each step.
        float want = 1.0f + (float)i + (float)(steps * (steps - 1) / 2) + (float)(steps * i);
        ok &= h[i] == want;
    }
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(managed));
    CHECK(cudaFree(w));
    CHECK(cudaStreamDestroy(s));
    // weights + activations + temporaries, plus the managed MiB.
    unsigned long long peak = n * sizeof(float) * 2 + n / 2 * sizeof(float) + (1 << 20);
    std::printf("expected peak device bytes %llu\n", peak);
    std::printf("result %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
