/* viewer-export/import/load.c: reading a file a command is given (load.h):
 * a .tdm snapshot through snapshot's reader, or a format of the import
 * table imported in memory, then its analysis model; a directory stands
 * for the one snapshot it holds (listed as ranks.c lists directories).
 *
 * State: the list of the snapshots imported and not yet freed, with the
 * free function of each (tdm__input_snap_free); the commands are single
 * threaded. */
#define _GNU_SOURCE /* O_TMPFILE */
#include "load.h"
#include "import_formats.h"
#include "merge_torch.h"
#include "ranks.h"
#include "stack_display.h"

#include "format_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char tdm_signature[TDM_SNAP_SIGNATURE_LEN] = TDM_SNAP_SIGNATURE;

/* Nonzero when a file starting with `head` (its first `n` bytes, fewer
 * only when the file is that short) may be read: a .tdm signature, or
 * the start of one (the reader then says where the file is cut), or a
 * format of the import table.  So a large file of something else is
 * refused after TDM_IMPORT_SNIFF_BYTES bytes, not read whole. */
static int head_is_known(const unsigned char *head, size_t n)
{
    size_t k = n < sizeof tdm_signature ? n : sizeof tdm_signature;
    return memcmp(head, tdm_signature, k) == 0 || tdm__import_format_detect(head, n) != NULL;
}

static void say_unknown(const char *cmd, const char *shown)
{
    fprintf(stderr, "tidemark %s: %s: not a snapshot (at byte 0: no .tdm signature, and "
                    "not a format tidemark imports:", cmd, shown);
    for (size_t i = 0; i < tdm__import_format_count; i++)
        fprintf(stderr, " %s", tdm__import_formats[i].name);
    fputs(")\n", stderr);
}

/* Reads up to `cap` bytes, fewer only at the end of the input.  Returns
 * the count, or -1 with errno set. */
static ssize_t read_head(int fd, unsigned char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        n += (size_t)got;
    }
    return (ssize_t)n;
}

static int write_all(int fd, const unsigned char *buf, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, buf + off, n - off);
        if (w < 0 && errno != EINTR)
            return errno;
        if (w > 0)
            off += (size_t)w;
    }
    return 0;
}

/* Copies a stream (standard input, a pipe, a FIFO) into an unlinked file
 * of its own in TMPDIR, so that the readers may look at its start and
 * then read it whole, as they do a file.  Unless `any_content`, the
 * stream's first bytes must be a format tidemark reads: anything else is
 * refused before the rest is read.  A stream that starts with the .tdm
 * signature is checked as it is copied (format_stream.h): at the first
 * byte that cannot belong to a snapshot the copy stops, one buffer past
 * it at most, and the reader says where and why, so junk after a valid
 * start (an endless stream) never fills TMPDIR.  Returns the open descriptor (kept for
 * the life of the command), or -1 after saying why. */
static int spool(const char *cmd, const char *path, int any_content)
{
    const char *shown = tdm__input_operand_name(path);
    int in = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, path, strerror(errno));
        return -1;
    }
    static unsigned char buf[1 << 16];
    ssize_t head = read_head(in, buf, TDM_IMPORT_SNIFF_BYTES);
    if (head < 0) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, shown, strerror(errno));
        if (in != STDIN_FILENO)
            close(in);
        return -1;
    }
    if (!any_content && !head_is_known(buf, (size_t)head)) {
        say_unknown(cmd, shown);
        if (in != STDIN_FILENO)
            close(in);
        return -1;
    }
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    int fd = open(dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
    if (fd < 0) {
        char name[4096];
        snprintf(name, sizeof name, "%s/tidemark-input-XXXXXX", dir);
        fd = mkstemp(name);
        if (fd >= 0)
            unlink(name);
    }
    tdm__snap_stream check;
    tdm__snap_stream_init(&check);
    int is_tdm = head > 0 && memcmp(buf, tdm_signature,
                                    (size_t)head < sizeof tdm_signature ? (size_t)head
                                                                        : sizeof tdm_signature) == 0;
    int broken = is_tdm && tdm__snap_stream_feed(&check, buf, (size_t)head) != 0;
    int e = fd < 0 ? errno : write_all(fd, buf, (size_t)head);
    while (!e && !broken) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            e = n < 0 ? errno : 0;
            break;
        }
        broken = is_tdm && tdm__snap_stream_feed(&check, buf, (size_t)n) != 0;
        e = write_all(fd, buf, (size_t)n);
    }
    if (in != STDIN_FILENO)
        close(in);
    if (e) {
        fprintf(stderr, "tidemark %s: cannot hold %s in %s: %s\n", cmd, shown, dir, strerror(e));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* A regular file's first bytes, checked as spool() checks a stream's;
 * also says early, and by its cause, that the file cannot be opened
 * (permission denied) rather than leaving a reader to say "input/output
 * error". */
static int check_head(const char *cmd, const char *path, int any_content)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, path, strerror(errno));
        return TDM_EXIT_BAD_INPUT;
    }
    unsigned char head[TDM_IMPORT_SNIFF_BYTES];
    ssize_t n = read_head(fd, head, sizeof head);
    int e = errno;
    close(fd);
    if (n < 0) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, path, strerror(e));
        return TDM_EXIT_BAD_INPUT;
    }
    if (!any_content && !head_is_known(head, (size_t)n)) {
        say_unknown(cmd, path);
        return TDM_EXIT_BAD_INPUT;
    }
    return TDM_EXIT_OK;
}

