/* tests/hooks/cuda/rt_app.h: between rt_app.c and rt_app_ptsz.c. */
#ifndef TDM_TESTS_RT_APP_H
#define TDM_TESTS_RT_APP_H

/* Prints "WHAT -> CODE" on stdout. */
void app_report(const char *what, int code);
/* cudaMallocAsync / cudaFreeAsync on stream 0 from code built with
 * --default-stream per-thread (the _ptsz entry points). */
void *app_alloc_per_thread_stream(void);
void app_free_per_thread_stream(void *p);

#endif
