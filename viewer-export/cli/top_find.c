/* viewer-export/cli/top_find.c: which spill files `tidemark top`'s operand
 * stands for (top.h).
 *
 * A process's spill file is found the way the recorder names it
 * (docs/spill.md): in the default folder, tidemark-UID under $TMPDIR,
 * /dev/shm or /tmp, or in the folder of a `tidemark run` inside it
 * (run-PID-TIME-HOST, with a note "snapshots" naming its snapshot
 * folder); or, for a pid, among the files the process maps (a spill= of
 * its own).  A file is taken when it starts with a spill header; its
 * process is alive when /proc/PID/maps maps that file (device and inode),
 * which neither touches the file's lock nor the process.  No state, no
 * lock.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "format_spill.h"
#include "top.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The pid in the spill header of `path`; -1 when it has none (not a
 * spill file, unreadable). */
static int64_t header_pid(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    tdm_spill_header h;
    struct stat st;
    ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, &h, sizeof h, 0) : -1;
    close(fd);
    if (got != (ssize_t)sizeof h || memcmp(h.magic, TDM_SPILL_MAGIC, 8) != 0 || h.pid <= 0)
        return -1;
    return h.pid;
}

int tdm__top_process_maps(int64_t pid, const char *path)
{
    struct stat st;
    if (pid <= 0 || stat(path, &st) != 0)
        return 0;
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%lld/maps", (long long)pid);
    FILE *f = fopen(maps, "re");
    if (!f)
        return 0;
    char line[PATH_MAX + 256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) == 3)
            found = ino == (unsigned long long)st.st_ino && maj == major(st.st_dev) &&
                    min == minor(st.st_dev);
    }
    fclose(f);
    return found;
}

static int add(tdm_top_sources *s, const char *path, int64_t pid)
{
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->v[i].path, path) == 0)
            return 0;
    tdm_top_source *grown = realloc(s->v, (s->count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    s->v = grown;
    char *copy = strdup(path);
    if (!copy)
        return -1;
    s->v[s->count++] = (tdm_top_source){copy, pid, tdm__top_process_maps(pid, path)};
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* The spill files in `dir`, and with `runs` those in its run-* folders.
 * Only files of this user (the recorder makes them 0600 in a 0700
 * folder).  0, or -1 out of memory. */
static int scan_folder(const char *dir, int runs, tdm_top_sources *s)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            lstat(path, &st) != 0 || st.st_uid != getuid())
            continue;
        if (S_ISDIR(st.st_mode) && runs && strncmp(e->d_name, "run-", 4) == 0) {
            rc = scan_folder(path, 0, s);
        } else if (S_ISREG(st.st_mode) && ends_with(e->d_name, ".spill")) {
            int64_t pid = header_pid(path);
            if (pid > 0)
                rc = add(s, path, pid);
        }
    }
    closedir(d);
    return rc;
}

/* The default spill folders: the one this process's environment names,
 * and the others a recorded process with another TMPDIR may have used. */
static size_t default_folders(char out[][PATH_MAX], size_t max)
{
    size_t n = 0;
    char first[PATH_MAX];
    if (tdm__spill_default_folder(first, sizeof first) == 0)
        snprintf(out[n++], PATH_MAX, "%s", first);
    static const char *const bases[] = {"/dev/shm", "/tmp"};
    for (size_t b = 0; b < 2 && n < max; b++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/tidemark-%lu", bases[b], (unsigned long)getuid());
        int dup = 0;
        for (size_t i = 0; i < n; i++)
            dup |= strcmp(out[i], dir) == 0;
        if (!dup)
            snprintf(out[n++], PATH_MAX, "%s", dir);
    }
    return n;
}

/* Keeps the sources whose process is alive. */
static size_t keep_alive(tdm_top_sources *s)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->count; i++) {
        if (s->v[i].alive)
            s->v[kept++] = s->v[i];
        else
            free(s->v[i].path);
    }
    size_t ended = s->count - kept;
    s->count = kept;
    return ended;
}

#define SAY(f, ...) ((f) ? (void)fprintf((f), __VA_ARGS__) : (void)0)

static int oom(const char *cmd)
{
    fprintf(stderr, "tidemark %s: out of memory\n", cmd);
    return TDM_EXIT_TOOL_ERROR;
}

static int find_all(const char *cmd, tdm_top_sources *out, FILE *diag)
{
    char dirs[3][PATH_MAX];
    size_t n = default_folders(dirs, 3);
    for (size_t i = 0; i < n; i++)
        if (scan_folder(dirs[i], 1, out) != 0)
            return oom(cmd);
    keep_alive(out);
    if (out->count == 0) {
        SAY(diag, "tidemark %s: no recording process of this user on this host "
                        "(no live spill file in %s)\n", cmd, dirs[0]);
        return TDM_EXIT_BAD_INPUT;
    }
    return TDM_EXIT_OK;
}

