/* viewer-export/cli/cli_stderr.c: the tool's standard error, through one
 * filter that escapes control characters (cli.h, tdm__cli_safe_stderr).
 *
 * Error messages quote their input: file names, a CSV field, a pickle's
 * string, a reader's message.  A crafted input could otherwise make a
 * message carry terminal escape sequences (recolour, retitle, clear or
 * rewrite the screen).  Escaping at the one sink covers every message,
 * the ones written later included, instead of each call site.  The
 * text commands' standard output (summary's command line, host,
 * metadata, frame and file names) goes through the same filter.
 *
 * State: stderr itself, replaced once at start; the tool is single
 * threaded. */
#define _GNU_SOURCE /* fopencookie */
#include "cli.h"
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* 0, or -1 with errno set (a full disk: the command says so, exit 4). */
static int put_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The bytes of a UTF-8 sequence cut by the end of one write, kept for
 * the next (per stream: stderr, stdout). */
typedef struct held {
    int fd;
    int error; /* errno of the first failed write, for tdm__cli_flush */
    size_t n;
    char b[4];
} held;

static ssize_t filtered_write(void *cookie, const char *buf, size_t n)
{
    held *h = cookie;
    char in[256], out[1024];
    for (size_t done = 0; done < n;) {
        size_t take = n - done < sizeof in - h->n ? n - done : sizeof in - h->n;
        memcpy(in, h->b, h->n);
        memcpy(in + h->n, buf + done, take);
        size_t len = h->n + take, used;
        size_t o = tdm__escape_text(in, len, out, sizeof out, 1, 0, &used);
        h->n = len - used; /* at most 3: an incomplete sequence */
        memcpy(h->b, in + used, h->n);
        done += take;
        if (put_all(h->fd, out, o) != 0) {
            if (!h->error)
                h->error = errno;
            return -1;
        }
    }
    return (ssize_t)n;
}

static int filtered_close(void *cookie)
{
    held *h = cookie;
    char out[16];
    size_t used;
    int rc = put_all(h->fd, out, tdm__escape_text(h->b, h->n, out, sizeof out, 1, 1, &used));
    h->n = 0;
    return rc;
}

static FILE *filtered(held *h, int mode)
{
    cookie_io_functions_t io = {.write = filtered_write, .close = filtered_close};
    FILE *f = fopencookie(h, "w", io);
    if (f)
        setvbuf(f, NULL, mode, mode == _IONBF ? 0 : BUFSIZ);
    return f;
}

void tdm__cli_safe_stderr(void)
{
    static held h = {.fd = STDERR_FILENO};
    /* Unbuffered: each message is one write, in order with anything a
     * child process writes to the same descriptor, and nothing waits in a
     * buffer when a forked child ends with _exit. */
    FILE *f = filtered(&h, _IONBF);
    if (f) /* else messages still go out, unfiltered */
        stderr = f;
}

static held out_held = {.fd = STDOUT_FILENO};

int tdm__cli_stdout_error(void)
{
    return out_held.error;
}

void tdm__cli_safe_stdout(void)
{
    held *h = &out_held;
    fflush(stdout);
    /* Line buffered: a report line is one write, as on a terminal. */
    FILE *f = filtered(h, _IOLBF);
    if (f)
        stdout = f;
}
