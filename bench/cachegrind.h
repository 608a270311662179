/* bench/cachegrind.h: the benches' --instructions modes (hook_overhead,
 * replay): a child that runs this program again under valgrind's
 * cachegrind, with no cache model, for its count of instructions, and the
 * reading of that count from cachegrind's summary.  Header-only: each
 * bench is a program of its own. */
#ifndef TDM_BENCH_CACHEGRIND_H
#define TDM_BENCH_CACHEGRIND_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

/* Runs this program with args under cachegrind in a child, its stdout
 * discarded, with env ("NAME=VALUE" strings, NULL-terminated; may be NULL)
 * added to its environment: the instructions it executed, or -1 when it
 * could not run or exited with a status other than 0. */
static inline double cachegrind_count_self(const char *const args[], const char *const env[])
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], STDERR_FILENO); /* cachegrind's summary */
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        cachegrind_exec_self(args);
        _exit(127);
    }
    close(fd[1]);
    static char buf[1 << 16];
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? cachegrind_irefs(buf) : -1;
}

#endif
