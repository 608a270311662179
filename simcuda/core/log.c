/* simcuda/core/log.c: the platform's diagnostics.
 *
 * SIMCUDA_LOG=1 prints what the platform does not simulate (each
 * unimplemented entry point once, unknown attributes) on stderr, one line
 * each, prefixed "simcuda:".  SIMCUDA_TRACE=FILE appends one line per
 * device-memory event ("malloc DEV PTR SIZE", "free ...", "map ...",
 * "unmap ...", "oom ..."), the platform's own view that tests hold against
 * PyTorch's and tidemark's figures.  Lines are written with one write(2)
 * each (O_APPEND), so threads and processes do not interleave within a line.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_log = -1;
static int g_trace_fd = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init(void) {
  const char *l = getenv("SIMCUDA_LOG");
  g_log = l && *l && strcmp(l, "0") != 0;
  const char *t = getenv("SIMCUDA_TRACE");
  if (t && *t) {
    g_trace_fd = open(t, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g_trace_fd < 0)
      fprintf(stderr, "simcuda: SIMCUDA_TRACE: cannot open %s\n", t);
  }
}

int tdm__simcuda_log_enabled(void) {
  pthread_once(&g_once, init);
  return g_log;
}

static void vline(int fd, const char *prefix, const char *fmt, va_list ap) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%s", prefix);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  if (m < 0)
    return;
  n += m;
  if ((size_t)n > sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(fd, buf, (size_t)n);
  (void)w;
}

void tdm__simcuda_log(const char *fmt, ...) {
  if (!tdm__simcuda_log_enabled())
    return;
  va_list ap;
  va_start(ap, fmt);
  vline(2, "simcuda: ", fmt, ap);
  va_end(ap);
}

void tdm__simcuda_trace(const char *fmt, ...) {
  pthread_once(&g_once, init);
  if (g_trace_fd < 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vline(g_trace_fd, "", fmt, ap);
  va_end(ap);
}

int tdm__simcuda_unsupported(const char *name, int *once, int code) {
  if (!__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
    tdm__simcuda_log("%s is not simulated; it returns %d (not supported)", name, code);
  return code;
}

uint64_t tdm__simcuda_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
