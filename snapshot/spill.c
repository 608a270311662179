/* snapshot/spill.c: the spill file's writer (see spill.h, spill_layout.h).
 *
 * Everything here runs on rare paths: opening at start, naming the file
 * at the first event, making a region when the ring or the stack table is
 * created, and adding a module record when a new stack shows a pc outside
 * the recorded modules.  Stores into the shared header that a reader
 * depends on are ordered: a record's fields before its `valid` word, a
 * region's fields before its offset.
 *
 * Naming: the file is made without a name (O_TMPFILE) and linked to its
 * path at the process's first event (tdm__spill_publish), so a process
 * that records nothing leaves nothing, however it ends (exit, _exit, a
 * kill): the kernel frees a nameless file with its last descriptor.
 * Where the file system has no O_TMPFILE the file is made under a
 * temporary name and linked at once.  The owner holds an exclusive flock
 * on its file for its life; a file at the path that nobody holds is a
 * stale one (its process is gone) and is replaced, one that is held
 * belongs to a running process and is left alone: this one takes
 * PATH.PID beside it, and says so.  Removing checks that the path is
 * still this process's file (device and inode) before unlinking.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/file.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "procinfo.h"
#include "recorder_internal.h"
#include "spill.h"
#include "spill_layout.h"

#define PAGE 4096u
#define ROUND_PAGE(x) (((x) + PAGE - 1) & ~(uint64_t)(PAGE - 1))

static struct {
    pthread_mutex_t lock;
    int fd;                  /* -1 when no spill */
    tdm_spill_header *head;  /* the header area, mapped shared */
    size_t head_bytes;
    uint64_t end;            /* file size: where the next region goes */
    unsigned long long adds; /* dl_iterate_phdr's load count, last look */
    int unnamed;             /* made, not linked to its path yet */
    int announce;            /* say the path once it has it */
    char path[4096];         /* its name (or the one it will take) */
    char alt[4096];          /* PATH.PID: its name when PATH is in use */
    char tmp[4096];          /* without O_TMPFILE: the name it was made under */
    char proc[64];           /* /proc/self/fd/N, for linkat */
} sp = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static _Atomic int active;
/* The file waits for its name (tdm__spill_publish). */
static _Atomic int publish_pending;

int tdm__spill_active(void) { return atomic_load_explicit(&active, memory_order_acquire); }

const char *tdm__spill_path(void) { return tdm__spill_active() ? sp.path : ""; }

static void store_u64(uint64_t *at, uint64_t v)
{
    __atomic_store_n(at, v, __ATOMIC_RELEASE);
}

/* fallocate, or writing zeros where the file system has no fallocate. */
static int reserve_locked(uint64_t offset, uint64_t len)
{
    if (len == 0)
        return 0;
    if (fallocate(sp.fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) == 0)
        return 0;
    if (errno != EOPNOTSUPP)
        return -1;
    return posix_fallocate(sp.fd, (off_t)offset, (off_t)len) == 0 ? 0 : -1;
}

int tdm__spill_fallocate(uint64_t offset, uint64_t len)
{
    if (sp.fd < 0)
        return -1;
    if (len == 0 || fallocate(sp.fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) == 0)
        return 0;
    return errno == EOPNOTSUPP ? 1 : -1;
}

int tdm__spill_write_zeros(uint64_t offset, uint64_t len)
{
    return sp.fd >= 0 && posix_fallocate(sp.fd, (off_t)offset, (off_t)len) == 0 ? 0 : -1;
}

int tdm__spill_reserve(uint64_t offset, uint64_t len)
{
    pthread_mutex_lock(&sp.lock);
    int rc = sp.fd >= 0 ? reserve_locked(offset, len) : -1;
    pthread_mutex_unlock(&sp.lock);
    return rc;
}

/* ---- modules ------------------------------------------------------------ */

/* The GNU build-id note of a loaded object, from its PT_NOTE segments in
 * memory (no file read). */
