/* viewer-export/gate/junit.c: the gate report in the formats CI systems read:
 * JUnit XML (Jenkins, GitLab, GitHub test reporters, CTest dashboards) and
 * GitHub Actions workflow-command annotations.
 *
 * JUnit shape: <testsuites> holding one <testsuite name=SUITE>, holding
 * one <testcase classname="tidemark.FILE" name="GATE" file="PATH"> per
 * gate per input file.  A testcase takes the worst status of its devices: a
 * <failure> (a limit exceeded), an <error> (the figure could not be
 * measured) or <skipped>; its body is the same text the terminal report
 * prints.  Invariant: the document is well-formed XML 1.0 whatever bytes
 * the paths, function names or notes hold: every string goes through
 * tdm__xml_escape, which also replaces invalid UTF-8 and the control
 * characters XML 1.0 cannot carry.  The file is written to a temporary
 * name beside it and renamed, so a reader never sees half of it.
 *
 * GitHub: one "::error title=...::..." line per failed or unmeasurable
 * gate, escaped as workflow commands require (%, CR, LF; and ':' ','
 * in properties).  No state, no locks.
 */
#include "gate.h"
#include "format_size.h"
#include "ranks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Length of the UTF-8 sequence at p (1..4) when it is valid and names a
 * character XML 1.0 allows; 0 otherwise. */
static int xml_char_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return c >= 0x20 || c == '\t' || c == '\n' || c == '\r' ? 1 : 0;
    int n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0; /* continuation byte, overlong lead (C0, C1) or > U+10FFFF */
    }
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0; /* also stops at the NUL */
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0; /* overlong */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF)
        return 0; /* surrogates and the two non-characters XML excludes */
    return n;
}

void tdm__xml_escape(FILE *out, const char *text, int attribute)
{
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    while (*p) {
        switch (*p) {
        case '&': fputs("&amp;", out); p++; continue;
        case '<': fputs("&lt;", out); p++; continue;
        case '>': fputs("&gt;", out); p++; continue;
        case '"':
            fputs(attribute ? "&quot;" : "\"", out);
            p++;
            continue;
        case '\'':
            fputs(attribute ? "&apos;" : "'", out);
            p++;
            continue;
        /* Attribute values have their whitespace normalized by parsers;
         * character references keep it. */
        case '\n':
            fputs(attribute ? "&#10;" : "\n", out);
            p++;
            continue;
        case '\r':
            fputs("&#13;", out); /* would become \n in text too */
            p++;
            continue;
        case '\t':
            fputs(attribute ? "&#9;" : "\t", out);
            p++;
            continue;
        default: break;
        }
        int n = xml_char_len(p);
        if (n == 0) {
            fputs("\xEF\xBF\xBD", out); /* U+FFFD for one bad byte */
            p++;
        } else {
            fwrite(p, 1, (size_t)n, out);
            p += n;
        }
    }
}

/* "tidemark.train" for "runs/train.tdm": dots separate packages in JUnit
 * class names, so the file's dots become underscores. */
static void write_classname(FILE *out, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char *copy = strndup(base, n);
    if (!copy) {
        tdm__xml_escape(out, "tidemark.file", 1);
        return;
    }
    for (char *c = copy; *c; c++)
        if (*c == '.')
            *c = '_';
    fputs("tidemark.", out);
    tdm__xml_escape(out, copy, 1);
    free(copy);
}

/* The worst status among the results of (file, kind), and how many. */
static tdm_gate_status group_status(const tdm_gate_report *rep, size_t file,
                                    tdm_gate_kind kind, size_t *count)
{
    tdm_gate_status worst = TDM_GATE_PASS;
    int all_skipped = 1;
    *count = 0;
    for (size_t i = 0; i < rep->count; i++) {
        const tdm_gate_result *r = &rep->results[i];
        if (r->file != file || r->kind != kind)
            continue;
        (*count)++;
        if (r->status != TDM_GATE_SKIP)
            all_skipped = 0;
        if (r->status == TDM_GATE_FAIL || r->status == TDM_GATE_ERROR) {
            if (worst != TDM_GATE_FAIL)
                worst = r->status; /* a failure says more than an error */
        }
    }
    if (worst == TDM_GATE_PASS && *count && all_skipped)
        worst = TDM_GATE_SKIP;
    return worst;
}

