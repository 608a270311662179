/* viewer-export/cli/top_metrics.c: `tidemark top --openmetrics` (top.h):
 * the figures of a frame as OpenMetrics text, for node_exporter's
 * textfile collector or a Prometheus pushgateway (docs/live.md).
 *
 * One metric family per figure, each written once with its TYPE, UNIT
 * and HELP lines before its samples (every process and device under it),
 * all gauges in bytes, names ending in _bytes as the format wants of a
 * family with a unit; labels host, rank and job where known, pid,
 * device (the ordinal) and device_name, and category for the family by
 * category; label values escaped (backslash, double quote, newline);
 * "# EOF" last.  No time stamps: a scrape's time is the reading's.
 * No state, no lock.
 */
#include "top.h"

#include <string.h>

typedef enum figure {
    FIG_ALLOCATED,
    FIG_RESERVED,
    FIG_PEAK_ALLOCATED,
    FIG_PEAK_RESERVED,
    FIG_CATEGORY,
} figure;

static const struct {
    const char *name, *help;
} families[] = {
    [FIG_ALLOCATED] = {"tidemark_device_allocated_bytes",
                       "Bytes allocated on the device now (sizes as requested)."},
    [FIG_RESERVED] = {"tidemark_device_reserved_bytes",
                      "Bytes in the allocator's segments on the device now."},
    [FIG_PEAK_ALLOCATED] = {"tidemark_device_peak_allocated_bytes",
                            "Highest allocated bytes over the history the recorder holds."},
    [FIG_PEAK_RESERVED] = {"tidemark_device_peak_reserved_bytes",
                           "Highest reserved bytes over the history the recorder holds."},
    [FIG_CATEGORY] = {"tidemark_category_bytes",
                      "Bytes allocated on the device now, by kind of memory."},
};

/* A label value as the text format wants it. */
static void value(FILE *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', out), fputc(*v, out);
        else if (*v == '\n')
            fputs("\\n", out);
        else
            fputc(*v, out);
    }
}

static void labels(FILE *out, const tdm_top_process *p, const tdm_top_device *d)
{
    fputs("{host=\"", out);
    value(out, p->labels.host);
    fputc('"', out);
    if (p->labels.rank[0])
        fprintf(out, ",rank=\"%s\"", p->labels.rank);
    if (p->labels.job[0]) {
        fputs(",job=\"", out);
        value(out, p->labels.job);
        fputc('"', out);
    }
    fprintf(out, ",pid=\"%lld\",device=\"%d\",device_name=\"", (long long)p->source.pid,
            d->ordinal);
    value(out, d->name);
    fputc('"', out);
}

static void samples(FILE *out, figure f, const tdm_top_process *procs, size_t n)
{
    const char *name = families[f].name;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < procs[i].device_count; k++) {
            const tdm_top_device *d = &procs[i].devices[k];
            if (f == FIG_CATEGORY) {
                for (int c = 0; c < TDM_CATEGORY_COUNT_; c++) {
                    fputs(name, out);
                    labels(out, &procs[i], d);
                    fprintf(out, ",category=\"%s\"} %llu\n", tdm_category_name((tdm_category)c),
                            (unsigned long long)d->category_bytes[c]);
                }
                continue;
            }
            if ((f == FIG_RESERVED || f == FIG_PEAK_RESERVED) && !d->reserved_known)
                continue;
            int64_t v = f == FIG_ALLOCATED ? d->allocated
                        : f == FIG_RESERVED ? d->reserved
                        : f == FIG_PEAK_ALLOCATED ? d->peak_allocated
                                                  : d->peak_reserved;
            fputs(name, out);
            labels(out, &procs[i], d);
            fprintf(out, "} %lld\n", (long long)v);
        }
    }
}

void tdm__top_metrics_print(FILE *out, const tdm_top_process *procs, size_t n)
{
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        fprintf(out, "# TYPE %s gauge\n# UNIT %s bytes\n# HELP %s %s\n", families[f].name,
                families[f].name, families[f].name, families[f].help);
        samples(out, (figure)f, procs, n);
    }
    fputs("# EOF\n", out);
}
