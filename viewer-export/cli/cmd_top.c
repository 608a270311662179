/* viewer-export/cli/cmd_top.c: `tidemark top [PID|SPILL|DIR]`: a live
 * view of recording processes, read from their spill files (docs/live.md,
 * top.h): on a terminal a frame redrawn every second until `q`; --once
 * one frame; --openmetrics the figures as OpenMetrics text, once or, with
 * --every and -o, rewritten into a file (a temporary moved over it) until
 * interrupted.
 *
 * The watched programs are never touched: their files are only read.
 * The terminal: on a tty the view takes the alternate screen, hides the
 * cursor and reads keys without waiting for a newline; all of it is put
 * back on `q`, on SIGINT, SIGTERM and SIGHUP (they only set a flag that
 * ends the loop), and at exit.  State: that terminal state and the flag.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "top.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common.h" /* tdm__escape_text */

#define CMD "top"

static const tdm_cli_option options[] = {
    {.name = "once", .code = '1',
     .help = "one frame, then exit (no terminal escapes unless\n"
             "standard output is a terminal)"},
    {.name = "openmetrics", .code = 'm',
     .help = "the figures as OpenMetrics text (gauges per device and\n"
             "category, labelled host, rank, job, pid, device)"},
    {.name = "every", .code = 'e', .has_arg = required_argument, .metavar = "DURATION",
     .help = "refresh every DURATION (1s, 500ms, 15s, 2m; default 1s);\n"
             "with --openmetrics -o, rewrite the file that often until\n"
             "interrupted"},
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "FILE",
     .help = "with --openmetrics: write FILE (a temporary moved over\n"
             "it, so a reader never sees half of it), replacing it"},
    TDM_CLI_HELP_ROW("this text"),
    {0},
};

const tdm_cli_spec tdm__cli_top_spec = {
    .usage = "usage: tidemark top [OPTIONS] [PID|SPILL|DIR]\n"
             "\n"
             "A live view of programs while they record, read from the spill files\n"
             "the recorder keeps (docs/spill.md), without signalling, pausing or\n"
             "otherwise touching them: per device, bytes allocated and reserved now\n"
             "and their peaks, bytes by category, the last minute as a plot, and the\n"
             "sites holding the most now; redrawn every second, q to quit.\n"
             "\n"
             "  PID     that process (its spill file, found from /proc/PID/maps or the\n"
             "          spill folder)\n"
             "  SPILL   that spill file\n"
             "  DIR     the spill files in DIR, or those of the `tidemark run` writing\n"
             "          its snapshots into DIR\n"
             "  (none)  every recording process of this user on this host\n"
             "\n"
             "options:\n",
    .options = {options, 20},
    .after = "\n"
             "Exit codes: 0 ok, 1 usage error, 2 no such process, no spill file, or a\n"
             "spill file that cannot be read, 4 internal error (cannot write FILE).\n",
};

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static struct termios saved_tty;
static int tty_raw, screen_taken;

static void terminal_restore(void)
{
    if (screen_taken) {
        fputs("\033[?25h\033[?1049l", stdout);
        fflush(stdout);
        screen_taken = 0;
    }
    if (tty_raw) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
        tty_raw = 0;
    }
}

static void terminal_take(void)
{
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tty) == 0) {
        struct termios raw = saved_tty;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* keys at once, unechoed; ^C still signals */
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
            tty_raw = 1;
    }
    fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
    screen_taken = 1;
    atexit(terminal_restore);
}

/* The terminal's height now (it may be resized), 0 when unknown. */
static unsigned terminal_rows(void)
{
    struct winsize ws;
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_row : 0;
}

static void catch_stops(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: the wait returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Waits `ms`, or less when a key comes: 1 when it was q (or Q), else 0. */
static int wait_for_quit(long ms)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L)
        end.tv_sec++, end.tv_nsec -= 1000000000L;
    for (;;) {
        if (stop_requested)
            return 1;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = (end.tv_sec - now.tv_sec) * 1000L + (end.tv_nsec - now.tv_nsec) / 1000000L;
        if (left <= 0)
            return 0;
        int r = poll(&p, tty_raw ? 1 : 0, (int)left);
        if (r > 0) {
            char c;
            ssize_t got = read(STDIN_FILENO, &c, 1);
            if (got == 1 && (c == 'q' || c == 'Q'))
                return 1;
            if (got <= 0)
                p.fd = -1; /* (end of input: nothing more to read) */
        }
    }
}

