/* runtime/spill_path.c: where the spill file of TIDEMARK_CONF's `spill` key
 * goes.
 *
 * Default place (format_spill.c, tdm__spill_default_folder, which `tidemark
 * run` also reads): $TMPDIR, else /dev/shm, else /tmp, in a folder
 * tidemark-UID made 0700 and owned by this user.  All are node-local (the
 * dump folder may be a network file system, where the kernel's write-back
 * of the mapping would be network traffic), and /dev/shm is tmpfs: no
 * write-back at all, which on a disk file system write-protects pages
 * the ring keeps storing into (bench/record_overhead: 13-15 ns an event on
 * tmpfs as anonymous memory, 17-23 on ext4).  The
 * name is the dump's file name without its extension, with ".PID" when
 * that name has no pid, and ".spill".
 *
 * tdm__spill_start opens it for autoinit.c (spill= on unless "off"; only
 * record=all keeps a ring of events; not under a file-size limit, which
 * would stop the file, as large as the ring, with SIGXFSZ).  The file
 * takes its name at the process's first event (snapshot/spill.c), so a
 * process that records nothing leaves none.
 *
 * Lock: none; file system calls only (mkdir, lstat), and the spill's own.
 */
#include "config.h"
#include "format_spill.h" /* tdm__spill_default_folder */
#include "spill.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default folder, made if missing; -1 (errno set) when it is not a
 * folder of ours. */
static int default_folder(char *dir, size_t len)
{
    if (tdm__spill_default_folder(dir, len) != 0)
        return -1;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (lstat(dir, &st) != 0)
        return -1;
    /* Someone else's folder, or a link planted in a shared /tmp. */
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 0077)) {
        errno = EACCES;
        return -1;
    }
    return 0;
}

tdm_status tdm__spill_path_for_process(const char *spill_tmpl, const char *dump_path,
                                       int dump_has_pid, uint64_t start_time_us,
                                       char *out, size_t out_len)
{
    if (spill_tmpl[0]) {
        tdm_status st = tdm__dump_path_for_process(spill_tmpl, start_time_us, out, out_len);
        if (st != TDM_OK)
            return st;
        return tdm__dump_path_make_parent(out);
    }
    char dir[TDM__CONF_PATH_MAX];
    if (default_folder(dir, sizeof dir) != 0)
        return TDM_IO_ERROR;
    const char *slash = strrchr(dump_path, '/');
    const char *base = slash ? slash + 1 : dump_path;
    const char *dot = strrchr(base, '.');
    int stem = (int)(dot && dot != base ? (size_t)(dot - base) : strlen(base));
    char pid[32] = "";
    if (!dump_has_pid)
        snprintf(pid, sizeof pid, ".%lld", (long long)getpid());
    int n = snprintf(out, out_len, "%s/%.*s%s.spill", dir, stem, base, pid);
    if (n < 0 || (size_t)n >= out_len) {
        errno = ENAMETOOLONG;
        return TDM_IO_ERROR;
    }
    return TDM_OK;
}

int tdm__spill_start(const tdm__config *cfg, const char *dump_tmpl, const char *spill_tmpl,
                     int dump_has_pid, uint64_t start_time_us, const char *text,
                     char *line, size_t line_len)
{
    if (strcmp(cfg->spill, "off") == 0 || cfg->record != TDM_RECORD_ALL)
        return 0;
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
        return 0;
    char dump[TDM__CONF_PATH_MAX], path[TDM__CONF_PATH_MAX], why[256];
    if (tdm__dump_path_for_process(dump_tmpl, start_time_us, dump, sizeof dump) != TDM_OK ||
        tdm__spill_path_for_process(spill_tmpl, dump, dump_has_pid, start_time_us, path,
                                    sizeof path) != TDM_OK) {
        snprintf(line, line_len, "tidemark: no spill file (%s); a killed program leaves "
                 "no history", strerror(errno));
        return 1;
    }
    if (tdm__spill_open(path, text, tdm__vendor_name(cfg->alloc.device_kind), why,
                        sizeof why) != TDM_OK) {
        snprintf(line, line_len, "tidemark: cannot create spill file %s: %s; a killed "
                 "program leaves no history", path, why);
        return 1;
    }
    tdm__spill_set_modes(cfg->record, cfg->context, tdm__config_stacks(cfg));
    /* Said on a terminal only, and only once the file has its name (the
     * process's first event): every process a launcher or shell starts
     * under the preload would otherwise add a line to the job's log,
     * though most never touch device memory.  Its place is predictable
     * (docs/spill.md) and `tidemark run` names it when the program is
     * killed. */
    if (isatty(STDERR_FILENO))
        tdm__spill_announce();
    return 0;
}
