/* tests/unit/test_symbolize.c: return addresses to function, file, line
 * and module.
 *
 * Captured frames resolve to this test's own functions, to this file and
 * to the line of each call (computed with __LINE__ on the line of the
 * call), with both unwinders; code inlined into a function resolves to the
 * inlined function and its line; an address in a shared library resolves
 * to that library and its symbol, including a library loaded after the
 * symbolizer was opened; unknown addresses give "??"; a repeated address
 * gives back the very same strings (it was resolved once); debuginfod
 * servers are never contacted. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ftw.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "stack.h"
#include "symbolize.h"

#define NOINLINE __attribute__((noinline, noclone, visibility("default")))
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

/* Where a captured frame should resolve. */
typedef struct expect {
    const char *function;
    unsigned line;
} expect;

unsigned leaf_captures(uintptr_t *pcs, unsigned max, unsigned *line);
unsigned middle_calls_leaf(uintptr_t *pcs, unsigned max, expect *want);
unsigned outer_with_inlined(uintptr_t *pcs, unsigned max, unsigned *line);

/* Keep each call and its __LINE__ on one line: that is the line the
 * return address must map back to. */
NOINLINE unsigned leaf_captures(uintptr_t *pcs, unsigned max, unsigned *line)
{
    unsigned n = tdm__stack_capture(pcs, max, 0); *line = __LINE__;
    KEEP_FRAME();
    return n;
}

NOINLINE unsigned middle_calls_leaf(uintptr_t *pcs, unsigned max,
                                    expect *want)
{
    want[0].function = "leaf_captures";
    want[1].function = "middle_calls_leaf";
    unsigned n = leaf_captures(pcs, max, &want[0].line); want[1].line = __LINE__;
    KEEP_FRAME();
    return n;
}

static inline __attribute__((always_inline)) unsigned
inlined_helper(uintptr_t *pcs, unsigned max, unsigned *line)
{
    unsigned n = tdm__stack_capture(pcs, max, 0); *line = __LINE__;
    return n;
}

NOINLINE unsigned outer_with_inlined(uintptr_t *pcs, unsigned max,
                                     unsigned *line)
{
    unsigned n = inlined_helper(pcs, max, line);
    KEEP_FRAME();
    return n;
}

static int ends_with(const char *s, const char *tail)
{
    size_t ls = strlen(s), lt = strlen(tail);
    return ls >= lt && strcmp(s + ls - lt, tail) == 0;
}

static const char *self_path(void)
{
    static char path[4096];
    char *r = realpath("/proc/self/exe", path);
    assert_non_null(r);
    return path;
}

static tdm__unwinder modes[] = {TDM__UNWIND_FRAME_POINTER,
                                TDM__UNWIND_LIBUNWIND};

static void frames_resolve_to_our_functions_and_lines(void **state)
{
    (void)state;
    assert_int_equal(tdm__stack_init(1024, 65536), TDM_OK);
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    for (unsigned m = 0; m < 2; m++) {
        if (tdm__stack_set_unwinder(modes[m]) != TDM_OK)
            continue; /* no libunwind here */
        uintptr_t pcs[TDM_STACK_MAX_DEPTH];
        expect want[2];
        unsigned n = middle_calls_leaf(pcs, TDM_STACK_MAX_DEPTH, want);
        assert_true(n >= 3);
        for (unsigned i = 0; i < 2; i++) {
            tdm_symbol sym;
            tdm__symbolize(s, pcs[i], &sym);
            assert_string_equal(sym.function, want[i].function);
            assert_true(ends_with(sym.file, "tests/unit/test_symbolize.c"));
            assert_int_equal(sym.line, want[i].line);
            assert_string_equal(sym.module, self_path());
        }
        /* The third frame is this test (static, so only the symbol table
         * and DWARF know it). */
        tdm_symbol sym;
        tdm__symbolize(s, pcs[2], &sym);
        assert_string_equal(sym.function,
                            "frames_resolve_to_our_functions_and_lines");
        /* Every frame names a plain symbol: no "@@GLIBC_2.34" versions. */
        for (unsigned i = 0; i < n; i++) {
            tdm__symbolize(s, pcs[i], &sym);
            assert_null(strchr(sym.function, '@'));
            assert_true(sym.module[0] != '\0');
        }
    }
    assert_int_equal(tdm__stack_set_unwinder(TDM__UNWIND_AUTO), TDM_OK);
    tdm__symbolizer_close(s);
}