/* "1s", "500ms", "15s", "2m", "1.5" (seconds) into milliseconds; -1 when
 * it is none of those or under 100 ms. */
static long parse_duration(const char *text)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v > 0) || !isfinite(v))
        return -1;
    double ms = strcmp(end, "ms") == 0                    ? v
                : strcmp(end, "s") == 0 || *end == '\0' ? v * 1000
                : strcmp(end, "m") == 0 || strcmp(end, "min") == 0 ? v * 60000
                                                                    : -1;
    if (ms < 100 || ms > 86400000.0)
        return -1;
    return (long)ms;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct reading {
    tdm_top_process *procs;
    size_t n;
    char **failed; /* one escaped line each */
    size_t nfailed;
    int ended;     /* every watched process has ended */
} reading;

static void reading_free(reading *r)
{
    for (size_t i = 0; i < r->n; i++)
        tdm__top_process_free(&r->procs[i]);
    for (size_t i = 0; i < r->nfailed; i++)
        free(r->failed[i]);
    free(r->procs);
    free(r->failed);
    memset(r, 0, sizeof *r);
}

static int add_failed(reading *r, const char *why)
{
    char **grown = realloc(r->failed, (r->nfailed + 1) * sizeof *grown);
    if (!grown)
        return -1;
    r->failed = grown;
    char buf[1024];
    size_t used, n = tdm__escape_text(why, strlen(why), buf, sizeof buf - 1, 0, 1, &used);
    buf[n] = '\0';
    if (!(r->failed[r->nfailed] = malloc(n + sizeof "tidemark top: ")))
        return -1;
    snprintf(r->failed[r->nfailed++], n + sizeof "tidemark top: ", "tidemark top: %s", buf);
    return 0;
}

/* Reads every source.  TDM_EXIT_OK, TDM_EXIT_BAD_INPUT when one could
 * not be read (said in r->failed), TDM_EXIT_TOOL_ERROR out of memory. */
static int read_all(tdm_top_cache *cache, tdm_top_sources *src, int sites, reading *r,
                    uint64_t t)
{
    int rc = TDM_EXIT_OK;
    r->procs = calloc(src->count + 1, sizeof *r->procs);
    if (!r->procs)
        return TDM_EXIT_TOOL_ERROR;
    r->ended = src->count > 0;
    for (size_t i = 0; i < src->count; i++) {
        tdm_top_source *s = &src->v[i];
        int was_alive = s->alive;
        s->alive = tdm__top_process_maps(s->pid, s->path);
        char why[512];
        tdm_status st = tdm__top_read(cache, s, t, sites, &r->procs[r->n], why, sizeof why);
        if (st == TDM_OK) {
            r->n++;
        } else if (was_alive && !s->alive) {
            /* It ended meanwhile, and a normal exit removes its file. */
            snprintf(why, sizeof why, "process %lld ended", (long long)s->pid);
            if (add_failed(r, why) != 0)
                return TDM_EXIT_TOOL_ERROR;
        } else {
            if (add_failed(r, why) != 0)
                return TDM_EXIT_TOOL_ERROR;
            rc = st == TDM_HOST_OUT_OF_MEMORY ? TDM_EXIT_TOOL_ERROR : TDM_EXIT_BAD_INPUT;
        }
        r->ended &= !s->alive;
    }
    return rc;
}

static int write_metrics_file(const char *path, const reading *r)
{
    tdm__out_file o;
    FILE *f = tdm__cli_output_open(CMD, path, &o);
    if (!f)
        return TDM_EXIT_TOOL_ERROR;
    tdm__top_metrics_print(f, r->procs, r->n);
    int e = tdm__cli_output_finish(&o, f, 1, 1);
    if (e != 0) {
        fprintf(stderr, "tidemark %s: cannot write %s: %s\n", CMD, path,
                e > 0 ? tdm__out_strerror(e) : "write failed");
        return TDM_EXIT_TOOL_ERROR;
    }
    return TDM_EXIT_OK;
}

typedef struct top_options {
    const char *operand, *output;
    int once, openmetrics;
    long every_ms;
    int every_given;
} top_options;

/* Whether the operand names a fixed set (a pid, a file) or a set that
 * changes as processes start and end (none, a folder). */
static int refind_each_time(const char *operand)
{
    if (!operand)
        return 1;
    size_t digits = strspn(operand, "0123456789");
    return !(digits && !operand[digits]) && tdm__cli_is_dir_target(operand);
}

