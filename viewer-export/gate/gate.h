/* viewer-export/gate/gate.h: memory gates for CI, shared by `tidemark gate`
 * (cli/cmd_gate.c) and `tidemark run` (cli/cmd_run.c).
 *
 * gate/ holds what CI checks: gates and baselines, their text report,
 * JUnit XML and GitHub annotations (junit.c).  It may include model/
 * and format/'s reader, never import/, export/, view/ or cli/.
 *
 * A gate is a limit on one figure of a snapshot, checked on every device
 * (or the one --device names) of every file:
 *   max-peak      the highest allocated bytes of the history (allocator
 *                 stats when there is no history);
 *   max-reserved  the highest reserved (segment) bytes;
 *   max-leak      the bytes still allocated when the snapshot was taken;
 *   max-growth    the peak's growth over the baseline file's peak on the
 *                 same device ordinal, in percent;
 *   no-oom        the device ran out of memory: asked for by no option,
 *                 it comes with any of the others unless --allow-oom
 *                 (a peak is low *because* the allocation failed), and
 *                 gives a result only where an out-of-memory event (or,
 *                 without history, an allocator OOM count) is.
 * A figure above its limit fails the gate; equal passes.
 *
 * Nothing measured is no pass.  A file that records no device memory used
 * (no allocation, no segment, no allocator figure above zero: the program
 * never touched a device) gives SKIP results, and so does a file with no
 * device; when every result is a SKIP the verdict is "nothing measured",
 * exit TDM_EXIT_NOTHING_MEASURED, unless --allow-empty.  A --device N
 * that a file lacks is an ERROR (bad input), said the way input.h says it.
 *
 * Results are kept per (file, gate, device); the renderers group them:
 * the text report (gate_text.c: when something failed, the verdict first:
 * the first failure in full, in at most about 30 lines: gate, figure,
 * limit, excess, file and device, when, top sites with short stacks; then
 * one line per other failure or error; else one line per result), JUnit
 * XML (junit.c: one testcase per gate per file) and GitHub Actions
 * annotation lines.  No state, no locks.
 */
#ifndef TDM_VIEWER_GATE_H
#define TDM_VIEWER_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidemark.h"
#include "snap_model.h"
#include "model.h"
#include "input.h"
#include "sites.h"

/* Exit code of a gate that measured nothing (every file empty, or no
 * snapshot for `tidemark run`), next to input.h's TDM_EXIT_* codes. */
enum { TDM_EXIT_NOTHING_MEASURED = 5 };

/* The worse of two gate-command exit codes: tool error (4) over a failed
 * gate (3) over bad input (2) over nothing measured (5) over success. */
static inline int tdm__gate_exit_worse(int a, int b)
{
    int ra = a == TDM_EXIT_NOTHING_MEASURED ? 1 : a ? a + 1 : 0;
    int rb = b == TDM_EXIT_NOTHING_MEASURED ? 1 : b ? b + 1 : 0;
    return ra >= rb ? a : b;
}

/* ---- options ------------------------------------------------------------ */

typedef enum tdm_gate_kind {
    TDM_GATE_MAX_PEAK = 0,
    TDM_GATE_MAX_RESERVED,
    TDM_GATE_MAX_LEAK,
    TDM_GATE_MAX_GROWTH,
    TDM_GATE_NO_OOM,
    TDM_GATE_KIND_COUNT_
} tdm_gate_kind;

/* "max-peak", "max-reserved", "max-leak", "max-growth", "no-oom". */
const char *tdm__gate_kind_name(tdm_gate_kind kind);

typedef struct tdm_gate_options {
    unsigned enabled;          /* bit (1u << tdm_gate_kind) per gate asked for */
    uint64_t max_peak;         /* bytes */
    uint64_t max_reserved;     /* bytes */
    uint64_t max_leak;         /* bytes */
    double max_growth;         /* percent over the baseline's peak */
    const char *baseline;      /* path of the baseline file, or NULL */
    int device;                /* only this ordinal; -1 = every device */
    unsigned top;              /* sites shown per failure (default 5) */
    unsigned frames;           /* frames per site (default 3) */
    const char *junit;         /* JUnit XML output path, or NULL */
    int github;                /* print GitHub Actions annotation lines */
    int allow_empty;           /* nothing measured passes (--allow-empty) */
    int allow_oom;             /* an out-of-memory event passes (--allow-oom) */
} tdm_gate_options;