/* The streams copied so far (their copies' names and what the user
 * named), for tdm__input_shown; a command reads a handful of inputs. */
#define SPOOLED_MAX 64
static struct {
    char file[32];
    char *shown;
    int stdin_; /* the copy of standard input */
} spooled[SPOOLED_MAX];
static size_t spooled_n;

const char *tdm__input_shown(const char *file)
{
    for (size_t i = 0; file && i < spooled_n; i++)
        if (strcmp(spooled[i].file, file) == 0)
            return spooled[i].shown;
    return file;
}

const char *tdm__input_operand_name(const char *operand)
{
    return strcmp(operand, "-") == 0 ? "standard input" : operand;
}

int tdm__input_is_spooled(const char *file)
{
    return tdm__input_shown(file) != file;
}

int tdm__input_resolve(const char *cmd, const char *path, char **file)
{
    return tdm__input_resolve_as(cmd, path, file, 0);
}

int tdm__input_resolve_as(const char *cmd, const char *path, char **file, int any_content)
{
    *file = NULL;
    /* The readers say "input/output error"; the system says why. */
    struct stat st;
    int stream = strcmp(path, "-") == 0;
    if (!stream && stat(path, &st) != 0) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, path, strerror(errno));
        return TDM_EXIT_BAD_INPUT;
    }
    if (stream || S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)) {
        for (size_t i = 0; stream && i < spooled_n; i++)
            if (spooled[i].stdin_) {
                /* Read once already: a second `-` would read nothing. */
                fprintf(stderr, "tidemark %s: '-' is given twice; standard input can be "
                                "read once\n", cmd);
                return TDM_EXIT_USAGE;
            }
        int fd = spool(cmd, path, any_content);
        if (fd < 0)
            return TDM_EXIT_BAD_INPUT;
        char name[sizeof spooled[0].file];
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
        *file = strdup(name);
        if (!*file)
            return TDM_EXIT_TOOL_ERROR;
        if (spooled_n < SPOOLED_MAX &&
            (spooled[spooled_n].shown = strdup(tdm__input_operand_name(path))) != NULL) {
            spooled[spooled_n].stdin_ = stream;
            memcpy(spooled[spooled_n++].file, name, sizeof name);
        }
        return TDM_EXIT_OK;
    }
    if (!S_ISDIR(st.st_mode))
        return check_head(cmd, path, any_content);
    tdm_rank_paths found;
    char *one[] = {(char *)path};
    int rc = tdm__ranks_expand(cmd, one, 1, &found); /* says why it found none */
    if (rc == TDM_EXIT_OK && found.count == 1) {
        *file = found.paths[0];
        found.count = 0;
    } else if (rc == TDM_EXIT_OK) {
        fprintf(stderr, "tidemark %s: %s holds %zu snapshots; name the one to use (%s, %s%s)\n",
                cmd, path, found.count, found.paths[0], found.paths[1],
                found.count > 2 ? ", ..." : "");
        rc = TDM_EXIT_USAGE;
    }
    tdm__ranks_paths_free(&found);
    return rc;
}

int tdm__input_check_file(const char *cmd, const char *path)
{
    char *file;
    int rc = tdm__input_resolve(cmd, path, &file);
    free(file);
    return rc;
}

/* ---- imported snapshots ----------------------------------------------- */

typedef struct imported {
    tdm_snap *snap;
    void (*free)(tdm_snap *snap);
} imported;

static struct {
    imported *items;
    size_t n, cap;
} imports;

static int remember_import(tdm_snap *snap, void (*free_fn)(tdm_snap *))
{
    if (imports.n == imports.cap) {
        size_t cap = imports.cap ? 2 * imports.cap : 8;
        imported *grown = realloc(imports.items, cap * sizeof *grown);
        if (!grown)
            return -1;
        imports.items = grown;
        imports.cap = cap;
    }
    imports.items[imports.n++] = (imported){snap, free_fn};
    return 0;
}

