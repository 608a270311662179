/* viewer-export/cli/run_spills.c: the spill files of `tidemark run`'s
 * processes (docs/spill.md).  Run gives its command a spill folder of its
 * own, DEFAULT/run-PID-TIME-HOST (DEFAULT the library's default place,
 * tidemark-UID under $TMPDIR or /dev/shm), so that once the command has
 * ended every spill file still there is one of its processes that ended
 * without writing its snapshot (killed with SIGKILL, by the out-of-memory
 * killer, a crash, or `_exit`): run recovers each into the snapshot folder
 * itself, says where, and removes the spill (its memory in /dev/shm goes
 * with it).  A spill whose process still holds it (its flock) is left,
 * and said.
 *
 * The folder notes the snapshot folder (a file "snapshots"): when run
 * itself was killed (its command dies with it), the next run, finding
 * the folder of a run whose pid is gone, recovers it there and says so.
 *
 * Invariant: a spill file is removed only once its history is in a
 * snapshot written to the snapshot folder; a recovery that fails leaves
 * it, and says how to try again.  No state, no locks (flock only probes;
 * a stale folder is claimed by renaming its note).
 */
#define _GNU_SOURCE /* asprintf */
#include "cli.h"
#include "format_spill.h" /* tdm__spill_default_folder */
#include "recover.h"
#include "run_spills.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

/* "A/B", malloc'd; NULL when out of memory (asprintf leaves its pointer
 * undefined then: never freed by mistake this way). */
static char *join(const char *a, const char *b)
{
    char *out;
    return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

/* In each run's spill folder: the snapshot folder it recovers into, so
 * that a later run can finish the job when this one was killed. */
#define DEST_NAME "snapshots"

/* The host name as a folder name in TIDEMARK_CONF holds it (no '/', ',',
 * blank or '%'). */
static void this_host(char *out, size_t len)
{
    if (gethostname(out, len - 1) != 0)
        snprintf(out, len, "host");
    out[len - 1] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '/' || *p == ',' || *p == ' ' || *p == '%')
            *p = '_';
}

int tdm__run_spill_dir_make(char *out, size_t len)
{
    char base[PATH_MAX];
    struct stat st;
    out[0] = '\0';
    if (tdm__spill_default_folder(base, sizeof base) != 0)
        return -1;
    if (mkdir(base, 0700) != 0 && errno != EEXIST)
        return -1;
    /* The library refuses a folder that is not this user's alone; so
     * does run (its spills would go elsewhere, and none be found). */
    if (lstat(base, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 0077))
        return -1;
    char host[64];
    this_host(host, sizeof host);
    int n = snprintf(out, len, "%s/run-%ld-%ld-%s", base, (long)getpid(), (long)time(NULL),
                     host);
    if (n < 0 || (size_t)n >= len || strpbrk(out, ",")) {
        out[0] = '\0';
        return -1;
    }
    if (mkdir(out, 0700) != 0) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

int tdm__run_spill_dir_note(const char *spill_dir, const char *dir)
{
    char *path = join(spill_dir, DEST_NAME);
    if (!path)
        return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    free(path);
    if (fd < 0)
        return -1;
    size_t n = strlen(dir);
    int ok = write(fd, dir, n) == (ssize_t)n;
    return close(fd) == 0 && ok ? 0 : -1;
}

/* The pid in a spill's name: "STEM-PID.spill"; 0 when it has none. */
static long spill_pid(const char *name)
{
    size_t n = strlen(name);
    if (n < 7 || strcmp(name + n - 6, ".spill") != 0)
        return 0;
    const char *end = name + n - 6, *p = end;
    while (p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p == end || p == name || p[-1] != '-')
        return 0;
    return strtol(p, NULL, 10);
}

/* Whether a process still holds the spill file at `path` (its owner keeps
 * an exclusive flock on it for its life). */
static int held(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    int busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return busy;
}

/* DIR/STEM.tdm, or DIR/STEM-recovered[-N].tdm when that name is taken. */
static char *recovered_name(const char *dir, const char *name)
{
    size_t stem = strlen(name) - 6; /* without ".spill" */
    char *out = NULL;
    struct stat st;
    for (int k = 0; k < 100; k++) {
        free(out);
        out = NULL;
        int n = k == 0   ? asprintf(&out, "%s/%.*s.tdm", dir, (int)stem, name)
                : k == 1 ? asprintf(&out, "%s/%.*s-recovered.tdm", dir, (int)stem, name)
                         : asprintf(&out, "%s/%.*s-recovered-%d.tdm", dir, (int)stem, name, k);
        if (n < 0)
            return NULL;
        if (lstat(out, &st) != 0 && errno == ENOENT)
            return out;
    }
    free(out);
    return NULL;
}

size_t tdm__run_spills_sweep(const char *spill_dir, const char *dir)
{
    DIR *d = opendir(spill_dir);
    if (!d)
        return 0;
    size_t recovered = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        struct stat st;
        char *path = NULL;
        if (name[0] == '.' || n < 7 || strcmp(name + n - 6, ".spill") != 0 ||
            !(path = join(spill_dir, name)))
            continue;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
            free(path);
            continue;
        }
        long pid = spill_pid(name);
        if (held(path)) {
            fprintf(stderr, "tidemark run: process %ld still runs after the command ended; its "
                            "history spills to %s (once it ends: tidemark recover %s -o "
                            "OUT.tdm)\n", pid, path, path);
            free(path);
            continue;
        }
        char *out = recovered_name(dir, name);
        size_t events = 0;
        int rc = out ? tdm__recover_file("run", path, out, 0, NULL, &events)
                     : TDM_EXIT_TOOL_ERROR;
        if (rc == TDM_EXIT_OK) {
            fprintf(stderr, "tidemark run: process %ld ended without writing its snapshot "
                            "(killed, or crashed); its history, recovered from its spill "
                            "file, is in %s (%zu events; partial)\n", pid, out, events);
            unlink(path);
            recovered++;
        } else {
            fprintf(stderr, "tidemark run: process %ld ended without writing its snapshot; "
                            "its history stays in %s (tidemark recover %s -o OUT.tdm)\n",
                    pid, path, path);
        }
        free(out);
        free(path);
    }
    closedir(d);
    char *note = join(spill_dir, DEST_NAME);
    if (note) {
        /* kept while a spill stays, for a later run to finish with */
        DIR *left = opendir(spill_dir);
        int spills = 0;
        struct dirent *f;
        while (left && (f = readdir(left)))
            spills += strstr(f->d_name, ".spill") != NULL;
        if (left)
            closedir(left);
        if (!spills)
            unlink(note);
        free(note);
    }
    rmdir(spill_dir); /* empty unless a spill stays */
    return recovered;
}

