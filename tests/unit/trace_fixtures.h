/* tests/unit/trace_fixtures.h: finding the allocation traces that the
 * allocator tests replay (shared/traces beside the repository, or
 * $TDM_TRACES_DIR; the repository's own bench/traces). */
#ifndef TDM_TESTS_TRACE_FIXTURES_H
#define TDM_TESTS_TRACE_FIXTURES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* $TDM_TRACES_DIR, else ../shared/traces beside the repository. */
static inline const char *tdm_test_shared_traces(char *buf, size_t len)
{
    const char *env = getenv("TDM_TRACES_DIR");
    if (env && *env)
        return env;
    snprintf(buf, len, "%s/../../../shared/traces", TDM_TEST_DATA_DIR);
    return buf;
}

/* The repository's bench/traces. */
static inline const char *tdm_test_own_traces(char *buf, size_t len)
{
    snprintf(buf, len, "%s/../../bench/traces", TDM_TEST_DATA_DIR);
    return buf;
}

/* One line of a trace CSV: 1 with its action, id and size for a row of
 * the file's format (action,time_ns,id,size,...), 0 for comments, the
 * header and rows of any other shape. */
static inline int tdm_test_trace_row(const char *line, char action[16], unsigned long long *id,
                                     unsigned long long *size)
{
    unsigned long long t;
    return line[0] != '#' && sscanf(line, "%15[^,],%llu,%llu,%llu", action, &t, id, size) == 4;
}

/* Calls fn(path, name, ctx) for each *.csv file in dir; returns how many,
 * -1 when dir cannot be opened. */
static inline int tdm_test_each_trace(const char *dir,
                                      void (*fn)(const char *path, const char *name,
                                                 void *ctx),
                                      void *ctx)
{
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return -1;
    int traces = 0;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".csv") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        fn(path, e->d_name, ctx);
        traces++;
    }
    closedir(dp);
    return traces;
}

#endif
