/* tests/unit/elf_imports_lib.c: a library that imports one symbol no object
 * defines (weak, so it loads all the same) and defines one, built with
 * each hash table the linker can write (DT_GNU_HASH, DT_HASH) for
 * test_elf_imports. */
__attribute__((weak)) int tdm_elf_test_imported(void);

__attribute__((visibility("default"))) int tdm_elf_test_defined(void);
int tdm_elf_test_defined(void)
{
    return tdm_elf_test_imported ? tdm_elf_test_imported() : 7;
}