void tdm__gate_options_init(tdm_gate_options *o);

/* The codes of the options both commands accept (their table, names and
 * help: cli/cli_gate_options.c). */
enum {
    TDM_GATE_OPT_MAX_PEAK = 0x100,
    TDM_GATE_OPT_MAX_RESERVED,
    TDM_GATE_OPT_MAX_LEAK,
    TDM_GATE_OPT_MAX_GROWTH,
    TDM_GATE_OPT_BASELINE,
    TDM_GATE_OPT_DEVICE,
    TDM_GATE_OPT_TOP,
    TDM_GATE_OPT_FRAMES,
    TDM_GATE_OPT_JUNIT,
    TDM_GATE_OPT_GITHUB,
    TDM_GATE_OPT_ALLOW_EMPTY,
    TDM_GATE_OPT_ALLOW_OOM,
};
/* Applies option `code` (a TDM_GATE_OPT_*) with its argument.  Returns 1
 * when it took it, 0 when `code` is not a gate option, -1 after printing a
 * usage error ("tidemark CMD: ...").  A size limit without a unit is read
 * as bytes; a nonzero one under 1 MiB also prints one warning line
 * ("--max-peak 12 has no unit: read as 12 B (did you mean 12GiB?)"). */
int tdm__gate_option(const char *cmd, int code, const char *arg, tdm_gate_options *o);
/* A size on the command line (a gate's limit, replay's --capacity) read
 * as the gates read theirs: 0, or -1 after printing "tidemark CMD: OPT
 * needs a size such as 12GiB, ..."; without a unit it is bytes, and a
 * nonzero one under 1 MiB prints the warning above. */
int tdm__gate_parse_size(const char *cmd, const char *opt, const char *arg, uint64_t *v);
/* Checks the options as a whole (--baseline and --max-growth go
 * together); -1 after printing a usage error. */
int tdm__gate_options_check(const char *cmd, const tdm_gate_options *o);

/* ---- evaluation --------------------------------------------------------- */

typedef enum tdm_gate_status {
    TDM_GATE_PASS = 0,
    TDM_GATE_SKIP = 1,  /* nothing to measure: no device, or none used */
    TDM_GATE_FAIL = 2,
    TDM_GATE_ERROR = 3, /* the figure cannot be measured from this file, or
                         * the file lacks the --device asked for */
} tdm_gate_status;

/* One gate on one device of one file. */
typedef struct tdm_gate_result {
    size_t file;            /* index into the inputs */
    tdm_gate_kind kind;
    int device;             /* ordinal */
    int dev_index;          /* index into the file's model->devices; -1 if absent */
    tdm_gate_status status;
    int64_t value;          /* bytes measured (the peak, for max-growth) */
    int64_t limit;          /* bytes; for max-growth the baseline's peak */
    double growth;          /* percent over the baseline (max-growth) */
    double growth_limit;    /* percent allowed (max-growth) */
    int64_t at_seq;         /* position of the figure (sites are taken there) */
    int at_end;             /* the figure is the state at the dump */
    int from_stats;         /* measured from allocator stats (no history) */
    uint64_t oom_requested; /* no-oom: the first one's bytes asked for */
    uint64_t oom_free;      /* no-oom: and bytes free on the device then */
    const char *note;       /* why ERROR/SKIP, or NULL */
} tdm_gate_result;

typedef struct tdm_gate_report {
    tdm_gate_result *results;
    size_t count;
    size_t passed, failed, skipped, errors;
} tdm_gate_report;

/* Checks every enabled gate on every input that could be read (inputs
 * whose snap is NULL get one ERROR result per gate).  `baseline` is the
 * loaded --baseline file (NULL without one).  TDM_HOST_OUT_OF_MEMORY is
 * the only failure. */
