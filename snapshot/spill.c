/* snapshot/spill.c: the spill file's writer (see spill.h, spill_layout.h).
 *
 * Everything here runs on rare paths: opening at start, making a region
 * when the ring or the stack table is created, and adding a module record
 * when a new stack shows a pc outside the recorded modules.  Stores into
 * the shared header that a reader depends on are ordered: a record's
 * fields before its `valid` word, a region's fields before its offset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
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
    char path[4096];
} sp = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static _Atomic int active;

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

tdm_status tdm__spill_open(const char *path, const char *config_text,
                           const char *device_kind, char *why, size_t why_len)
{
    tdm_status st = TDM_OK;
    pthread_mutex_lock(&sp.lock);
    if (sp.fd >= 0)
        goto out;
    if (strlen(path) >= sizeof sp.path) {
        snprintf(why, why_len, "path too long");
        st = TDM_INVALID_ARGUMENT;
        goto out;
    }
    /* A file of this name is a spill a previous program of this pid left
     * (before an exec, or long ago): it is replaced.  Anything else there
     * (a link, a folder) is refused by O_EXCL|O_NOFOLLOW. */
    struct stat old;
    if (lstat(path, &old) == 0 && S_ISREG(old.st_mode))
        unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, why_len, "%s", strerror(errno));
        st = TDM_IO_ERROR;
        goto out;
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
        unlink(path);
        sp.fd = -1;
        st = TDM_IO_ERROR;
        goto out;
    }
    snprintf(sp.path, sizeof sp.path, "%s", path);
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
    pthread_mutex_lock(&sp.lock);
    if (sp.fd >= 0 && sp.path[0])
        unlink(sp.path);
    sp.path[0] = '\0';
    pthread_mutex_unlock(&sp.lock);
}

void tdm__spill_fork_child(void)
{
    if (!tdm__spill_active())
        return;
    tdm__spill_ahead_fork_child();
    /* Another thread of the parent may have held the lock: it is not here. */
    pthread_mutex_init(&sp.lock, NULL);
    atomic_store_explicit(&active, 0, memory_order_release);
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
