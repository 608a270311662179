/* viewer-export/cli/cli_stderr.c: the tool's standard error, through one
 * filter that escapes control characters (cli.h, tdm__cli_safe_stderr).
 *
 * Error messages quote their input: file names, a CSV field, a pickle's
 * string, a reader's message.  A crafted input could otherwise make a
 * message carry terminal escape sequences (recolour, retitle, clear or
 * rewrite the screen).  Escaping at the one sink covers every message,
 * the ones written later included, instead of each call site.
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

static void put_all(const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(STDERR_FILENO, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere left to say it */
        buf += w;
        n -= (size_t)w;
    }
}

size_t tdm__cli_escape_controls(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 9 <= cap; i++) {
        unsigned char b = (unsigned char)in[i];
        unsigned char next = i + 1 < n ? (unsigned char)in[i + 1] : 0;
        if (b == 0xc2 && next >= 0x80 && next <= 0x9f) { /* U+0080..U+009F: C1 controls */
            o += tdm__hex_escape(out + o, b);
            o += tdm__hex_escape(out + o, next);
            i++;
        } else if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) {
            o += tdm__hex_escape(out + o, b);
        } else {
            out[o++] = (char)b;
        }
    }
    return o;
}

static ssize_t filtered_write(void *cookie, const char *buf, size_t n)
{
    (void)cookie;
    char out[1024];
    for (size_t done = 0; done < n;) {
        /* At most 4 bytes out per byte in; a C1 pair is not split. */
        size_t take = n - done < 200 ? n - done : 200;
        if (take < n - done && (unsigned char)buf[done + take - 1] == 0xc2)
            take++;
        put_all(out, tdm__cli_escape_controls(buf + done, take, out, sizeof out));
        done += take;
    }
    return (ssize_t)n;
}

void tdm__cli_safe_stderr(void)
{
    cookie_io_functions_t io = {.write = filtered_write};
    FILE *f = fopencookie(NULL, "w", io);
    if (!f)
        return; /* messages still go out, unfiltered */
    /* Unbuffered: each message is one write, in order with anything a
     * child process writes to the same descriptor, and nothing waits in a
     * buffer when a forked child ends with _exit. */
    setvbuf(f, NULL, _IONBF, 0);
    stderr = f;
}
