/* tests/hooks/cuda/local_ext.c: an extension module linked to the fake
 * libcuda.so.1, loaded RTLD_LOCAL by local_app.c, so the driver is in
 * this object's local scope only (a JAX or CuPy extension, a ctypes.CDLL).
 * It looks the driver's resolver up as a library may,
 * dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"), which searches the caller's
 * scopes, and allocates through what the resolver returns.  Under the
 * preload the lookup must still find a resolver and the allocation must
 * be booked. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

__attribute__((visibility("default"))) int local_ext_probe(void);
int local_ext_probe(void)
{
    gpa_fn gpa = (gpa_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    printf("dlsym(RTLD_DEFAULT, cuGetProcAddress_v2) -> %s\n", gpa ? "found" : "NULL");
    if (gpa == NULL)
        return 1;
    printf("cuInit -> %d\n", (int)cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 1;
    void *alloc = NULL, *release = NULL;
    CUdriverProcAddressQueryResult q;
    printf("cuGetProcAddress cuMemAlloc 3020 -> %d\n", (int)gpa("cuMemAlloc", &alloc, 3020, 0, &q));
    printf("cuGetProcAddress cuMemFree 3020 -> %d\n", (int)gpa("cuMemFree", &release, 3020, 0, &q));
    if (alloc == NULL || release == NULL)
        return 1;
    CUdeviceptr p = 0;
    printf("cuMemAlloc 12345 -> %d\n", (int)((CUresult(*)(CUdeviceptr *, size_t))alloc)(&p, 12345));
    printf("cuMemFree -> %d\n", (int)((CUresult(*)(CUdeviceptr))release)(p));
    return 0;
}
