/* bench/cachegrind.h: the benches' --instructions modes (hook_overhead,
 * replay): a child that runs this program again under valgrind's
 * cachegrind, with no cache model, for its count of instructions, and the
 * reading of that count from cachegrind's summary.  Header-only: each
 * bench is a program of its own. */
#ifndef TDM_BENCH_CACHEGRIND_H
#define TDM_BENCH_CACHEGRIND_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* In a forked child whose stderr the parent reads: runs this program with
 * args (NULL-terminated, at most 8) under cachegrind.  Returns only when
 * it cannot (the caller _exit()s). */
static inline void cachegrind_exec_self(const char *const args[])
{
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return;
    self[len] = 0;
    const char *argv[16] = {"valgrind", "--tool=cachegrind", "--cache-sim=no",
                            "--cachegrind-out-file=/dev/null", self};
    int n = 5;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    execvp("valgrind", (char *const *)argv);
}

/* The instructions in cachegrind's summary ("I   refs:      1,234,567"),
 * or -1 when there is none. */
static inline double cachegrind_irefs(const char *text)
{
    const char *at = strstr(text, "I   refs:");
    if (!at)
        at = strstr(text, "I refs:");
    if (!at)
        return -1;
    double v = 0;
    for (at = strchr(at, ':') + 1; *at; at++)
        if (*at >= '0' && *at <= '9')
            v = v * 10 + (*at - '0');
        else if (*at != ',' && *at != ' ')
            break;
    return v;
}

#endif
