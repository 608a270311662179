/* tests/fuzz/fuzz_conf.c: the TIDEMARK_CONF parser (runtime/config.c), the
 * text every process reads from its environment at start. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* `category_rules=PATH` reads the file it names (at most 1 MiB): an input
 * naming /dev/stdin must find it empty, not wait on a terminal. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0 && fd != STDIN_FILENO) {
        dup2(fd, STDIN_FILENO);
        close(fd);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The environment gives a C string: the bytes up to the first NUL. */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    tdm__config cfg;
    tdm__config_defaults(&cfg);
    char err[TDM__CONF_ERR_MAX];
    tdm__config_parse(text, &cfg, err, sizeof err);
    free(text);
    return 0;
}
