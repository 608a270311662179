/* viewer-export/cli/top_labels.c: who a watched process is in its job, for
 * `tidemark top`'s header line and its OpenMetrics labels (top.h): the
 * host its spill file names, its rank (the variables the recorder reads,
 * procinfo_vars.h) and the batch system's job id (SLURM_JOB_ID,
 * PBS_JOBID, LSB_JOBID, FLUX_JOB_ID), read from the process's own
 * environment in /proc/PID/environ (as it was at its start), else from
 * this process's, which a job step shares.  The job id is escaped
 * (common.h) like every text shown.  No state, no lock.
 */
#include "top.h"
#include "common.h" /* tdm__escape_text */
#include "procinfo_vars.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const job_vars[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
                                       NULL};

/* The environment of `pid` as NUL-separated "K=V" strings; malloc'd,
 * NULL when it cannot be read. */
static char *read_environ(int64_t pid, size_t *len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/environ", (long long)pid);
    FILE *f = pid > 0 ? fopen(path, "re") : NULL;
    if (!f)
        return NULL;
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *grown = cap < (16u << 20) ? realloc(buf, cap * 2 + 1) : NULL;
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad || n == 0) { /* (no environment at all: another user's, a zombie) */
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static const char *env_in(const char *env, size_t len, const char *name)
{
    size_t k = strlen(name);
    for (size_t at = 0; at < len; at += strlen(env + at) + 1)
        if (strncmp(env + at, name, k) == 0 && env[at + k] == '=')
            return env + at + k + 1;
    return NULL;
}

static const char *lookup(const char *env, size_t len, const char *name)
{
    return env ? env_in(env, len, name) : getenv(name);
}

void tdm__top_labels_read(int64_t pid, const char *recorded_host, tdm_top_labels *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->host, sizeof out->host, "%s", recorded_host);
    size_t len = 0;
    char *env = read_environ(pid, &len);
    for (const char *const *v = tdm__rank_vars; *v; v++) {
        const char *val = lookup(env, len, *v);
        if (!val || !*val)
            continue;
        char *end;
        long r = strtol(val, &end, 10);
        if (*end == '\0' && r >= 0 && r <= 0x7fffffff) {
            snprintf(out->rank, sizeof out->rank, "%ld", r);
            break;
        }
    }
    for (const char *const *v = job_vars; *v; v++) {
        const char *val = lookup(env, len, *v);
        if (val && *val) { /* (any text a job script set: escaped, as every text shown) */
            size_t used, n = tdm__escape_text(val, strlen(val), out->job, sizeof out->job - 1,
                                              0, 1, &used);
            out->job[n] = '\0';
            break;
        }
    }
    free(env);
}