static tdm_status write_testcase(FILE *out, const tdm_gate_options *o,
                                 const tdm_input *in, size_t file, tdm_gate_kind kind,
                                 const tdm_gate_report *rep)
{
    size_t count;
    tdm_gate_status st = group_status(rep, file, kind, &count);
    if (!count)
        return TDM_OK;
    fputs("    <testcase classname=\"", out);
    write_classname(out, in->path);
    fputs("\" name=\"", out);
    tdm__xml_escape(out, tdm__gate_kind_name(kind), 1);
    fputs("\" file=\"", out);
    tdm__xml_escape(out, in->path, 1);
    fputs("\" time=\"0\">\n", out);

    /* The message: the first result with the testcase's status. */
    const tdm_gate_result *first = NULL;
    for (size_t i = 0; i < rep->count && !first; i++) {
        const tdm_gate_result *r = &rep->results[i];
        if (r->file == file && r->kind == kind && r->status == st)
            first = r;
    }
    /* A file of a multi-rank job: its rank and host lead the message. */
    char head[256], msg[640], rank[320], lead[330];
    tdm__ranks_label(rank, sizeof rank, in->snap);
    snprintf(lead, sizeof lead, "%s%s", rank, rank[0] ? ", " : "");
    if (first) {
        tdm__gate_headline(head, sizeof head, first);
        if (first->dev_index >= 0)
            snprintf(msg, sizeof msg, "%sdevice %d: %s", lead, first->device, head);
        else
            snprintf(msg, sizeof msg, "%s%s", lead, head);
    }
    /* The body: a line per device, then each failure's detail block. */
    char *body = NULL;
    size_t body_len = 0;
    FILE *b = open_memstream(&body, &body_len);
    if (!b)
        return TDM_HOST_OUT_OF_MEMORY;
    tdm_status ret = TDM_OK;
    for (size_t i = 0; i < rep->count; i++) {
        const tdm_gate_result *r = &rep->results[i];
        if (r->file != file || r->kind != kind)
            continue;
        tdm__gate_headline(head, sizeof head, r);
        if (r->dev_index >= 0 || r->device >= 0)
            fprintf(b, "%sdevice %d: %s\n", lead, r->device, head);
        else
            fprintf(b, "%s%s\n", lead, head);
    }
    for (size_t i = 0; i < rep->count && ret == TDM_OK; i++) {
        const tdm_gate_result *r = &rep->results[i];
        if (r->file == file && r->kind == kind && r->status == TDM_GATE_FAIL) {
            fputc('\n', b);
            ret = tdm__gate_print_failure(b, o, in, r);
        }
    }
    if (fclose(b) != 0 && ret == TDM_OK)
        ret = TDM_HOST_OUT_OF_MEMORY;
    if (ret != TDM_OK) {
        free(body);
        return ret;
    }

    static const char *const element[] = {NULL, "skipped", "failure", "error"};
    if (st != TDM_GATE_PASS) {
        fprintf(out, "      <%s message=\"", element[st]);
        tdm__xml_escape(out, first ? msg : "", 1);
        if (st == TDM_GATE_SKIP) {
            fputs("\"/>\n", out);
        } else {
            fprintf(out, "\" type=\"%s\">", tdm__gate_kind_name(kind));
            tdm__xml_escape(out, body, 0);
            fprintf(out, "</%s>\n", element[st]);
        }
    }
    if (st == TDM_GATE_PASS || st == TDM_GATE_SKIP) { /* else the body is above */
        fputs("      <system-out>", out);
        tdm__xml_escape(out, body, 0);
        fputs("</system-out>\n", out);
    }
    fputs("    </testcase>\n", out);
    free(body);
    return TDM_OK;
}

