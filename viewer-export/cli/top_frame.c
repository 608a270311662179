/* viewer-export/cli/top_frame.c: the frame `tidemark top` shows (top.h):
 * per process a line of who it is, then per device allocated and reserved
 * bytes now with their peaks, the bytes of each category now, the last
 * minute of allocated bytes as a line of block characters, and the sites
 * holding the most now; where that does not fit in the terminal's rows,
 * one line per process and device instead.  On a terminal (`ansi`) the
 * frame is drawn from
 * the top left over the previous one (each line cleared to its end, the
 * rest of the screen after it), headings in bold; elsewhere it is plain
 * text.  Every text taken from a file was escaped when read
 * (top_read.c).  No state, no lock.
 */
#include "format_size.h"
#include "top.h"

#include <string.h>
#include <time.h>

#define BOLD(a) ((a) ? "\033[1m" : "")
#define PLAIN(a) ((a) ? "\033[0m" : "")
#define EOL(a) ((a) ? "\033[K\n" : "\n")

/* Eighths of a cell, as block characters (UTF-8). */
static const char *const blocks[] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
                                     "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
                                     "\xe2\x96\x87", "\xe2\x96\x88"};

static void plot(FILE *out, const tdm_top_device *d, int ansi)
{
    int64_t max = 0;
    for (int k = 0; k < TDM_TOP_HISTORY; k++)
        if (d->history[k] > max)
            max = d->history[k];
    char b[TDM_FMT_LEN];
    fprintf(out, "    last %ds   ", TDM_TOP_HISTORY);
    for (int k = 0; k < TDM_TOP_HISTORY; k++) {
        int64_t v = d->history[k];
        if (v < 0) {
            fputc(' ', out);
            continue;
        }
        int level = max > 0 ? (int)((double)v * 7.0 / (double)max + 0.5) : 0;
        fputs(blocks[level < 0 ? 0 : level > 7 ? 7 : level], out);
    }
    fprintf(out, "  max %s%s", tdm__fmt_bytes(b, sizeof b, (uint64_t)max), EOL(ansi));
}

static void device(FILE *out, const tdm_top_device *d, int ansi)
{
    char a[TDM_FMT_LEN], pa[TDM_FMT_LEN], r[TDM_FMT_LEN], pr[TDM_FMT_LEN];
    fprintf(out, "  %sdevice %d (%s)%s  allocated %s (peak %s)", BOLD(ansi), d->ordinal,
            d->name, PLAIN(ansi), tdm__fmt_sbytes(a, sizeof a, d->allocated),
            tdm__fmt_sbytes(pa, sizeof pa, d->peak_allocated));
    if (d->reserved_known)
        fprintf(out, "  reserved %s (peak %s)", tdm__fmt_sbytes(r, sizeof r, d->reserved),
                tdm__fmt_sbytes(pr, sizeof pr, d->peak_reserved));
    fputs(EOL(ansi), out);
    int any = 0;
    for (int c = 0; c < TDM_CATEGORY_COUNT_; c++) {
        if (!d->category_bytes[c])
            continue;
        fprintf(out, "%s%s %s", any ? "   " : "    ", tdm_category_name((tdm_category)c),
                tdm__fmt_bytes(a, sizeof a, d->category_bytes[c]));
        any = 1;
    }
    if (any)
        fputs(EOL(ansi), out);
    plot(out, d, ansi);
    if (d->site_count)
        fprintf(out, "    sites holding the most now:%s", EOL(ansi));
    for (size_t i = 0; i < d->site_count; i++)
        fprintf(out, "    %12s  %5llu block%s  %s%s",
                tdm__fmt_bytes(a, sizeof a, d->sites[i].bytes),
                (unsigned long long)d->sites[i].count, d->sites[i].count == 1 ? " " : "s",
                d->sites[i].where, EOL(ansi));
}

static void process(FILE *out, const tdm_top_process *p, int ansi, uint64_t now_ns)
{
    fprintf(out, "%spid %lld%s  %s%s  host %s", BOLD(ansi), (long long)p->source.pid,
            PLAIN(ansi), p->command, p->source.alive ? "" : " (ended)", p->labels.host);
    if (p->labels.rank[0])
        fprintf(out, "  rank %s", p->labels.rank);
    if (p->labels.job[0])
        fprintf(out, "  job %s", p->labels.job);
    fprintf(out, "%s", EOL(ansi));
    char ago[TDM_FMT_LEN] = "none";
    if (p->last_event_ns) /* (its clock may be a little ahead of ours: clock.h) */
        tdm__fmt_offset(ago, sizeof ago,
                        now_ns > p->last_event_ns ? (int64_t)(now_ns - p->last_event_ns) : 0);
    fprintf(out, "  %llu events kept, %llu overwritten, %llu being written; last event %s%s%s",
            (unsigned long long)p->events, (unsigned long long)p->dropped,
            (unsigned long long)p->torn, ago[0] == '+' ? ago + 1 : ago,
            p->last_event_ns ? " ago" : "", EOL(ansi));
    if (!p->device_count)
        fprintf(out, "  no device memory recorded yet%s", EOL(ansi));
    for (size_t i = 0; i < p->device_count; i++)
        device(out, &p->devices[i], ansi);
}

