/* tests/hooks/cuda/local_app.c: loads local_ext.c's module (argv[1])
 * RTLD_LOCAL and runs its probe.  Links no CUDA library itself, so the
 * driver is only in the module's local scope. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("dlopen: %s\n", dlerror());
        return 2;
    }
    int (*probe)(void) = (int (*)(void))dlsym(h, "local_ext_probe");
    if (probe == NULL)
        return 2;
    int rc = probe();
    printf("%s\n", rc == 0 ? "ok" : "FAIL");
    return rc;
}