static int find_pid(const char *cmd, const char *operand, tdm_top_sources *out, FILE *diag)
{
    long long pid = strtoll(operand, NULL, 10);
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%lld/maps", pid);
    FILE *f = pid > 0 ? fopen(maps, "re") : NULL;
    if (!f) {
        SAY(diag, "tidemark %s: no process %s%s\n", cmd, operand,
                errno == EACCES ? " of this user" : "");
        return TDM_EXIT_BAD_INPUT;
    }
    /* A spill= of its own is among the files it maps. */
    char line[PATH_MAX + 256];
    while (fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (!path)
            continue;
        path[strcspn(path, "\n")] = '\0';
        if (ends_with(path, " (deleted)"))
            continue;
        if (header_pid(path) == pid && add(out, path, pid) != 0) {
            fclose(f);
            return oom(cmd);
        }
    }
    fclose(f);
    if (out->count == 0) {
        char dirs[3][PATH_MAX];
        size_t n = default_folders(dirs, 3);
        tdm_top_sources all = {0};
        for (size_t i = 0; i < n; i++)
            if (scan_folder(dirs[i], 1, &all) != 0)
                return oom(cmd);
        for (size_t i = 0; i < all.count; i++)
            if (all.v[i].pid == pid && all.v[i].alive && add(out, all.v[i].path, pid) != 0) {
                tdm__top_sources_free(&all);
                return oom(cmd);
            }
        tdm__top_sources_free(&all);
    }
    keep_alive(out);
    if (out->count == 0) {
        SAY(diag, "tidemark %s: process %lld records no device memory here (no spill "
                        "file: not started under TIDEMARK_CONF or tidemark run, spill=off, "
                        "or nothing allocated yet)\n", cmd, pid);
        return TDM_EXIT_BAD_INPUT;
    }
    return TDM_EXIT_OK;
}

/* The run spill folders whose note names snapshot folder `dir`. */
static int find_run_folder(const char *dir, tdm_top_sources *out)
{
    char want[PATH_MAX];
    if (!realpath(dir, want))
        return 0;
    char dirs[3][PATH_MAX];
    size_t n = default_folders(dirs, 3);
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "run-", 4) != 0)
                continue;
            char note[PATH_MAX], noted[PATH_MAX] = "", real[PATH_MAX];
            if (snprintf(note, sizeof note, "%s/%s/snapshots", dirs[i], e->d_name) >=
                (int)sizeof note)
                continue;
            FILE *f = fopen(note, "re");
            if (!f)
                continue;
            size_t got = fread(noted, 1, sizeof noted - 1, f);
            fclose(f);
            noted[got] = '\0';
            if (realpath(noted, real) && strcmp(real, want) == 0) {
                int made = snprintf(note, sizeof note, "%s/%s", dirs[i], e->d_name);
                if (made < (int)sizeof note && scan_folder(note, 0, out) != 0) {
                    closedir(d);
                    return -1;
                }
            }
        }
        closedir(d);
    }
    return 0;
}

int tdm__top_find(const char *cmd, const char *operand, tdm_top_sources *out, FILE *diag)
{
    out->v = NULL;
    out->count = 0;
    if (!operand)
        return find_all(cmd, out, diag);
    size_t digits = strspn(operand, "0123456789");
    if (digits && !operand[digits])
        return find_pid(cmd, operand, out, diag);
    struct stat st;
    if (stat(operand, &st) != 0) {
        SAY(diag, "tidemark %s: %s: %s\n", cmd, operand, strerror(errno));
        return TDM_EXIT_BAD_INPUT;
    }
    if (!S_ISDIR(st.st_mode)) {
        /* One spill file: watched whether or not its process runs (a
         * file left by a killed one shows its last state). */
        int64_t pid = header_pid(operand);
        if (pid <= 0) {
            tdm_spill_data *d = NULL;
            tdm_read_error err = {0};
            tdm_status s = tdm__spill_read_live(operand, &d, &err, NULL);
            tdm__spill_data_free(d);
            SAY(diag, "tidemark %s: %s: %s\n", cmd, operand,
                    s == TDM_OK ? "not a spill file of a recording process" : err.message);
            return TDM_EXIT_BAD_INPUT;
        }
        return add(out, operand, pid) == 0 ? TDM_EXIT_OK : oom(cmd);
    }
    if (scan_folder(operand, 1, out) != 0 || find_run_folder(operand, out) != 0)
        return oom(cmd);
    size_t found = out->count, ended = keep_alive(out);
    if (out->count == 0) {
        if (found)
            SAY(diag, "tidemark %s: %s: no process recording; %zu spill file(s) of "
                            "processes that ended (tidemark recover makes snapshots of "
                            "them)\n", cmd, operand, ended);
        else
            SAY(diag, "tidemark %s: %s: no spill file of a recording process (a spill "
                            "folder, or a tidemark run snapshot folder while it runs)\n",
                    cmd, operand);
        return TDM_EXIT_BAD_INPUT;
    }
    return TDM_EXIT_OK;
}

void tdm__top_sources_free(tdm_top_sources *s)
{
    for (size_t i = 0; i < s->count; i++)
        free(s->v[i].path);
    free(s->v);
    s->v = NULL;
    s->count = 0;
}
