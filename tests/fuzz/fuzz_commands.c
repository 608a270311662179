/* tests/fuzz/fuzz_commands.c: the commands that read a snapshot, on any
 * .tdm bytes made past the checksum (tdm_crc_fix.h): summary (its text,
 * --verbose, --native-frames), categories (the table and --explain),
 * gate, diff (the file against itself and against a fixed sample), and
 * export's JSON, Perfetto, flamegraph, CSV, PyTorch pickle and view data.
 * The fuzzers of the readers stop where a snapshot is returned; the
 * commands then add, subtract and index with what it holds (issue 39:
 * an event size of 2^63-1 with a valid CRC overflowed view_data.c,
 * cmd_categories.c and cmd_diff.c).
 *
 * Each input is written to one file (the commands take paths), the
 * commands run as the tool runs them, their stdout goes to /dev/null
 * and their exit status is not judged: only a crash, a sanitizer report,
 * a leak or a hang is a finding. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tdm_crc_fix.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char input_path[64] = "/tmp/tdm-fuzz-commands-XXXXXX";
static char out_dir[64] = "/tmp/tdm-fuzz-out-XXXXXX";
static char sample_path[4096];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int fd = mkstemp(input_path);
    if (fd < 0 || !mkdtemp(out_dir))
        abort();
    close(fd);
    /* The other side of a diff: a real snapshot, when the tree is here. */
    const char *src = getenv("TDM_SOURCE_DIR");
    snprintf(sample_path, sizeof sample_path, "%s/tests/data/sample-v1.3.tdm",
             src ? src : ".");
    if (access(sample_path, R_OK) != 0)
        snprintf(sample_path, sizeof sample_path, "%s", input_path);
    int null = open("/dev/null", O_WRONLY);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0)
        abort();
    close(null);
    return 0;
}

typedef int (*command_fn)(int argc, char **argv);

static void run(command_fn fn, int argc, const char *const *args)
{
    char *argv[16];
    for (int i = 0; i < argc && i < 15; i++)
        argv[i] = (char *)args[i];
    argv[argc] = NULL;
    (void)fn(argc, argv);
    fflush(stdout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    uint8_t *fixed = tdm_fuzz_fix_crcs(data, size, &n);
    if (!fixed)
        return 0;
    FILE *f = fopen(input_path, "wb");
    if (!f || fwrite(fixed, 1, n, f) != n || fclose(f) != 0)
        abort();
    free(fixed);
    const char *in = input_path;
    char out[128];

    run(tdm__cli_summary, 2, (const char *const[]){"summary", in});
    run(tdm__cli_summary, 4, (const char *const[]){"summary", "--verbose", "--native-frames", in});
    run(tdm__cli_categories, 2, (const char *const[]){"categories", in});
    run(tdm__cli_categories, 4, (const char *const[]){"categories", "--explain", "a", in});
    run(tdm__cli_gate, 6, (const char *const[]){"gate", "--max-peak", "1MiB", "--max-leak", "1",
                                                 in});
    run(tdm__cli_diff, 3, (const char *const[]){"diff", in, in});
    run(tdm__cli_diff, 3, (const char *const[]){"diff", sample_path, in});
    static const char *const formats[] = {"json", "perfetto", "flamegraph", "csv", "pytorch"};
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
        snprintf(out, sizeof out, "%s/out.%s", out_dir, formats[k]);
        run(tdm__cli_export, 7,
            (const char *const[]){"export", "--format", formats[k], "--force", "-o", out, in});
    }
    snprintf(out, sizeof out, "%s/view.html", out_dir);
    run(tdm__cli_view, 5, (const char *const[]){"view", "--force", "-o", out, in});
    return 0;
}