tdm_status tdm__gate_evaluate(const tdm_gate_options *o, const tdm_input *inputs,
                              size_t input_count, const tdm_input *baseline,
                              tdm_gate_report *report);
void tdm__gate_report_free(tdm_gate_report *report);

/* Whether `in` records no device memory used: read, and no allocation,
 * no segment and no allocator figure above zero, with events, a final
 * state or allocator statistics to tell (a file cut before all of them
 * is not empty but unmeasurable). */
int tdm__gate_input_empty(const tdm_input *in);
/* tdm__input_check_device on every readable input (--device N that a
 * file lacks: one line each, "tidemark CMD: PATH has no device N (its
 * devices: 0)"); the worst code. */
int tdm__gate_check_devices(const char *cmd, const tdm_gate_options *o,
                            const tdm_input *inputs, size_t input_count);
/* Whether the report measured nothing: no result, or every one SKIP. */
int tdm__gate_nothing_measured(const tdm_gate_report *report);

/* When the result's figure was reached: "+1.234 s (event 56), step 3,
 * phase backward", "at exit, ...", or why that is unknown. */
void tdm__gate_when(char *buf, size_t len, const tdm_input *in,
                    const tdm_gate_result *r);
/* One line: "peak 134.51 MiB > limit 100.00 MiB (+34.51 MiB, 34.5% over)". */
void tdm__gate_headline(char *buf, size_t len, const tdm_gate_result *r);

/* The text report on `out` (gate_text.c).  When a gate failed, the
 * verdict first: the first failure's detail block, then one line per other
 * failure or error; otherwise one line per result.  Then a total line.
 * Returns TDM_OK or TDM_HOST_OUT_OF_MEMORY. */
tdm_status tdm__gate_print(FILE *out, const tdm_gate_options *o,
                           const tdm_input *inputs, const tdm_gate_report *report);
/* The detail block of one failure (at most about 30 lines): the verdict
 * line "max-peak FAILED: peak 404.09 MiB > limit 1.00 KiB (404.09 MiB,
 * 41379100.0% over)", the file (and rank) and device, the limit and
 * figure in exact bytes, when, and the top sites with short stacks. */
tdm_status tdm__gate_print_failure(FILE *out, const tdm_gate_options *o,
                                   const tdm_input *in, const tdm_gate_result *r);
/* One "::error title=...::..." line per failure and error on `out`
 * (junit.c). */
void tdm__gate_print_github(FILE *out, const tdm_input *inputs,
                            const tdm_gate_report *report);
/* Escapes `in` for a GitHub workflow command: `property` nonzero for a
 * property value (also ':' and ','), zero for the message. */
void tdm__github_escape(FILE *out, const char *in, int property);

/* The exit code the results call for: GATE_FAILED if any failed, else
 * BAD_INPUT if any could not be measured, else NOTHING_MEASURED if
 * nothing was (unless o->allow_empty), else OK. */
int tdm__gate_exit_code(const tdm_gate_options *o, const tdm_gate_report *report);

/* ---- JUnit XML (junit.c) ------------------------------------------------ */

/* Writes the report to `path` as JUnit XML: one <testsuite> named
 * `suite`, one <testcase> per gate per file (failure, error or skipped as
 * the worst of its devices says).  `seconds` is the suite's time (the
 * command's run time for `tidemark run`, 0 otherwise).  Returns
 * TDM_IO_ERROR (after printing why, prefixed "tidemark CMD: ") when the
 * file cannot be written. */
tdm_status tdm__junit_write(const char *cmd, const char *path, const char *suite,
                            double seconds, const tdm_gate_options *o,
                            const tdm_input *inputs, size_t input_count,
                            const tdm_gate_report *report);
/* Writes `text` (UTF-8, possibly invalid) escaped for XML 1.0 character
 * data, or for an attribute value when `attribute` is nonzero: markup
 * characters become entities, bytes that are not valid UTF-8 and
 * characters XML 1.0 forbids become U+FFFD. */
void tdm__xml_escape(FILE *out, const char *text, int attribute);

#endif
