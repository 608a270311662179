/* tests/unit/debuglink_lib.c: a library whose debug information lives in
 * a separate file named by its .gnu_debuglink section (the build splits it
 * off with objcopy), for test_symbolize. */
int debuglink_probe(int x);

__attribute__((visibility("default"))) int debuglink_probe(int x)
{
    return x * 3 + 1;
}
