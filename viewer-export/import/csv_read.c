/* viewer-export/import/csv_read.c: the CSV line reader of csv_read.h.  Owns
 * nothing beyond the reader it is given; no state, no locks.
 */
#include "csv_read.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static int is_blank(char ch) { return ch == ' ' || ch == '\t'; }

/* Drops blanks around s (and the line end, which trailing blanks may
 * follow or precede); returns the new start. */
static char *trim(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n && (is_blank(s[n - 1]) || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

tdm_status tdm__csv_open(tdm_csv *c, const char *path, unsigned flags,
                         char *err, size_t errlen)
{
    *c = (tdm_csv){.flags = flags, .err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = '\0';
    c->f = fopen(path, "r");
    if (!c->f) {
        if (err && errlen)
            snprintf(err, errlen, "%s", strerror(errno));
        return TDM_IO_ERROR;
    }
    return TDM_OK;
}

tdm_status tdm__csv_open_buffer(tdm_csv *c, const void *data, size_t len, unsigned flags,
                                char *err, size_t errlen)
{
    *c = (tdm_csv){.flags = flags, .err = err, .errlen = errlen};
    if (err && errlen)
        err[0] = '\0';
    if (len == 0)
        return TDM_OK; /* no stream: at its end at once (fmemopen wants bytes) */
    c->f = fmemopen((void *)data, len, "r");
    if (!c->f) {
        if (err && errlen)
            snprintf(err, errlen, "%s", strerror(errno));
        return errno == ENOMEM ? TDM_HOST_OUT_OF_MEMORY : TDM_IO_ERROR;
    }
    return TDM_OK;
}

int tdm__csv_next(tdm_csv *c, tdm_status *st)
{
    if (!c->f)
        return 0;
    for (;;) {
        errno = 0;
        ssize_t len = getline(&c->line, &c->cap, c->f);
        if (len < 0) {
            if (errno == ENOMEM)
                *st = TDM_HOST_OUT_OF_MEMORY;
            else if (ferror(c->f))
                *st = TDM_IO_ERROR;
            return 0;
        }
        c->line_no++;
        c->line_at = c->next_at;
        c->next_at += (uint64_t)len;
        c->cut = len > 0 && c->line[len - 1] != '\n';
        char *l = c->line;
        if (c->flags & TDM_CSV_TRIM) {
            l = trim(l);
        } else {
            while (len > 0 && (l[len - 1] == '\n' || l[len - 1] == '\r'))
                l[--len] = '\0';
        }
        if (!*l || ((c->flags & TDM_CSV_COMMENTS) && *l == '#'))
            continue;
        c->nfield = 0;
        for (char *p = l;;) {
            if (c->nfield < TDM_CSV_MAX_FIELDS)
                c->field[c->nfield++] = p;
            char *comma = strchr(p, ',');
            if (!comma)
                break;
            *comma = '\0';
            p = comma + 1;
        }
        if (c->flags & TDM_CSV_TRIM)
            for (int i = 0; i < c->nfield; i++)
                c->field[i] = trim(c->field[i]);
        return 1;
    }
}

int tdm__csv_header(const tdm_csv *c, const char *const *names, int count,
                    unsigned optional, int *col)
{
    int missing = -1;
    for (int k = 0; k < count; k++) {
        col[k] = -1;
        for (int i = 0; i < c->nfield; i++)
            if (strcmp(c->field[i], names[k]) == 0)
                col[k] = i;
        if (col[k] < 0 && !(optional & (1u << k)) && missing < 0)
            missing = k;
    }
    return missing;
}

void tdm__csv_row(const tdm_csv *c, const int *col, int count, const char **v)
{
    for (int k = 0; k < count; k++)
        v[k] = col[k] >= 0 && col[k] < c->nfield ? c->field[col[k]] : "";
}

tdm_status tdm__csv_fail(tdm_csv *c, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        /* The byte offset every reader's error gives, and the line. */
        int n = snprintf(c->err, c->errlen, "line %lu (at byte %" PRIu64 ")%s: ", c->line_no,
                         c->line_at, c->cut ? ", the last, ends without a newline" : "");
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < c->errlen)
            vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return c->cut ? TDM_TRUNCATED : TDM_FORMAT_ERROR;
}

tdm_status tdm__csv_close(tdm_csv *c, tdm_status st)
{
    if (st == TDM_IO_ERROR && c->err && c->errlen && !c->err[0])
        snprintf(c->err, c->errlen, "read error after line %lu (at byte %" PRIu64 ")",
                 c->line_no, c->next_at);
    free(c->line);
    c->line = NULL;
    if (c->f)
        fclose(c->f);
    c->f = NULL;
    return st;
}