static int run(const top_options *o)
{
    tdm_top_sources src = {0};
    int rc = tdm__top_find(CMD, o->operand, &src, stderr);
    if (rc != TDM_EXIT_OK) {
        tdm__top_sources_free(&src);
        return rc;
    }
    int refind = refind_each_time(o->operand);
    int live_view = !o->once && !o->openmetrics && isatty(STDOUT_FILENO);
    int loop = !o->once && (!o->openmetrics || o->every_given);
    tdm_top_cache *cache = tdm__top_cache_new();
    if (!cache) {
        tdm__top_sources_free(&src);
        return TDM_EXIT_TOOL_ERROR;
    }
    if (loop)
        catch_stops();
    if (live_view)
        terminal_take();
    int ended = 0;
    for (int first = 1;; first = 0) {
        if (!first && refind) {
            tdm_top_sources again = {0};
            /* (Quietly: while watching, no process is a state, not an error.) */
            int found = tdm__top_find(CMD, o->operand, &again, NULL);
            if (found == TDM_EXIT_OK || found == TDM_EXIT_BAD_INPUT) {
                tdm__top_sources_free(&src);
                src = again;
            } else {
                tdm__top_sources_free(&again);
            }
            tdm__top_cache_keep(cache, &src);
        }
        uint64_t t = now_ns();
        reading r = {0};
        int read_rc = read_all(cache, &src, !o->openmetrics, &r, t);
        if (read_rc == TDM_EXIT_TOOL_ERROR) {
            reading_free(&r);
            rc = read_rc;
            break;
        }
        if (o->openmetrics && o->output) {
            int w = write_metrics_file(o->output, &r);
            if (w != TDM_EXIT_OK)
                rc = w;
        } else if (o->openmetrics) {
            tdm__top_metrics_print(stdout, r.procs, r.n);
        } else if (live_view || r.n || !r.nfailed) {
            /* A live view shows what it could not read in the frame; a
             * frame for a script says it on stderr, and is not printed
             * when nothing could be read. */
            tdm__top_frame_print(stdout, r.procs, r.n, (const char *const *)r.failed,
                                 live_view ? r.nfailed : 0, live_view,
                                 live_view ? terminal_rows() : 0, t);
        }
        if (!live_view)
            for (size_t i = 0; i < r.nfailed; i++)
                fprintf(stderr, "%s\n", r.failed[i]);
        if (!loop)
            rc = tdm__exit_worse(rc, read_rc);
        ended = r.ended && !refind;
        reading_free(&r);
        if (!loop || rc == TDM_EXIT_TOOL_ERROR || ended)
            break;
        if (!live_view && !o->openmetrics)
            fputc('\n', stdout); /* (between the frames of a plain stream) */
        fflush(stdout);
        if (wait_for_quit(o->every_ms))
            break;
    }
    terminal_restore();
    /* The live view's last frame went with the alternate screen. */
    if (live_view && ended)
        fprintf(stderr, "tidemark %s: the watched process%s ended\n", CMD,
                src.count == 1 ? "" : "es");
    tdm__top_cache_free(cache);
    tdm__top_sources_free(&src);
    return tdm__cli_flush(CMD, rc);
}

int tdm__cli_top(int argc, char **argv)
{
    top_options o = {.every_ms = 1000};
    int c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, "top", argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case '1':
            o.once = 1;
            break;
        case 'm':
            o.openmetrics = 1;
            break;
        case 'e':
            if ((o.every_ms = parse_duration(optarg)) < 0)
                return tdm__cli_usage(CMD, "--every wants a duration of 100ms or more "
                                           "(1s, 500ms, 15s, 2m), not '%s'", optarg);
            o.every_given = 1;
            break;
        case 'o':
            o.output = optarg;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (optind < argc)
        o.operand = argv[optind++];
    if (optind < argc)
        return tdm__cli_usage(CMD, "one process, spill file or folder at a time (got '%s' "
                                   "and '%s')", o.operand, argv[optind]);
    if (o.output && !o.openmetrics)
        return tdm__cli_usage(CMD, "-o writes OpenMetrics text: give --openmetrics too");
    if (o.once && o.every_given)
        return tdm__cli_usage(CMD, "--once and --every: one frame, or one every DURATION?");
    if (o.output) {
        int rc = tdm__cli_output_check(CMD, o.output, 1, 1);
        if (rc != TDM_EXIT_OK)
            return rc;
    }
    return run(&o);
}
