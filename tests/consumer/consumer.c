/* tests/consumer/consumer.c: uses only the installed public header. */
#include <stdio.h>
#include <string.h>

#include <tidemark.h>

int main(int argc, char **argv)
{
    if (strcmp(tdm_version_string(), TDM_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", TDM_VERSION_STRING,
                tdm_version_string());
        return 1;
    }
    tdm_history_options o;
    tdm_history_options_init(&o);
    if (tdm_record_memory_history(&o) != TDM_OK)
        return 1;
    void *p = NULL;
    if (tdm_malloc(&p, 1 << 20, 0, 0) != TDM_OK || !p)
        return 1;
    if (tdm_free(p) != TDM_OK)
        return 1;
    if (argc > 1 && tdm_dump_snapshot(argv[1]) != TDM_OK)
        return 1;
    printf("consumer ok (tidemark %s)\n", tdm_version_string());
    return 0;
}
