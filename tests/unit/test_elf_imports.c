/* tests/unit/test_elf_imports.c: what a loaded object imports, read from
 * its mapped dynamic section (hooks/preload/elf_imports.c), as cache mode
 * reads it to find the objects that can make a CUDA IPC export: an
 * undefined entry of the dynamic symbol table is an import, a definition
 * is not, with a DT_GNU_HASH table (the program, a library) and a DT_HASH
 * one; the vDSO and every other loaded object are read without harm; and
 * nothing is taken from malloc (linked with --wrap=malloc). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "elf_imports.h"

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);
static long mallocs;
void *__wrap_malloc(size_t n)
{
    mallocs++;
    return __real_malloc(n);
}

/* The answer for the loaded object whose name ends with `suffix` ("" for
 * the program, the first one listed); -1 when no object matched. */
typedef struct query {
    const char *suffix;
    const char *const *names;
    size_t n;
    int index, answer;
} query;

static int ask(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    query *q = arg;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    size_t len = strlen(name), want = strlen(q->suffix);
    int match = want == 0 ? q->index == 0 : len >= want && strcmp(name + len - want, q->suffix) == 0;
    q->index++;
    if (!match)
        return 0;
    q->answer = tdm__elf_imports_any(info, q->names, q->n);
    return 1;
}

static int imports(const char *suffix, const char *name)
{
    const char *names[] = {"tdm_elf_test_no_such_symbol", name};
    query q = {.suffix = suffix, .names = names, .n = 2, .answer = -1};
    long before = mallocs;
    dl_iterate_phdr(ask, &q);
    assert_int_equal(mallocs, before);
    return q.answer;
}

/* The program imports what it calls from libc, not what it defines. */
static void program_imports_what_it_calls(void **state)
{
    (void)state;
    assert_int_equal(imports("", "dl_iterate_phdr"), 1);
    assert_int_equal(imports("", "strcmp"), 1);
    assert_int_equal(imports("", "__wrap_malloc"), 0); /* its own, exported (-rdynamic) */
    assert_int_equal(imports("", "tdm_elf_test_imported"), 0);
}

static void library(const char *path, const char *suffix)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_non_null(dlsym(h, "tdm_elf_test_defined"));
    assert_int_equal(imports(suffix, "tdm_elf_test_imported"), 1);
    assert_int_equal(imports(suffix, "tdm_elf_test_defined"), 0);
    assert_int_equal(imports(suffix, "dl_iterate_phdr"), 0);
    dlclose(h);
}

static void gnu_hash_library(void **state)
{
    (void)state;
    library(TDM_ELF_LIB_GNU, "/libtdm_elf_imports_gnu.so");
}

static void sysv_hash_library(void **state)
{
    (void)state;
    library(TDM_ELF_LIB_SYSV, "/libtdm_elf_imports_sysv.so");
}

/* Every loaded object (libc, the loader, the vDSO) reads without harm,
 * and none imports a name that no object has. */
static int ask_all(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    static const char *const none[] = {"tdm_elf_test_no_such_symbol"};
    int *seen = arg;
    assert_int_equal(tdm__elf_imports_any(info, none, 1), 0);
    (*seen)++;
    return 0;
}

static void every_loaded_object(void **state)
{
    (void)state;
    int seen = 0;
    dl_iterate_phdr(ask_all, &seen);
    assert_true(seen >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(program_imports_what_it_calls),
        cmocka_unit_test(gnu_hash_library),
        cmocka_unit_test(sysv_hash_library),
        cmocka_unit_test(every_loaded_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