static void inlined_code_names_the_inlined_function(void **state)
{
    (void)state;
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    uintptr_t pcs[4];
    unsigned line = 0;
    assert_true(outer_with_inlined(pcs, 4, &line) >= 2);
    tdm_symbol sym;
    tdm__symbolize(s, pcs[0], &sym);
    assert_string_equal(sym.function, "inlined_helper");
    assert_int_equal(sym.line, line);
    assert_true(ends_with(sym.file, "tests/unit/test_symbolize.c"));
    /* The next frame is the caller of the function it was inlined into. */
    tdm__symbolize(s, pcs[1], &sym);
    assert_string_equal(sym.function,
                        "inlined_code_names_the_inlined_function");
    tdm__symbolizer_close(s);
}

static void repeated_pc_is_resolved_once(void **state)
{
    (void)state;
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    uintptr_t pcs[8];
    expect want[2];
    assert_true(middle_calls_leaf(pcs, 8, want) >= 2);
    tdm_symbol a, b, c;
    tdm__symbolize(s, pcs[0], &a);
    tdm__symbolize(s, pcs[1], &c);
    tdm__symbolize(s, pcs[0], &b);
    /* The cached entry: the same strings, not equal copies. */
    assert_ptr_equal(a.function, b.function);
    assert_ptr_equal(a.file, b.file);
    assert_int_equal(a.line, b.line);
    /* File and module names are stored once for both frames. */
    assert_ptr_equal(a.file, c.file);
    assert_ptr_equal(a.module, c.module);
    tdm__symbolizer_close(s);
}

static void library_addresses_resolve(void **state)
{
    (void)state;
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    /* A pc just after the entry of getpid: pc - 1 is its first byte. */
    Dl_info info;
    void *fn = dlsym(RTLD_DEFAULT, "getpid");
    assert_non_null(fn);
    assert_true(dladdr(fn, &info) != 0);
    tdm_symbol sym;
    tdm__symbolize(s, (uintptr_t)fn + 1, &sym);
    assert_non_null(strstr(sym.function, "getpid"));
    assert_non_null(strstr(sym.module, "libc.so"));
    tdm__symbolizer_close(s);
}

static void library_loaded_after_open_resolves(void **state)
{
    (void)state;
    /* The first of these that this process has not loaded yet. */
    static const struct {
        const char *soname, *symbol;
    } candidates[] = {
        {"libexpat.so.1", "XML_ExpatVersion"},
        {"libuuid.so.1", "uuid_unparse_lower"},
        {"libzstd.so.1", "ZSTD_versionString"},
        {"libffi.so.8", "ffi_prep_cif_var"},
    };
    const char *soname = NULL, *symbol = NULL;
    for (unsigned i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        void *loaded = dlopen(candidates[i].soname, RTLD_NOW | RTLD_NOLOAD);
        if (loaded) {
            dlclose(loaded);
            continue;
        }
        soname = candidates[i].soname;
        symbol = candidates[i].symbol;
        break;
    }
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    /* A miss before the library is there must not use up the re-read. */
    tdm_symbol sym;
    tdm__symbolize(s, 0x20, &sym);
    assert_string_equal(sym.function, "??");
    void *h = soname ? dlopen(soname, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        tdm__symbolizer_close(s);
        skip();
    }
    void *fn = dlsym(h, symbol);
    assert_non_null(fn);
    tdm__symbolize(s, (uintptr_t)fn + 1, &sym);
    assert_string_equal(sym.function, symbol);
    char stem[32];
    snprintf(stem, sizeof stem, "%.*s", (int)(strchr(soname, '.') - soname),
             soname);
    assert_non_null(strstr(sym.module, stem));
    tdm__symbolizer_close(s);
    dlclose(h);
}

