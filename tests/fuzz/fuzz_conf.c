/* tests/fuzz/fuzz_conf.c: the TIDEMARK_CONF parser (hooks/config.c), the
 * text every process reads from its environment at start. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
