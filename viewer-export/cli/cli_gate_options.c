/* viewer-export/cli/cli_gate_options.c: the gates' options, one table for
 * the two commands that take them (`tidemark gate`, `tidemark run`): names,
 * values and help; their codes are gate.h's TDM_GATE_OPT_*, which
 * tdm__gate_option applies.  No state, no locks. */
#include "cli.h"
#include "gate.h"

static const tdm_cli_option rows[] = {
    {.text = "gates (each checked on every device of every file; equal to a limit passes):"},
    {.name = "max-peak", .code = TDM_GATE_OPT_MAX_PEAK, .has_arg = required_argument,
     .metavar = "SIZE", .help = "highest allocated bytes (e.g. 12GiB, 512M)"},
    {.name = "max-reserved", .code = TDM_GATE_OPT_MAX_RESERVED, .has_arg = required_argument,
     .metavar = "SIZE", .help = "highest reserved bytes (segments held from the device)"},
    {.name = "max-leak", .code = TDM_GATE_OPT_MAX_LEAK, .has_arg = required_argument,
     .metavar = "SIZE", .help = "bytes still allocated when the snapshot was taken"},
    /* The two go together: one line says what they do. */
    {.name = "baseline", .code = TDM_GATE_OPT_BASELINE, .has_arg = required_argument,
     .metavar = "FILE", .label = "--baseline FILE --max-growth PCT",
     .help = "peak at most PCT percent above FILE's peak on the\n"
             "same device"},
    {.name = "max-growth", .code = TDM_GATE_OPT_MAX_GROWTH, .has_arg = required_argument,
     .metavar = "PCT"},
    {.name = "device", .code = TDM_GATE_OPT_DEVICE, .has_arg = required_argument,
     .metavar = "N",
     .help = "check only the device with ordinal N (a file without\n"
             "it is an error, exit 2)"},
    {.name = "allow-empty", .code = TDM_GATE_OPT_ALLOW_EMPTY,
     .help = "pass when nothing was measured (every file records\n"
             "no device memory used); without it, exit 5"},
    {.name = "allow-oom", .code = TDM_GATE_OPT_ALLOW_OOM,
     .help = "pass a device that ran out of memory; without it an\n"
             "out-of-memory event fails the run whatever its peak\n"
             "(gate no-oom, which comes with every other gate)"},
    {.text = "  (a SIZE without a unit is bytes; one under 1 MiB, other than 0, is said\n"
             "  back with a warning: write 12GiB, or 12B for bytes)\n"
             "reporting:"},
    {.name = "top", .code = TDM_GATE_OPT_TOP, .has_arg = required_argument, .metavar = "N",
     .help = "allocation sites shown per failure (default 5)"},
    {.name = "frames", .code = TDM_GATE_OPT_FRAMES, .has_arg = required_argument,
     .metavar = "N", .help = "frames shown per site (default 3)"},
    {.name = "junit", .code = TDM_GATE_OPT_JUNIT, .has_arg = required_argument,
     .metavar = "FILE", .help = "write a JUnit XML report (a testcase per gate per file)"},
    {.name = "github", .code = TDM_GATE_OPT_GITHUB,
     .help = "print GitHub Actions annotations (::error ...) for\n"
             "failures"},
    {0},
};
const tdm_cli_options tdm__cli_gate_options = {rows, 25};
