/* tests/hooks/hip/hip_local.c: hip_local EXT.so SCENARIO loads a HIP
 * extension module (hip_ext.c) with dlopen(RTLD_NOW | RTLD_LOCAL), the
 * default of Python's extension import and of ctypes.CDLL, and runs one of
 * its scenarios.  The program itself links no HIP library: the only
 * libamdhip64 in the process is in the module's local scope.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hip_local EXT.so SCENARIO\n");
        return 2;
    }
    void *ext = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (ext == NULL) {
        fprintf(stderr, "hip_local: %s\n", dlerror());
        return 2;
    }
    int (*run)(const char *) = (int (*)(const char *))dlsym(ext, "hip_ext_run");
    if (run == NULL) {
        fprintf(stderr, "hip_local: no hip_ext_run\n");
        return 2;
    }
    return run(argv[2]);
}
