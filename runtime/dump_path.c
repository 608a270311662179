/* runtime/dump_path.c: the `dump` path template of TIDEMARK_CONF.
 *
 * Owns: checking a template, expanding its codes (%p pid, %h host, %r rank,
 * %l local rank, %t start time, %% percent), numbering repeated dumps
 * (a suffix such as "-2" before the extension), creating the folders a
 * dump goes into, and telling a file another process of the same job
 * wrote from one a previous run left.
 *
 * Invariants: a template that passed tdm__dump_path_check expands without
 * error unless the result is too long; an unknown rank expands to 0 so that
 * a single-process run and rank 0 of a job name their files alike; %t is the
 * time tidemark started in this process, so every dump of one run shares it.
 *
 * Lock: none; pure functions over caller memory, except make_parent
 * and written_since, which touch the file system, and
 * group_start_us, which reads /proc.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "procinfo.h"

int tdm__dump_path_check(const char *tmpl, char *why, size_t why_len)
{
    if (!tmpl || !*tmpl) {
        snprintf(why, why_len, "expected a path template");
        return -1;
    }
    /* "run/", "run/.", "..": a folder, which the dump would make and then
     * refuse to write over. */
    const char *slash = strrchr(tmpl, '/');
    const char *last = slash ? slash + 1 : tmpl;
    if (!*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0) {
        int keep = (int)strlen(tmpl) - (*last ? 0 : 1); /* without its last '/' */
        snprintf(why, why_len, "names a folder, not a file: add a file name, such as "
                               "%.*s/tidemark-%%p.tdm",
                 keep > 200 ? 200 : keep, tmpl);
        return -1;
    }
    for (const char *p = tmpl; *p; p++) {
        if (*p != '%')
            continue;
        p++;
        if (*p == '\0') {
            snprintf(why, why_len,
                     "a lone '%%' ends the template; write %%%% for a percent sign");
            return -1;
        }
        if (!strchr("phrlt%", *p)) {
            unsigned char c = (unsigned char)*p;
            char code[5] = {(char)c, '\0'};
            if (c < 0x20 || c == 0x7f) /* (as \xNN, as every message does) */
                code[tdm__hex_escape(code, c)] = '\0';
            snprintf(why, why_len, "unknown code '%%%s'; codes are %%p %%h %%r %%l %%t %%%%",
                     code);
            return -1;
        }
    }
    return 0;
}

/* Appends [s, s+n) to out at *used; -1 when it does not fit (NUL kept). */
static int put(char *out, size_t out_len, size_t *used, const char *s, size_t n)
{
    if (*used + n >= out_len)
        return -1;
    memcpy(out + *used, s, n);
    *used += n;
    out[*used] = '\0';
    return 0;
}

tdm_status tdm__dump_path_expand(const char *tmpl, const tdm__dump_vars *vars,
                                 char *out, size_t out_len)
{
    char why[128];
    size_t used = 0;
    if (!out || out_len == 0)
        return TDM_INVALID_ARGUMENT;
    out[0] = '\0';
    if (tdm__dump_path_check(tmpl, why, sizeof why) != 0)
        return TDM_INVALID_ARGUMENT;
    for (const char *p = tmpl; *p; p++) {
        char tmp[300];
        int n = 0;
        if (*p != '%') {
            if (put(out, out_len, &used, p, 1) != 0)
                return TDM_INVALID_ARGUMENT;
            continue;
        }
        switch (*++p) {
        case 'p':
            n = snprintf(tmp, sizeof tmp, "%lld", (long long)vars->pid);
            break;
        case 'r':
            n = snprintf(tmp, sizeof tmp, "%d", vars->rank < 0 ? 0 : (int)vars->rank);
            break;
        case 'l':
            n = snprintf(tmp, sizeof tmp, "%d",
                         vars->local_rank < 0 ? 0 : (int)vars->local_rank);
            break;
        case 'h': {
            /* A host name is one path component: never a folder. */
            const char *h = vars->host && *vars->host ? vars->host : "localhost";
            n = snprintf(tmp, sizeof tmp, "%s", h);
            for (int i = 0; i < n && i < (int)sizeof tmp; i++)
                if (tmp[i] == '/')
                    tmp[i] = '_';
            break;
        }
        case 't': {
            time_t secs = (time_t)(vars->start_time_us / 1000000u);
            struct tm tm;
            if (!gmtime_r(&secs, &tm))
                return TDM_INVALID_ARGUMENT;
            n = (int)strftime(tmp, sizeof tmp, "%Y%m%d-%H%M%S", &tm);
            break;
        }
        default: /* '%', the only other code check() lets through */
            n = snprintf(tmp, sizeof tmp, "%%");
            break;
        }
        if (n < 0 || (size_t)n >= sizeof tmp ||
            put(out, out_len, &used, tmp, (size_t)n) != 0)
            return TDM_INVALID_ARGUMENT;
    }
    return TDM_OK;
}