/* The run that made spill folder `name` ("run-PID-TIME-HOST") has ended:
 * it ran on this host and its pid is gone.  (A pid in use again is taken
 * for the run, and a folder of another host, on a shared TMPDIR, is left
 * alone: never recover under a running run's feet.) */
static int run_gone(const char *name)
{
    long pid = 0, t = 0;
    int at = 0;
    char host[64];
    this_host(host, sizeof host);
    if (sscanf(name, "run-%ld-%ld-%n", &pid, &t, &at) != 2 || pid <= 0 || !at ||
        strcmp(name + at, host) != 0)
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

size_t tdm__run_spills_sweep_stale(void)
{
    char base[PATH_MAX];
    if (tdm__spill_default_folder(base, sizeof base) != 0)
        return 0;
    DIR *d = opendir(base);
    if (!d)
        return 0;
    size_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *folder = NULL, *note = NULL;
        struct stat st;
        if (strncmp(e->d_name, "run-", 4) != 0 || !run_gone(e->d_name) ||
            !(folder = join(base, e->d_name)))
            continue;
        char dest[PATH_MAX] = "";
        if (lstat(folder, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
            (note = join(folder, DEST_NAME))) {
            int fd = open(note, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            ssize_t got = fd >= 0 ? read(fd, dest, sizeof dest - 1) : -1;
            if (fd >= 0)
                close(fd);
            dest[got > 0 ? got : 0] = '\0';
            struct stat ds;
            /* Claimed by renaming the note: two runs starting at once
             * never both recover one folder. */
            char *claim = NULL;
            if (dest[0] && stat(dest, &ds) == 0 && S_ISDIR(ds.st_mode) &&
                asprintf(&claim, "%s.%ld", note, (long)getpid()) < 0)
                claim = NULL;
            if (claim && rename(note, claim) == 0) {
                long pid = strtol(e->d_name + 4, NULL, 10);
                fprintf(stderr, "tidemark run: an earlier tidemark run (pid %ld) ended before "
                                "recovering what its processes left; recovering it into %s\n",
                        pid, dest);
                unlink(claim);
                total += tdm__run_spills_sweep(folder, dest);
            }
            free(claim);
        }
        free(note);
        free(folder);
    }
    closedir(d);
    return total;
}
