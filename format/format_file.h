/* format/format_file.h: how tidemark makes the files it writes
 * (snapshots, exports, pages), shared by the recorder's dumps and the
 * command-line tool.
 *
 * A file is written to a temporary "<path>.tmp.<pid>.<n>" made in the
 * target's folder with O_CREAT|O_EXCL|O_NOFOLLOW and given the file mode
 * (0600 unless TIDEMARK_CONF's file_mode= says otherwise) whatever the
 * umask; it is then fsynced and moved over the target, which must be a
 * regular file or nothing: a symbolic link, FIFO, device, socket or
 * folder is refused, never replaced.  While the temporary is open
 * SIGXFSZ is held in the writing thread, so a file-size limit makes the
 * write fail with EFBIG instead of killing the program; the signal that
 * write raised is taken back before the thread's mask is restored.
 *
 * No locks: the file mode is one atomic word, set once at start.
 */
#ifndef TDM_FORMAT_FORMAT_FILE_H
#define TDM_FORMAT_FORMAT_FILE_H

#include <signal.h>
#include <stddef.h>

/* Error codes beyond errno's range, for targets tidemark refuses. */
#define TDM__OUT_ESYMLINK 20001 /* the target is a symbolic link */
#define TDM__OUT_ESPECIAL 20002 /* a FIFO, device or socket */

/* The mode new files get (0600 by default); `file_mode=` sets it. */
void tdm__file_mode_set(unsigned mode);
unsigned tdm__file_mode(void);

/* Why `e` (an errno value or a TDM__OUT_* code): for messages. */
const char *tdm__out_strerror(int e);

/* 0 when `path` may be written (nothing there, or a regular file); else
 * EISDIR, TDM__OUT_ESYMLINK or TDM__OUT_ESPECIAL. */
int tdm__out_target_check(const char *path);

typedef struct tdm__out_file {
    int fd;          /* the temporary, open for writing; -1 when none */
    char *tmp;       /* its name */
    char *path;      /* the target */
    int raised;      /* SIGXFSZ was pending before we held it */
    sigset_t old_mask;
} tdm__out_file;

/* Makes the temporary for `path` (checked with tdm__out_target_check
 * first).  Returns 0, or an errno value / TDM__OUT_* code. */
int tdm__out_open(tdm__out_file *o, const char *path);
/* Makes the finished temporary `path`: fsync, close, then rename over a
 * regular file (`replace`) or link(2) only where nothing is (EEXIST when
 * something appeared meanwhile).  Returns 0 or an errno value /
 * TDM__OUT_* code; on failure the temporary is removed. */
int tdm__out_commit(tdm__out_file *o, int replace);
/* Closes and removes the temporary (a failed write). */
void tdm__out_discard(tdm__out_file *o);

/* Removes, from the folder of `path`, the temporaries of snapshots that
 * processes killed mid-dump left: names "*.tmp.<pid>.<n>" whose process
 * is gone (kill(pid, 0) says ESRCH), owned by this user, empty or
 * starting with the .tdm signature, and untouched for `min_age_s`
 * seconds (another machine's pid means nothing here: a folder shared
 * over the network may hold a dump in progress elsewhere).  Returns how
 * many were removed. */
size_t tdm__out_sweep_stale(const char *path, unsigned min_age_s);

#endif
