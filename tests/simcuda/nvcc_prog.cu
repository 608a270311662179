// tests/simcuda/nvcc_prog.cu: a plain CUDA program (no PyTorch) for
// test_nvcc.sh, built by nvcc with -cudart shared and run on the simulated
// platform.  Weights kept for the run, per step activations on a stream,
// a kernel launched over them (accepted, not run), managed and pinned
// memory once; copies are real, so what goes in comes back.  Prints the
// peak of device bytes it held at once ("peak N") and "ok".
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (x);                                                      \
        if (e_ != cudaSuccess) {                                                   \
            std::printf("%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

__global__ void scale(float *p, size_t n, float v)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= v;
}

int main()
{
    const size_t MiB = 1 << 20;
    float *w, *m;
    void *pinned;
    cudaStream_t s;
    CHECK(cudaMalloc(&w, 64 * MiB));
    CHECK(cudaMallocManaged(&m, 1 * MiB));
    CHECK(cudaMallocHost(&pinned, 4 * MiB));
    CHECK(cudaStreamCreate(&s));
    size_t peak = 0;
    for (int step = 0; step < 3; step++) {
        float *a, *b;
        CHECK(cudaMalloc(&a, 64 * MiB));
        CHECK(cudaMalloc(&b, 32 * MiB));
        size_t live = 64 * MiB + 1 * MiB + 64 * MiB + 32 * MiB;
        peak = live > peak ? live : peak;
        std::memset(pinned, step + 1, 4 * MiB);
        CHECK(cudaMemcpyAsync(a, pinned, 4 * MiB, cudaMemcpyHostToDevice, s));
        scale<<<(16 * MiB + 255) / 256, 256, 0, s>>>(a, 16 * MiB, 2.0f);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(b, a, 4 * MiB, cudaMemcpyDeviceToDevice, s));
        std::memset(pinned, 0, 4 * MiB);
        CHECK(cudaMemcpyAsync(pinned, b, 4 * MiB, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        if (((unsigned char *)pinned)[4 * MiB - 1] != step + 1) {
            std::printf("copy came back wrong\n");
            return 1;
        }
        CHECK(cudaFree(b));
        CHECK(cudaFree(a));
    }
    m[0] = 1.0f;  // managed memory: the host touches it
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(m));
    CHECK(cudaFree(w));
    std::printf("peak %zu\nok\n", peak);
    return 0;
}