/* Successive dumps share one symbolizer; an unloaded object makes the
 * next one fresh; references keep a replaced one alive for their strings;
 * a forked child never waits for the parent's lock nor uses its
 * symbolizer. */
static void dumps_share_a_symbolizer(void **state)
{
    (void)state;
    tdm__symbolizer_forget_shared();
    tdm__symbolizer_ref *a = tdm__symbolizer_acquire();
    assert_non_null(a);
    tdm_symbol sym;
    tdm__symbolize(tdm__symbolizer_of(a), (uintptr_t)&dumps_share_a_symbolizer + 1, &sym);
    const char *name = sym.function;
    assert_string_equal(name, "dumps_share_a_symbolizer");
    tdm__symbolizer_unlock();
    tdm__symbolizer_ref *b = tdm__symbolizer_acquire();
    assert_ptr_equal(b, a);
    tdm__symbolizer_unlock();
    tdm__symbolizer_release(b);

    /* A forked child while this thread holds the lock: the child gets a
     * symbolizer of its own at once. */
    tdm__symbolizer_ref *held = tdm__symbolizer_acquire();
    assert_ptr_equal(held, a);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20); /* a deadlock fails the test instead of hanging it */
        tdm__symbolizer_ref *c = tdm__symbolizer_acquire();
        int ok = c != NULL && c != held;
        if (c != NULL) {
            tdm__symbolizer_unlock();
            tdm__symbolizer_release(c);
        }
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tdm__symbolizer_unlock();
    tdm__symbolizer_release(held);

#ifdef TDM_DEBUGLINK_LIB
    void *h = dlopen(TDM_DEBUGLINK_LIB, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_int_equal(dlclose(h), 0);
    tdm__symbolizer_ref *c = tdm__symbolizer_acquire();
    assert_non_null(c);
    assert_ptr_not_equal(tdm__symbolizer_of(c), tdm__symbolizer_of(a));
    tdm__symbolizer_unlock();
    /* The replaced one still serves the reference kept on it. */
    assert_string_equal(name, "dumps_share_a_symbolizer");
    tdm__symbolizer_release(c);
#endif
    tdm__symbolizer_release(a);
    tdm__symbolizer_forget_shared();
}

/* Named like glibc's thread entry point: the symbolizer gives the C
 * runtime's entry frames their function but no file:line (it would mean
 * inflating glibc's debug file on the first dump). */
static __attribute__((noinline)) uintptr_t start_thread(void)
{
    __asm__ __volatile__("" ::: "memory");
    return (uintptr_t)__builtin_return_address(0);
}

static __attribute__((noinline)) uintptr_t ordinary_function(void)
{
    __asm__ __volatile__("" ::: "memory");
    return (uintptr_t)__builtin_return_address(0);
}

static void runtime_entry_frames_have_no_line(void **state)
{
    (void)state;
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    tdm_symbol sym;
    tdm__symbolize(s, (uintptr_t)&start_thread + 1, &sym);
    assert_string_equal(sym.function, "start_thread");
    assert_string_equal(sym.file, "");
    assert_int_equal(sym.line, 0);
    /* The same kind of function under another name keeps its line. */
    tdm__symbolize(s, (uintptr_t)&ordinary_function + 1, &sym);
    assert_string_equal(sym.function, "ordinary_function");
    assert_non_null(strstr(sym.file, "test_symbolize.c"));
    assert_true(sym.line > 0);
    assert_true(start_thread() != 0 && ordinary_function() != 0);
    tdm__symbolizer_close(s);
}

static void unknown_addresses(void **state)
{
    (void)state;
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    tdm_symbol sym;
    const uintptr_t bad[] = {0, 1, 0x10, (uintptr_t)-1};
    for (unsigned i = 0; i < 4; i++) {
        tdm__symbolize(s, bad[i], &sym);
        assert_string_equal(sym.function, "??");
        assert_string_equal(sym.file, "");
        assert_int_equal(sym.line, 0);
        assert_string_equal(sym.module, "");
    }
    /* A NULL symbolizer (one that failed to open) answers "unknown". */
    tdm__symbolize(NULL, (uintptr_t)&unknown_addresses, &sym);
    assert_string_equal(sym.function, "??");
    tdm__symbolizer_close(s);
    tdm__symbolizer_close(NULL);
    assert_int_equal(tdm__symbolizer_open(NULL), TDM_INVALID_ARGUMENT);
}