static uint32_t build_id_of(const struct dl_phdr_info *info, uint8_t *out)
{
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *n;
            const char *desc = name + ((n->n_namesz + 3) & ~3u);
            const char *next = desc + ((n->n_descsz + 3) & ~3u);
            if (next > end || next < p)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                memcmp(name, "GNU", 4) == 0 && n->n_descsz <= TDM_SPILL_BUILD_ID_MAX) {
                memcpy(out, desc, n->n_descsz);
                return n->n_descsz;
            }
            p = next;
        }
    }
    return 0;
}

static int module_known(uint64_t bias, uint64_t lo)
{
    tdm_spill_module *m = (tdm_spill_module *)((char *)sp.head + sp.head->modules_offset);
    for (uint32_t i = 0; i < sp.head->module_count; i++)
        if (m[i].bias == bias && m[i].lo == lo)
            return 1;
    return 0;
}

static int add_module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    sp.adds = info->dlpi_adds;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    /* The vDSO has no file to read symbols from. */
    if (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0)
        return 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (hi == 0 || module_known(info->dlpi_addr, lo))
        return 0;
    uint32_t n = sp.head->module_count;
    if (n >= sp.head->module_max)
        return 1;
    tdm_spill_module *m = (tdm_spill_module *)((char *)sp.head + sp.head->modules_offset) + n;
    m->bias = info->dlpi_addr;
    m->lo = lo;
    m->hi = hi;
    m->build_id_len = build_id_of(info, m->build_id);
    if (name[0] == '\0') {
        /* The program itself: dl_iterate_phdr gives no name. */
        ssize_t len = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
        m->path[len > 0 ? len : 0] = '\0';
    } else {
        snprintf(m->path, sizeof m->path, "%s", name);
    }
    __atomic_store_n(&m->valid, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&sp.head->module_count, n + 1, __ATOMIC_RELEASE);
    return 0;
}

static int adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

void tdm__spill_note_pcs(const uintptr_t *pcs, unsigned depth)
{
    if (!tdm__spill_active())
        return;
    pthread_mutex_lock(&sp.lock);
    if (!sp.head)
        goto out;
    const tdm_spill_module *m =
        (const tdm_spill_module *)((char *)sp.head + sp.head->modules_offset);
    uint32_t count = sp.head->module_count;
    for (unsigned k = 0; k < depth; k++) {
        uint32_t i = 0;
        while (i < count && !(pcs[k] >= m[i].lo && pcs[k] < m[i].hi))
            i++;
        if (i < count)
            continue;
        /* Outside every recorded module: new code was loaded, or the pc
         * is in code no object holds (JIT, a Python entry).  Look again
         * only when the dynamic linker loaded something. */
        unsigned long long adds = 0;
        dl_iterate_phdr(adds_cb, &adds);
        if (adds != sp.adds)
            dl_iterate_phdr(add_module_cb, NULL);
        break;
    }
out:
    pthread_mutex_unlock(&sp.lock);
}

/* ---- the file ----------------------------------------------------------- */