void tdm__input_snap_free(tdm_snap *snap)
{
    if (!snap)
        return;
    tdm__stack_display_forget(snap);
    for (size_t i = 0; i < imports.n; i++) {
        if (imports.items[i].snap == snap) {
            imports.items[i].free(snap);
            imports.items[i] = imports.items[--imports.n];
            if (imports.n == 0) {
                free(imports.items);
                imports.items = NULL;
                imports.cap = 0;
            }
            return;
        }
    }
    tdm__snap_free(snap);
}

/* Where the reading's messages go: stderr as "tidemark CMD: ..." lines
 * (the commands), or, with `buf` set, the first message only into buf,
 * unprefixed (tdm__input_read_quiet: a library caller shows it). */
typedef struct say_to {
    const char *cmd;
    char *buf;
    size_t len;
} say_to;

__attribute__((format(printf, 2, 3))) static void say(say_to *to, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (to->buf) {
        if (to->len && !to->buf[0])
            vsnprintf(to->buf, to->len, fmt, ap);
    } else {
        fprintf(stderr, "tidemark %s: ", to->cmd);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

/* Imports `path` in memory when its first bytes are a format of the
 * import table.  Returns -1 when none recognizes it (it is then read as a
 * .tdm file), else a TDM_EXIT_* code (*snap set only on TDM_EXIT_OK). */
static int try_import(say_to *to, const char *path, tdm_snap **snap)
{
    const char *shown = tdm__input_shown(path);
    unsigned char head[TDM_IMPORT_SNIFF_BYTES];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1; /* the .tdm reader says why, the same way everywhere */
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    const tdm_import_format *fmt = tdm__import_format_detect(head, n);
    if (!fmt)
        return -1;
    char err[320] = "";
    tdm_snap *got = NULL;
    tdm_status s = fmt->read(path, &got, err, sizeof err);
    if (s == TDM_OK && got) {
        if (remember_import(got, fmt->free) == 0) {
            *snap = got;
            return TDM_EXIT_OK;
        }
        s = TDM_HOST_OUT_OF_MEMORY;
    }
    if (got)
        fmt->free(got);
    say(to, "%s: %s (importing it as %s)%s%s", shown,
        s == TDM_OK ? "import failed" : tdm_strerror(s), fmt->name, err[0] ? ": " : "", err);
    return s == TDM_HOST_OUT_OF_MEMORY || s == TDM_INTERNAL || s == TDM_OK
               ? TDM_EXIT_TOOL_ERROR
               : TDM_EXIT_BAD_INPUT;
}

/* One line when PyTorch's tensor history of the run sits unmerged beside
 * the snapshot (a run without `tidemark run`, or one killed before it
 * could merge): the snapshot alone shows PyTorch's segments only. */
static void note_unmerged_history(const char *cmd, const char *path, const tdm_snap *snap)
{
    size_t n = strlen(path);
    if (n <= 4 || strcmp(path + n - 4, ".tdm") != 0 || tdm__merge_torch_done(snap))
        return;
    char *pickle = tdm__merge_torch_pickle_path(path);
    if (pickle && access(pickle, F_OK) == 0)
        fprintf(stderr, "tidemark %s: note: %s holds the tensor history of %s's run; "
                        "'tidemark merge-torch %s' merges it in\n", cmd, pickle, path, path);
    free(pickle);
}

/* tdm__input_read_snapshot of a path that is not a directory. */
static int read_file(say_to *to, const char *path, tdm_snap **snap, int *truncated,
                     uint64_t *truncated_at)
{
    const char *shown = tdm__input_shown(path);
    int rc = try_import(to, path, snap);
    if (rc >= 0)
        return rc;

    tdm_read_error err;
    memset(&err, 0, sizeof err);
    tdm_status s = tdm__snap_read_file(path, 1, snap, &err);
    if (s == TDM_HOST_OUT_OF_MEMORY || s == TDM_INTERNAL) {
        say(to, "%s: %s", shown, tdm_strerror(s));
        return TDM_EXIT_TOOL_ERROR;
    }
    if (s != TDM_OK || !*snap) {
        if (err.message[0])
            say(to, "%s: %s at byte %" PRIu64 ": %s", shown, tdm_strerror(s), err.offset,
                err.message);
        else
            say(to, "%s: %s at byte %" PRIu64, shown, tdm_strerror(s), err.offset);
        if (*snap)
            tdm__snap_free(*snap);
        *snap = NULL;
        return TDM_EXIT_BAD_INPUT;
    }
    if (!to->buf)
        note_unmerged_history(to->cmd, path, *snap);
    if ((*snap)->complete)
        return TDM_EXIT_OK;

    /* A partial read: the reader may or may not have filled `err`; a strict
     * second read always says where the file stops. */
    if (!err.message[0]) {
        tdm_snap *again = NULL;
        tdm__snap_read_file(path, 0, &again, &err);
        if (again)
            tdm__snap_free(again);
    }
    *truncated = 1;
    *truncated_at = err.offset;
    const char *warn = to->buf ? "" : "warning: ";
    const char *rest = to->buf ? "" : "; showing what could be read";
    if (err.message[0])
        say(to, "%s%s is truncated at byte %" PRIu64 " (%s)%s", warn, shown, err.offset,
            err.message, rest);
    else
        say(to, "%s%s is truncated at byte %" PRIu64 "%s", warn, shown, err.offset, rest);
    return TDM_EXIT_BAD_INPUT;
}

/* read_file, then the stacks as every command shows them (demangled,
 * wrappers dropped: stack_display.h): the one place every command's
 * snapshots pass through. */
static int read_for_display(say_to *to, const char *path, tdm_snap **snap,
                            int *truncated, uint64_t *truncated_at)
{
    int rc = read_file(to, path, snap, truncated, truncated_at);
    if (!*snap)
        return rc;
    tdm_status s = tdm__stack_display_apply(*snap);
    if (s == TDM_OK)
        return rc;
    say(to, "%s: %s", tdm__input_shown(path), tdm_strerror(s));
    tdm__input_snap_free(*snap);
    *snap = NULL;
    return TDM_EXIT_TOOL_ERROR;
}

int tdm__input_read_quiet(const char *path, tdm_snap **snap, int *truncated,
                          uint64_t *truncated_at, char *msg, size_t msglen)
{
    char none[1];
    say_to to = {"", msg && msglen ? msg : none, msg && msglen ? msglen : sizeof none};
    to.buf[0] = '\0';
    *snap = NULL;
    *truncated = 0;
    *truncated_at = 0;
    return read_for_display(&to, path, snap, truncated, truncated_at);
}

int tdm__input_read_snapshot(const char *cmd, const char *path, tdm_snap **snap,
                           int *truncated, uint64_t *truncated_at)
{
    *snap = NULL;
    *truncated = 0;
    *truncated_at = 0;
    char *file;
    int rc = tdm__input_resolve(cmd, path, &file);
    if (rc == TDM_EXIT_OK) {
        say_to to = {cmd, NULL, 0};
        rc = read_for_display(&to, file ? file : path, snap, truncated, truncated_at);
    }
    free(file);
    return rc;
}

/* ---- inputs ------------------------------------------------------------- */

/* Frees the snapshot and model; the path stays valid. */
static void free_data(tdm_input *in)
{
    if (in->model)
        tdm__model_free(in->model);
    tdm__input_snap_free(in->snap);
    in->model = NULL;
    in->snap = NULL;
}

int tdm__input_load(const char *cmd, const char *path, tdm_input *in)
{
    memset(in, 0, sizeof *in);
    in->path = in->operand = path;
    int rc = tdm__input_resolve(cmd, path, &in->found);
    if (rc == TDM_EXIT_OK) {
        const char *file = in->found ? in->found : path;
        /* A stream's copy is read; reports name what the user named. */
        in->path = tdm__input_shown(file);
        say_to to = {cmd, NULL, 0};
        rc = read_for_display(&to, file, &in->snap, &in->truncated, &in->truncated_at);
    }
    if (!in->snap) {
        in->error = rc == TDM_EXIT_TOOL_ERROR ? "tidemark could not read it"
                    : rc == TDM_EXIT_USAGE    ? "a directory of several snapshots"
                                              : "missing, unreadable or corrupt";
        return rc;
    }
    tdm_status s = tdm__model_build(in->snap, &in->model);
    if (s != TDM_OK) {
        fprintf(stderr, "tidemark %s: %s: %s\n", cmd, in->path, tdm_strerror(s));
        free_data(in);
        in->error = "tidemark could not analyse it";
        return TDM_EXIT_TOOL_ERROR;
    }
    if (in->truncated)
        in->error = "truncated";
    return rc;
}

void tdm__input_free(tdm_input *in)
{
    free_data(in);
    if (in->found) {
        free(in->found);
        in->found = NULL;
        in->path = in->operand;
    }
}


const tdm_input_loader tdm__input_loader = {tdm__input_load, tdm__input_free};