/* The child half of debuginfod_is_never_asked, run in a fresh process
 * (libdw reads DEBUGINFOD_URLS when it is loaded): symbolize an address
 * in a library without local debug information, as a dump would.
 * cmocka's library has none on a normal machine. */
static int debuginfod_child(void)
{
    void *fn = dlsym(RTLD_DEFAULT, "_cmocka_run_group_tests");
    tdm_symbolizer *s;
    if (!fn || tdm__symbolizer_open(&s) != TDM_OK)
        return 2;
    tdm_symbol sym;
    tdm__symbolize(s, (uintptr_t)fn + 1, &sym);
    int ok = strcmp(sym.function, "_cmocka_run_group_tests") == 0;
    tdm__symbolizer_close(s);
    return ok ? 0 : 3;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* With DEBUGINFOD_URLS set, a dump must not go to the network for debug
 * files: point it at a socket listening here and check nobody came. */
/* Debug information in a separate file named by .gnu_debuglink, next to
 * the library (the build splits it off). */
static void debuglink_file_gives_lines(void **state)
{
    (void)state;
#ifdef TDM_DEBUGLINK_LIB
    void *h = dlopen(TDM_DEBUGLINK_LIB, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    void *fn = dlsym(h, "debuglink_probe");
    assert_non_null(fn);
    tdm_symbolizer *s;
    assert_int_equal(tdm__symbolizer_open(&s), TDM_OK);
    tdm_symbol sym;
    tdm__symbolize(s, (uintptr_t)fn + 1, &sym);
    assert_string_equal(sym.function, "debuglink_probe");
    assert_true(ends_with(sym.file, "debuglink_lib.c"));
    assert_true(sym.line >= 6 && sym.line <= 9);
    tdm__symbolizer_close(s);
    dlclose(h);
#else
    skip(); /* no objcopy at build time */
#endif
}

static void debuginfod_is_never_asked(void **state)
{
    (void)state;
    int lsock = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(lsock >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    assert_int_equal(bind(lsock, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(lsock, 16), 0);
    assert_int_equal(getsockname(lsock, (struct sockaddr *)&addr, &len), 0);

    char cache[] = "/tmp/tdm-debuginfod-XXXXXX";
    assert_non_null(mkdtemp(cache));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%u",
                 ntohs(addr.sin_port));
        setenv("DEBUGINFOD_URLS", url, 1);
        setenv("DEBUGINFOD_TIMEOUT", "2", 1);
        /* Its cache must not land in the user's home if this fails. */
        setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
        execl("/proc/self/exe", "test_symbolize", "--debuginfod-child",
              (char *)NULL);
        _exit(127);
    }
    int status = 0;
    pid_t waited = waitpid(pid, &status, 0);
    int conn = accept(lsock, NULL, NULL);
    if (conn >= 0)
        close(conn);
    close(lsock);
    nftw(cache, remove_entry, 8, FTW_DEPTH | FTW_PHYS);

    assert_int_equal(waited, pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(conn < 0); /* nobody connected */
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--debuginfod-child") == 0)
        return debuginfod_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_resolve_to_our_functions_and_lines),
        cmocka_unit_test(inlined_code_names_the_inlined_function),
        cmocka_unit_test(repeated_pc_is_resolved_once),
        cmocka_unit_test(library_addresses_resolve),
        cmocka_unit_test(library_loaded_after_open_resolves),
        cmocka_unit_test(dumps_share_a_symbolizer),
        cmocka_unit_test(runtime_entry_frames_have_no_line),
        cmocka_unit_test(unknown_addresses),
        cmocka_unit_test(debuglink_file_gives_lines),
        cmocka_unit_test(debuginfod_is_never_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