tdm_status tdm__dump_path_for_process(const char *tmpl, uint64_t start_time_us,
                                      char *out, size_t out_len)
{
    tdm_procinfo info;
    tdm__procinfo_read(&info);
    tdm__dump_vars vars = {
        .host = info.host,
        .pid = info.pid,
        .rank = info.rank,
        .local_rank = info.local_rank,
        .start_time_us = start_time_us,
    };
    return tdm__dump_path_expand(tmpl, &vars, out, out_len);
}

tdm_status tdm__dump_path_with_suffix(const char *path, const char *suffix,
                                      char *out, size_t out_len)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    /* A leading dot names a hidden file, not an extension. */
    size_t stem = dot && dot != base ? (size_t)(dot - path) : strlen(path);
    int n = snprintf(out, out_len, "%.*s%s%s", (int)stem, path, suffix,
                     path + stem);
    if (n < 0 || (size_t)n >= out_len)
        return TDM_INVALID_ARGUMENT;
    return TDM_OK;
}

tdm_status tdm__dump_path_make_parent(const char *path)
{
    char dir[TDM__CONF_PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof dir) {
        errno = ENAMETOOLONG;
        return TDM_IO_ERROR;
    }
    memcpy(dir, path, len + 1);
    char *last = strrchr(dir, '/');
    if (!last || last == dir)
        return TDM_OK; /* the current folder, or the root: they exist */
    *last = '\0';
    /* Make each prefix in turn; EEXIST means someone (maybe another rank
     * at the same moment) already did. */
    for (char *p = dir + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                return TDM_IO_ERROR;
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return TDM_IO_ERROR;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return TDM_IO_ERROR;
    }
    return TDM_OK;
}

int tdm__dump_path_written_since(const char *path, uint64_t since_us)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    uint64_t mtime_us = (uint64_t)st.st_mtim.tv_sec * 1000000u +
                        (uint64_t)st.st_mtim.tv_nsec / 1000u;
    return mtime_us >= since_us;
}

/* Boot time, seconds since the epoch (/proc/stat's btime); 0 if unknown. */
static uint64_t boot_time_s(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return 0;
    char line[256];
    unsigned long long btime = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    return btime;
}

uint64_t tdm__dump_path_group_start_us(uint64_t own_start_us)
{
    char name[64], text[1024];
    snprintf(name, sizeof name, "/proc/%lld/stat", (long long)getpgrp());
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return own_start_us;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return own_start_us;
    text[n] = '\0';
    /* The command name may hold blanks and ')': fields start after the
     * last ')'; the start time (ticks after boot) is field 22, the 20th
     * from there. */
    char *p = strrchr(text, ')');
    if (!p)
        return own_start_us;
    p++;
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    long ticks_per_s = sysconf(_SC_CLK_TCK);
    uint64_t boot = boot_time_s();
    if (!p || ticks_per_s <= 0 || boot == 0)
        return own_start_us;
    unsigned long long ticks = strtoull(p + 1, NULL, 10);
    uint64_t leader_us = boot * 1000000u + ticks * 1000000u / (uint64_t)ticks_per_s;
    return leader_us < own_start_us ? leader_us : own_start_us;
}

/* Whether the template names the pid (%p, not the escaped %%p). */
int tdm__dump_template_has_pid(const char *tmpl)
{
    for (const char *c = tmpl; *c; c++) {
        if (*c != '%')
            continue;
        if (c[1] == 'p')
            return 1;
        if (c[1] != '\0')
            c++;
    }
    return 0;
}

/* tmpl = dump, relative to the folder the program started in (so a
 * program that changes folder still dumps where it was started).  '%' in
 * that folder's name is escaped so it is not read as a code. */
int tdm__dump_template_absolute(const char *dump, char *tmpl, size_t tmpl_len)
{
    char cwd[TDM__CONF_PATH_MAX];
    size_t used = 0;
    if (dump[0] != '/' && getcwd(cwd, sizeof cwd)) {
        for (const char *c = cwd; *c; c++) {
            if (used + 3 >= tmpl_len)
                return -1;
            if (*c == '%')
                tmpl[used++] = '%';
            tmpl[used++] = *c;
        }
        if (used && tmpl[used - 1] != '/')
            tmpl[used++] = '/';
    }
    size_t len = strlen(dump);
    if (used + len >= tmpl_len)
        return -1;
    memcpy(tmpl + used, dump, len + 1);
    return 0;
}