tdm_status tdm__junit_write(const char *cmd, const char *path, const char *suite,
                            double seconds, const tdm_gate_options *o,
                            const tdm_input *inputs, size_t input_count,
                            const tdm_gate_report *rep)
{
    size_t tests = 0, failures = 0, errors = 0, skipped = 0;
    for (size_t f = 0; f < input_count; f++)
        for (int k = 0; k < TDM_GATE_KIND_COUNT_; k++) {
            size_t count;
            tdm_gate_status st = group_status(rep, f, (tdm_gate_kind)k, &count);
            if (!count)
                continue;
            tests++;
            failures += st == TDM_GATE_FAIL;
            errors += st == TDM_GATE_ERROR;
            skipped += st == TDM_GATE_SKIP;
        }

    size_t len = strlen(path);
    char *tmp = malloc(len + 32);
    if (!tmp)
        return TDM_HOST_OUT_OF_MEMORY;
    snprintf(tmp, len + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fprintf(stderr, "tidemark %s: cannot write %s: %s\n", cmd, path, strerror(errno));
        free(tmp);
        return TDM_IO_ERROR;
    }

    char stamp[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';

    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
    fprintf(out, "<testsuites name=\"tidemark\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
                 "skipped=\"%zu\" time=\"%.3f\">\n",
            tests, failures, errors, skipped, seconds);
    fputs("  <testsuite name=\"", out);
    tdm__xml_escape(out, suite, 1);
    fprintf(out, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" "
                 "time=\"%.3f\" timestamp=\"%s\" hostname=\"",
            tests, failures, errors, skipped, seconds, stamp);
    tdm__xml_escape(out, host, 1);
    fputs("\">\n", out);
    tdm_status st = TDM_OK;
    for (size_t f = 0; f < input_count && st == TDM_OK; f++)
        for (int k = 0; k < TDM_GATE_KIND_COUNT_ && st == TDM_OK; k++)
            st = write_testcase(out, o, &inputs[f], f, (tdm_gate_kind)k, rep);
    fputs("  </testsuite>\n</testsuites>\n", out);

    int werr = ferror(out);
    if (fclose(out) != 0)
        werr = 1;
    if (st == TDM_OK && (werr || rename(tmp, path) != 0)) {
        fprintf(stderr, "tidemark %s: cannot write %s: %s\n", cmd, path,
                errno ? strerror(errno) : "write error");
        st = TDM_IO_ERROR;
    }
    if (st != TDM_OK)
        unlink(tmp);
    free(tmp);
    return st;
}

/* ---- GitHub Actions ----------------------------------------------------- */

void tdm__github_escape(FILE *out, const char *in, int property)
{
    for (const char *p = in; *p; p++) {
        switch (*p) {
        case '%': fputs("%25", out); break;
        case '\r': fputs("%0D", out); break;
        case '\n': fputs("%0A", out); break;
        case ':': fputs(property ? "%3A" : ":", out); break;
        case ',': fputs(property ? "%2C" : ",", out); break;
        default: fputc(*p, out);
        }
    }
}

void tdm__gate_print_github(FILE *out, const tdm_input *inputs,
                            const tdm_gate_report *rep)
{
    for (size_t i = 0; i < rep->count; i++) {
        const tdm_gate_result *r = &rep->results[i];
        if (r->status != TDM_GATE_FAIL && r->status != TDM_GATE_ERROR)
            continue;
        const tdm_input *in = &inputs[r->file];
        char head[256], msg[1024], title[64];
        tdm__gate_headline(head, sizeof head, r);
        if (r->dev_index >= 0)
            snprintf(title, sizeof title, "tidemark %s (device %d)",
                     tdm__gate_kind_name(r->kind), r->device);
        else
            snprintf(title, sizeof title, "tidemark %s", tdm__gate_kind_name(r->kind));
        char rank[320];
        tdm__ranks_label(rank, sizeof rank, in->snap);
        int n = snprintf(msg, sizeof msg, "%s%s%s%s: %s", in->path, rank[0] ? " (" : "", rank,
                         rank[0] ? ")" : "", head);
        if (r->status == TDM_GATE_FAIL && in->model && n > 0 && (size_t)n < sizeof msg) {
            char when[192];
            tdm__gate_when(when, sizeof when, in, r);
            n += snprintf(msg + n, sizeof msg - (size_t)n, "; when: %s", when);
            tdm_model_site *sites;
            size_t count;
            if (tdm__model_sites_at(in->model, (size_t)r->dev_index, r->at_seq, &sites,
                                    &count) == TDM_OK) {
                if (count && sites[0].live_bytes && (size_t)n < sizeof msg) {
                    const tdm_snap *s = in->snap;
                    uint32_t sid = sites[0].stack_id, f = tdm__site_first_frame(s, sid);
                    char frame[256] = "(no stack recorded)", sz[TDM_FMT_LEN];
                    if (sid && sid < s->stack_count && f < s->stacks[sid].depth &&
                        s->stacks[sid].frames[f] < s->frame_count)
                        tdm__site_format_frame(frame, sizeof frame,
                                               &s->frames[s->stacks[sid].frames[f]]);
                    snprintf(msg + n, sizeof msg - (size_t)n, "; top site %s: %s",
                             tdm__fmt_bytes(sz, sizeof sz, sites[0].live_bytes), frame);
                }
                free(sites);
            }
        }
        fputs("::error title=", out);
        tdm__github_escape(out, title, 1);
        fputs("::", out);
        tdm__github_escape(out, msg, 0);
        fputc('\n', out);
    }
}
