/* format/format_file.c: safe output files (format_file.h). */
#define _GNU_SOURCE
#include "format_file.h"
#include "snap_model.h" /* TDM_SNAP_SIGNATURE */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_uint file_mode = 0600;
static atomic_uint tmp_counter;

void tdm__file_mode_set(unsigned mode) { atomic_store(&file_mode, mode & 07777); }
unsigned tdm__file_mode(void) { return atomic_load(&file_mode); }

const char *tdm__out_strerror(int e)
{
    switch (e) {
    case TDM__OUT_ESYMLINK:
        return "it is a symbolic link; tidemark replaces only regular files";
    case TDM__OUT_ESPECIAL:
        return "it is a FIFO, device or socket; tidemark replaces only regular files";
    case EISDIR:
        return "it is a folder; tidemark replaces only regular files";
    case ENOSPC:
        return "no space left on the device";
    case EFBIG:
        return "the file-size limit (ulimit -f) was reached";
    default:
        return strerror(e);
    }
}

static int kind_error(mode_t m)
{
    if (S_ISREG(m))
        return 0;
    if (S_ISLNK(m))
        return TDM__OUT_ESYMLINK;
    if (S_ISDIR(m))
        return EISDIR;
    return TDM__OUT_ESPECIAL;
}

int tdm__out_target_check(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0; /* nothing there (or nothing we can see: open says why) */
    return kind_error(st.st_mode);
}

/* SIGXFSZ held in this thread for the life of the temporary. */
static void hold_xfsz(tdm__out_file *o)
{
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &o->old_mask);
    o->raised = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

/* Takes back a SIGXFSZ our writes raised (never one that was pending
 * before), then restores the thread's mask. */
static void release_xfsz(tdm__out_file *o)
{
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    if (!o->raised && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1) {
        struct timespec now = {0, 0};
        while (sigtimedwait(&xfsz, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &o->old_mask, NULL);
}

int tdm__out_open(tdm__out_file *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    int e = tdm__out_target_check(path);
    if (e)
        return e;
    size_t len = strlen(path) + 48;
    o->tmp = malloc(len);
    o->path = strdup(path);
    if (!o->tmp || !o->path) {
        free(o->tmp);
        free(o->path);
        o->tmp = o->path = NULL;
        return ENOMEM;
    }
    for (int tries = 0; tries < 16 && o->fd < 0; tries++) {
        snprintf(o->tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1));
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (o->fd < 0 && errno != EEXIST)
            break;
    }
    if (o->fd < 0) {
        e = errno;
        free(o->tmp);
        free(o->path);
        o->tmp = o->path = NULL;
        return e;
    }
    /* The mode is ours to choose, not the umask's. */
    (void)fchmod(o->fd, tdm__file_mode());
    hold_xfsz(o);
    return 0;
}

static void out_free(tdm__out_file *o)
{
    free(o->tmp);
    free(o->path);
    o->tmp = o->path = NULL;
    o->fd = -1;
}

void tdm__out_discard(tdm__out_file *o)
{
    if (!o->tmp)
        return;
    if (o->fd >= 0)
        close(o->fd);
    unlink(o->tmp);
    release_xfsz(o);
    out_free(o);
}

/* Makes the rename itself durable; a failure here loses nothing already
 * visible, so it is not reported. */
static void sync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Moves tmp to path only where nothing is: link(2) refuses to replace;
 * a file system without hard links gets a check, then rename(2). */
static int move_exclusive(const char *tmp, const char *path)
{
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    int e = errno;
    if (e != EPERM && e != EOPNOTSUPP && e != ENOTSUP && e != ENOSYS && e != EMLINK)
        return e;
    struct stat st;
    if (lstat(path, &st) == 0)
        return EEXIST;
    return rename(tmp, path) == 0 ? 0 : errno;
}

int tdm__out_commit(tdm__out_file *o, int replace)
{
    int e = 0;
    if (fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS)
        e = errno;
    if (close(o->fd) != 0 && !e)
        e = errno;
    o->fd = -1;
    if (!e && replace) {
        /* Checked again at the last moment: something else may have been
         * put there while the file was written. */
        e = tdm__out_target_check(o->path);
        if (!e && rename(o->tmp, o->path) != 0)
            e = errno;
    } else if (!e) {
        e = move_exclusive(o->tmp, o->path);
    }
    if (e)
        unlink(o->tmp);
    else
        sync_dir_of(o->path);
    release_xfsz(o);
    out_free(o);
    return e;
}

/* ---- temporaries left by killed dumps -------------------------------------- */

/* The pid in a name ending ".tmp.<pid>.<n>", or 0. */
static long tmp_name_pid(const char *name)
{
    size_t len = strlen(name);
    size_t i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i == len || i == 0 || name[i - 1] != '.')
        return 0;
    size_t pid_end = i - 1, j = pid_end;
    while (j > 0 && name[j - 1] >= '0' && name[j - 1] <= '9')
        j--;
    if (j == pid_end || j < 5 || memcmp(name + j - 5, ".tmp.", 5) != 0 || pid_end - j > 9)
        return 0;
    long pid = 0;
    for (size_t k = j; k < pid_end; k++)
        pid = pid * 10 + (name[k] - '0');
    return pid;
}

/* Empty, or starting as every .tdm file does (the msgpack array
 * ["tidemark", ...], docs/format.md). */
static int looks_like_partial_snapshot(int dirfd, const char *name, off_t size)
{
    static const unsigned char sig[TDM_SNAP_SIGNATURE_LEN] = TDM_SNAP_SIGNATURE;
    if (size == 0)
        return 1;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    unsigned char head[sizeof sig];
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return n == (ssize_t)sizeof head && memcmp(head, sig, sizeof head) == 0;
}

size_t tdm__out_sweep_stale(const char *path, unsigned min_age_s)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
    if (!dir)
        return 0;
    DIR *d = opendir(dir);
    free(dir);
    if (!d)
        return 0;
    int dfd = dirfd(d);
    time_t now = time(NULL);
    pid_t self = getpid();
    uid_t me = geteuid();
    size_t removed = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        long pid = tmp_name_pid(ent->d_name);
        if (pid <= 0 || pid == (long)self)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st;
        if (fstatat(dfd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != me || now - st.st_mtime < (time_t)min_age_s)
            continue;
        if (looks_like_partial_snapshot(dfd, ent->d_name, st.st_size) &&
            unlinkat(dfd, ent->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