/* The lines process() takes for `p`. */
static size_t process_lines(const tdm_top_process *p)
{
    size_t lines = 3 + (p->device_count ? 0 : 1);
    for (size_t i = 0; i < p->device_count; i++) {
        const tdm_top_device *d = &p->devices[i];
        int any = 0;
        for (int c = 0; c < TDM_CATEGORY_COUNT_; c++)
            any |= d->category_bytes[c] != 0;
        lines += 2 + (size_t)any + (d->site_count ? 1 + d->site_count : 0);
    }
    return lines;
}

/* One line per process and device, for a screen too small for the full
 * frame (the ranks of a job on one node): the figures, the last 20
 * seconds, the site holding the most. */
static void compact(FILE *out, const tdm_top_process *procs, size_t n, int ansi)
{
    fprintf(out, "%s%8s %5s %4s %11s %11s %11s %11s  %-20s  %s%s%s", BOLD(ansi), "pid", "rank",
            "dev", "allocated", "peak", "reserved", "peak", "last 20s", "top site now",
            PLAIN(ansi), EOL(ansi));
    for (size_t i = 0; i < n; i++) {
        const tdm_top_process *p = &procs[i];
        for (size_t k = 0; k < p->device_count; k++) {
            const tdm_top_device *d = &p->devices[k];
            char a[TDM_FMT_LEN], pa[TDM_FMT_LEN], r[TDM_FMT_LEN] = "-", pr[TDM_FMT_LEN] = "-";
            tdm__fmt_sbytes(a, sizeof a, d->allocated);
            tdm__fmt_sbytes(pa, sizeof pa, d->peak_allocated);
            if (d->reserved_known) {
                tdm__fmt_sbytes(r, sizeof r, d->reserved);
                tdm__fmt_sbytes(pr, sizeof pr, d->peak_reserved);
            }
            fprintf(out, "%8lld %5s %4d %11s %11s %11s %11s  ", (long long)p->source.pid,
                    p->labels.rank[0] ? p->labels.rank : "-", d->ordinal, a, pa, r, pr);
            int64_t max = 0;
            for (int h = TDM_TOP_HISTORY - 20; h < TDM_TOP_HISTORY; h++)
                max = d->history[h] > max ? d->history[h] : max;
            for (int h = TDM_TOP_HISTORY - 20; h < TDM_TOP_HISTORY; h++) {
                int64_t v = d->history[h];
                int level = max > 0 ? (int)((double)v * 7.0 / (double)max + 0.5) : 0;
                fputs(v < 0 ? " " : blocks[level < 0 ? 0 : level > 7 ? 7 : level], out);
            }
            fprintf(out, "  %s%s", d->site_count ? d->sites[0].where : "-", EOL(ansi));
        }
        if (!p->device_count)
            fprintf(out, "%8lld %5s    - no device memory recorded yet%s",
                    (long long)p->source.pid, p->labels.rank[0] ? p->labels.rank : "-",
                    EOL(ansi));
    }
}

void tdm__top_frame_print(FILE *out, const tdm_top_process *procs, size_t n,
                          const char *const *failed, size_t nfailed, int ansi,
                          unsigned rows, uint64_t now_ns)
{
    char when[TDM_FMT_LEN];
    if (ansi)
        fputs("\033[H", out);
    fprintf(out, "%stidemark top%s  %zu process%s  %s%s%s", BOLD(ansi), PLAIN(ansi), n,
            n == 1 ? "" : "es", tdm__fmt_utc(when, sizeof when, now_ns / 1000u),
            ansi ? "  (q: quit)" : "", EOL(ansi));
    size_t need = 1 + nfailed;
    for (size_t i = 0; i < n; i++)
        need += 1 + process_lines(&procs[i]);
    if (rows && need > rows) {
        fputs(EOL(ansi), out);
        compact(out, procs, n, ansi);
    } else {
        for (size_t i = 0; i < n; i++) {
            fputs(EOL(ansi), out);
            process(out, &procs[i], ansi, now_ns);
        }
    }
    for (size_t i = 0; i < nfailed; i++)
        fprintf(out, "%s%s", failed[i], EOL(ansi));
    if (ansi)
        fputs("\033[J", out);
    fflush(out);
}