static void read_command(char *out, size_t len)
{
    out[0] = '\0';
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    if (n <= 0)
        return;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

/* Whether a running process holds the spill file at `name` (its flock):
 * 0 when nothing is there or nobody holds it (a stale file, which may be
 * replaced); 1 when held, or when it cannot be told (not ours to open). */
static int held(const char *name)
{
    int fd = open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT;
    struct stat st;
    int busy = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
               (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK);
    close(fd);
    return busy;
}

/* Gives the open file the name `name`; 0 or an errno value (EEXIST:
 * something is there). */
static int link_as(const char *name)
{
    if (sp.tmp[0])
        return link(sp.tmp, name) == 0 ? 0 : errno;
    if (linkat(AT_FDCWD, sp.proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    int e = errno;
    if (e == ENOENT && access("/proc/self/fd", X_OK) != 0) /* no /proc */
        return linkat(sp.fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0 ? 0 : errno;
    return e;
}

/* link_as, replacing a stale spill file (nobody holds it) at `name`. */
static int take(const char *name)
{
    int e = link_as(name);
    if (e == EEXIST && !held(name)) {
        struct stat st;
        if (lstat(name, &st) == 0 && S_ISREG(st.st_mode))
            unlink(name);
        e = link_as(name);
    }
    return e;
}

static void say_raw(const char *a, const char *b, const char *c, const char *d,
                    const char *e)
{
    /* One write: lines of several processes never interleave. */
    char line[3 * 4096 + 256];
    size_t n = 0;
    const char *parts[] = {a, b, c, d, e, "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *p = parts[i]; p && *p && n < sizeof line; p++)
            line[n++] = *p;
    if (write(STDERR_FILENO, line, n) < 0) {
        /* nowhere to say it */
    }
}

/* Gives the file its name (under sp.lock): its path, or PATH.PID when a
 * running process holds a spill file at its path. */
static void name_locked(void)
{
    int e = take(sp.path);
    int moved = 0;
    if (e == EEXIST && sp.alt[0]) {
        e = take(sp.alt);
        moved = e == 0;
    }
    if (sp.tmp[0]) {
        unlink(sp.tmp);
        sp.tmp[0] = '\0';
    }
    if (e != 0) {
        say_raw("tidemark: cannot create spill file ", sp.path, ": ", strerror(e),
                "; a killed program leaves no history");
        sp.path[0] = '\0';
        return;
    }
    sp.unnamed = 0;
    if (moved) {
        say_raw("tidemark: spill file ", sp.path,
                " belongs to a running process; this one's is ", sp.alt, "");
        memcpy(sp.path, sp.alt, sizeof sp.path);
    }
    if (sp.announce)
        say_raw("tidemark: history spills to ", sp.path, " (if killed: tidemark recover ",
                sp.path, " -o OUT.tdm)");
}

void tdm__spill_publish(void)
{
    if (!atomic_load_explicit(&publish_pending, memory_order_relaxed) ||
        !atomic_exchange(&publish_pending, 0))
        return;
    pthread_mutex_lock(&sp.lock);
    if (sp.fd >= 0 && sp.unnamed && sp.path[0])
        name_locked();
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_announce(void)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.fd >= 0 && sp.unnamed)
        sp.announce = 1;
    else if (sp.fd >= 0 && sp.path[0])
        say_raw("tidemark: history spills to ", sp.path, " (if killed: tidemark recover ",
                sp.path, " -o OUT.tdm)");
    pthread_mutex_unlock(&sp.lock);
}

/* The file, without a name (O_TMPFILE in path's folder), or under a
 * temporary name beside path (sp.tmp) where O_TMPFILE is not supported.
 * -1 with errno set. */
static int make_file(const char *path)
{
    sp.tmp[0] = '\0';
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return -1;
    if (snprintf(sp.tmp, sizeof sp.tmp, "%s.tmp.%ld", path, (long)getpid()) >=
        (int)sizeof sp.tmp) {
        sp.tmp[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    struct stat old;
    if (lstat(sp.tmp, &old) == 0 && S_ISREG(old.st_mode))
        unlink(sp.tmp); /* a previous program of this pid's */
    fd = open(sp.tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        sp.tmp[0] = '\0';
    return fd;
}

tdm_status tdm__spill_open(const char *path, const char *config_text,
                           const char *device_kind, char *why, size_t why_len)
{
    tdm_status st = TDM_OK;
    pthread_mutex_lock(&sp.lock);
    if (sp.fd >= 0)
        goto out;
    if (strlen(path) + 32 >= sizeof sp.path) {
        snprintf(why, why_len, "path too long");
        st = TDM_INVALID_ARGUMENT;
        goto out;
    }
    /* Anything but a regular file at the path (a link, a folder) is
     * refused: the name is taken with link(2), which never follows one. */
    struct stat old;
    if (lstat(path, &old) == 0 && !S_ISREG(old.st_mode)) {
        snprintf(why, why_len, "%s", S_ISDIR(old.st_mode) ? strerror(EISDIR) : strerror(EEXIST));
        st = TDM_IO_ERROR;
        goto out;
    }
    int fd = make_file(path);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        st = TDM_IO_ERROR;
        goto out;
    }
    /* Held for the life of the process: another process that finds the
     * file at this path knows it is not stale. */
    (void)flock(fd, LOCK_EX | LOCK_NB);
    (void)fchmod(fd, 0600); /* whatever the umask */
    snprintf(sp.proc, sizeof sp.proc, "/proc/self/fd/%d", fd);
    {
        /* PATH.PID, before the extension ".spill" when it has it. */
        size_t len = strlen(path);
        const char *ext = len > 6 && strcmp(path + len - 6, ".spill") == 0 ? ".spill" : "";
        snprintf(sp.alt, sizeof sp.alt, "%.*s.%ld%s", (int)(len - strlen(ext)), path,
                 (long)getpid(), ext);
    }
    size_t config_offset = ROUND_PAGE(sizeof(tdm_spill_header));
    size_t modules_offset = config_offset + TDM_SPILL_CONFIG_MAX;
    size_t phases_offset = modules_offset + (size_t)TDM_SPILL_MODULE_MAX * sizeof(tdm_spill_module);
    size_t head_bytes = ROUND_PAGE(phases_offset +
                                   (size_t)TDM_SPILL_PHASE_MAX * TDM_SPILL_PHASE_NAME);
    sp.fd = fd;
    void *map = MAP_FAILED;
    if (ftruncate(fd, (off_t)head_bytes) != 0 || reserve_locked(0, head_bytes) != 0 ||
        (map = mmap(NULL, head_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
            MAP_FAILED) {
        snprintf(why, why_len, "%s", strerror(errno));
        if (map != MAP_FAILED)
            munmap(map, head_bytes);
        close(fd);
        if (sp.tmp[0])
            unlink(sp.tmp);
        sp.tmp[0] = '\0';
        sp.fd = -1;
        st = TDM_IO_ERROR;
        goto out;
    }
    snprintf(sp.path, sizeof sp.path, "%s", path);
    sp.unnamed = 1;
    sp.announce = 0;
    sp.head = map;
    sp.head_bytes = head_bytes;
    sp.end = head_bytes;
    tdm_spill_header *h = map;
    h->version = TDM_SPILL_VERSION;
    h->endian = TDM_SPILL_ENDIAN_MARK;
    h->word_bytes = sizeof(uintptr_t);
    h->slot_bytes = 64;
    h->header_bytes = head_bytes;
    h->pid = getpid();
    h->start_time_us = tdm__now_us();
    h->config_offset = config_offset;
    h->modules_offset = modules_offset;
    h->module_max = TDM_SPILL_MODULE_MAX;
    h->phases_offset = phases_offset;
    h->phase_max = TDM_SPILL_PHASE_MAX;
    h->phase_name_bytes = TDM_SPILL_PHASE_NAME;
    snprintf((char *)map + config_offset, TDM_SPILL_CONFIG_MAX, "%s",
             config_text ? config_text : "");
    gethostname(h->host, sizeof h->host - 1);
    snprintf(h->device_kind, sizeof h->device_kind, "%s", device_kind ? device_kind : "");
    read_command(h->command, sizeof h->command);
    /* The allocator is configured before the spill opens (autoinit). */
    snprintf(h->alloc_mode, sizeof h->alloc_mode, "%s",
             tdm__recorder_state.alloc_mode ? tdm__recorder_state.alloc_mode : "");
    dl_iterate_phdr(add_module_cb, NULL);
    /* The magic last: a reader never takes a half-made header for one. */
    uint64_t magic;
    memcpy(&magic, TDM_SPILL_MAGIC, sizeof magic);
    __atomic_store_n((uint64_t *)(void *)h->magic, magic, __ATOMIC_RELEASE);
    atomic_store_explicit(&active, 1, memory_order_release);
    if (sp.tmp[0])
        name_locked(); /* it has a name already: the right one, at once */
    else
        atomic_store(&publish_pending, 1);
out:
    pthread_mutex_unlock(&sp.lock);
    return st;
}

void *tdm__spill_map(size_t bytes, size_t reserve, size_t room, uint64_t *offset)
{
    void *map = NULL;
    if (!tdm__spill_active())
        return NULL;
    pthread_mutex_lock(&sp.lock);
    if (sp.fd < 0)
        goto out;
    bytes = ROUND_PAGE(bytes);
    uint64_t at = sp.end;
    /* Room for the whole region, or none of it: a ring that finds the file
     * system full half-way would lose events (a small /dev/shm in a
     * container); it stays anonymous instead. */
    struct statvfs fs;
    if (fstatvfs(sp.fd, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < room)
        goto out;
    if (ftruncate(sp.fd, (off_t)(at + bytes)) != 0)
        goto out;
    if (reserve_locked(at, reserve < bytes ? reserve : bytes) != 0) {
        (void)ftruncate(sp.fd, (off_t)at);
        goto out;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                   sp.fd, (off_t)at);
    if (m == MAP_FAILED) {
        (void)ftruncate(sp.fd, (off_t)at);
        goto out;
    }
    sp.end = at + bytes;
    *offset = at;
    map = m;
out:
    pthread_mutex_unlock(&sp.lock);
    return map;
}

void tdm__spill_discard(void *addr, size_t bytes)
{
    /* Frees the file's pages too (a hole reads as zeros); where the file
     * system cannot, the pages are zeroed by hand. */
    if (madvise(addr, bytes, MADV_REMOVE) != 0)
        memset(addr, 0, bytes);
}

void tdm__spill_publish_ring(uint64_t offset, uint64_t slots_offset,
                             uint64_t capacity, uint64_t slot_count)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.head) {
        store_u64(&sp.head->ring_offset, 0);
        store_u64(&sp.head->ring_slots_offset, slots_offset);
        store_u64(&sp.head->ring_capacity, capacity);
        store_u64(&sp.head->ring_slot_count, slot_count);
        store_u64(&sp.head->ring_offset, offset);
    }
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_unpublish_ring(uint64_t offset)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.head && sp.head->ring_offset == offset)
        store_u64(&sp.head->ring_offset, 0);
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_publish_stacks(uint64_t offset, uint64_t recs_offset,
                               uint64_t frames_offset, uint64_t stack_max,
                               uint64_t frame_max)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.head) {
        store_u64(&sp.head->stacks_recs_offset, recs_offset);
        store_u64(&sp.head->stacks_frames_offset, frames_offset);
        store_u64(&sp.head->stack_max, stack_max);
        store_u64(&sp.head->frame_max, frame_max);
        store_u64(&sp.head->stacks_offset, offset);
    }
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_set_modes(int record, int context, int stacks)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.head) {
        sp.head->record_mode = (uint8_t)record;
        sp.head->context_mode = (uint8_t)context;
        sp.head->stacks_mode = (uint8_t)stacks;
    }
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_note_phase(uint32_t id, const char *name)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.head && id > 0 && id < sp.head->phase_max) {
        /* Whole, then in place: the slot's last byte stays NUL. */
        char v[TDM_SPILL_PHASE_NAME] = {0};
        snprintf(v, sizeof v, "%s", name);
        memcpy((char *)sp.head + sp.head->phases_offset + (size_t)id * TDM_SPILL_PHASE_NAME, v,
               sizeof v);
    }
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_set_alloc_mode(const char *mode)
{
    pthread_mutex_lock(&sp.lock);
    if (sp.head) {
        /* Whole, then in place: the field is never without its NUL. */
        char v[sizeof sp.head->alloc_mode] = {0};
        snprintf(v, sizeof v, "%s", mode ? mode : "");
        memcpy(sp.head->alloc_mode, v, sizeof v);
    }
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_remove(void)
{
    atomic_store(&publish_pending, 0); /* a file never named stays so */
    pthread_mutex_lock(&sp.lock);
    struct stat mine, there;
    /* Only if the path is still this file: another process may have
     * replaced it (it found it stale), and its file is not ours to remove. */
    if (sp.fd >= 0 && sp.path[0] && !sp.unnamed && fstat(sp.fd, &mine) == 0 &&
        lstat(sp.path, &there) == 0 && mine.st_dev == there.st_dev &&
        mine.st_ino == there.st_ino)
        unlink(sp.path);
    sp.path[0] = '\0';
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_fork_child(void)
{
    /* Another thread of the parent may have held the lock: it is not here.
     * Before the test of `active`: the phase, module and mode notes take
     * the lock whether or not a spill file is open. */
    pthread_mutex_init(&sp.lock, NULL);
    if (!tdm__spill_active())
        return;
    tdm__spill_ahead_fork_child();
    atomic_store_explicit(&active, 0, memory_order_release);
    atomic_store(&publish_pending, 0);
    sp.unnamed = 0;
    if (sp.head)
        munmap(sp.head, sp.head_bytes);
    sp.head = NULL;
    if (sp.fd >= 0)
        close(sp.fd);
    sp.fd = -1;
    sp.path[0] = '\0';
}

/* ---- the stack intern table's region ------------------------------------ */

/* Records and frames are reserved 1 MiB at a time. */
#define STACK_STEP ((size_t)1 << 20)

int tdm__stack_spill_attach(tdm__stack_spill *s, void *map, size_t bytes, size_t recs_at,
                            size_t frames_at, uint64_t max_stacks, uint64_t max_frames)
{
    memset(s, 0, sizeof *s);
    if (!tdm__spill_active() || recs_at % PAGE != 0)
        return -1;
    size_t tail = bytes - recs_at;
    uint64_t offset = 0;
    void *file = tdm__spill_map(tail, 0, 16 * STACK_STEP, &offset);
    if (!file)
        return -1;
    munmap(file, ROUND_PAGE(tail));
    s->offset = offset;
    s->recs_at = recs_at;
    s->frames_at = frames_at;
    if (tdm__stack_spill_room(s, 8, 8) != 0 ||
        mmap((char *)map + recs_at, tail, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_NORESERVE | MAP_FIXED, sp.fd, (off_t)offset) == MAP_FAILED) {
        memset(s, 0, sizeof *s);
        return -1;
    }
    tdm__spill_publish_stacks(offset, offset, offset + (frames_at - recs_at), max_stacks,
                              max_frames);
    return 0;
}

int tdm__stack_spill_room(tdm__stack_spill *s, size_t recs_end, size_t frames_end)
{
    if (!s->offset)
        return 0;
    uint64_t recs = s->offset, frames = s->offset + (s->frames_at - s->recs_at);
    while (recs_end > s->recs_reserved) {
        if (tdm__spill_reserve(recs + s->recs_reserved, STACK_STEP) != 0)
            return -1;
        s->recs_reserved += STACK_STEP;
    }
    while (frames_end > s->frames_reserved) {
        if (tdm__spill_reserve(frames + s->frames_reserved, STACK_STEP) != 0)
            return -1;
        s->frames_reserved += STACK_STEP;
    }
    return 0;
}

void tdm__stack_spill_reset(tdm__stack_spill *s, void *map, size_t bytes)
{
    tdm__spill_discard((char *)map + s->recs_at, bytes - s->recs_at);
    /* The hole gave the reservation back. */
    s->recs_reserved = 0;
    s->frames_reserved = 0;
    (void)tdm__stack_spill_room(s, 8, 8); /* else inserts count overflows */
}

void tdm__stack_spill_detach(tdm__stack_spill *s, void *map, size_t bytes,
                             size_t recs_used, size_t frames_used)
{
    if (!s->offset)
        return;
    char *tail = (char *)map + s->recs_at;
    size_t frames_from = s->frames_at - s->recs_at;
    void *copy = mmap(NULL, recs_used + frames_used + 1, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return;
    memcpy(copy, tail, recs_used);
    memcpy((char *)copy + recs_used, tail + frames_from, frames_used);
    void *m = mmap(tail, bytes - s->recs_at, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (m != MAP_FAILED) {
        memcpy(tail, copy, recs_used);
        memcpy(tail + frames_from, (char *)copy + recs_used, frames_used);
        memset(s, 0, sizeof *s);
    }
    munmap(copy, recs_used + frames_used + 1);
}
