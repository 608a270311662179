/* bench/traces/capture_shim.c: an LD_PRELOAD library that writes the
 * allocation trace of a CPU program in tidemark's replay CSV format
 * (action,time_ns,id,size,category; see docs/replay.md).
 *
 * It interposes posix_memalign and free.  PyTorch's CPU allocator takes
 * every tensor's storage from posix_memalign (64-byte alignment), so those
 * calls are the framework's tensor allocations; everything else the
 * process allocates (the interpreter's own malloc) is left out: a free is
 * logged only when its pointer came from posix_memalign.  Only requests
 * with c10's alignment (64) are logged, as other libraries in the process
 * use posix_memalign for their own buffers at other alignments;
 * TDM_CAPTURE_ALIGNMENT=N logs alignment N instead, 0 every alignment.
 *
 *   TDM_CAPTURE_OUT=trace.csv LD_PRELOAD=.../libtdm_trace_capture.so prog
 *
 * The program may mark where it is by calling tidemark_capture_phase(name)
 * (exported; from Python: ctypes.CDLL(None).tidemark_capture_phase(b"forward")),
 * which writes a `phase` row.  The file is written to TDM_CAPTURE_OUT.tmp
 * and renamed when the process exits, so a crashed run leaves no
 * half-written trace under the final name.
 *
 * The shim may not call malloc (it runs inside the allocator), so the
 * pointer table lives in mmap()ed memory and rows are formatted by hand
 * into a static buffer that is flushed with write(2).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

/* glibc's own free: used so that free needs no dlsym (which may itself free). */
extern void __libc_free(void *p);

/* Called by the program (through dlsym/ctypes) to write a `phase` row. */
SHIM_EXPORT void tidemark_capture_phase(const char *name);

typedef int (*posix_memalign_fn)(void **, size_t, size_t);

/* Live pointers from posix_memalign: open addressing with linear probing,
 * deleted by shifting the run back (no tombstones, so lookups stay short). */
typedef struct live_slot {
    uintptr_t ptr; /* 0: empty */
    uint64_t id;
    uint64_t size;
} live_slot;

#define TABLE_BITS 22 /* 4 Mi slots: far more tensors than a training step keeps alive */
#define TABLE_SLOTS ((size_t)1 << TABLE_BITS)

static pthread_mutex_t shim_lock = PTHREAD_MUTEX_INITIALIZER;
static live_slot *table;
static size_t table_used;
static int table_failed; /* mmap refused: pass everything through, log nothing */
static uint64_t next_id = 1;
static int out_fd = -1;
static int out_disabled;
static size_t want_alignment = 64; /* c10's; other libraries ask for 256, 1024... */
static char out_path[4096];
static char tmp_path[4200];
static struct timespec t0;
static int t0_set;
static char buf[1 << 16];
static size_t buf_len;

static size_t slot_of(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> (64 - TABLE_BITS));
}

static void flush_locked(void)
{
    size_t done = 0;
    while (done < buf_len) {
        ssize_t n = write(out_fd, buf + done, buf_len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* disk full: the trace is cut short, the program goes on */
        done += (size_t)n;
    }
    buf_len = 0;
}

static void put_str(const char *s)
{
    size_t n = strlen(s);
    if (buf_len + n > sizeof buf)
        flush_locked();
    if (n > sizeof buf)
        n = sizeof buf;
    memcpy(buf + buf_len, s, n);
    buf_len += n;
}

static void put_u64(uint64_t v)
{
    char tmp[24];
    int i = (int)sizeof tmp;
    tmp[--i] = '\0';
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put_str(tmp + i);
}

static uint64_t now_ns_locked(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (!t0_set) {
        t0 = ts;
        t0_set = 1;
    }
    return (uint64_t)(ts.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)ts.tv_nsec -
           (uint64_t)t0.tv_nsec;
}

/* Opens the temporary output and the table on first use; 0 when capturing. */
static int ready_locked(void)
{
    if (out_disabled || table_failed)
        return -1;
    if (out_fd >= 0)
        return 0;
    const char *path = getenv("TDM_CAPTURE_OUT");
    if (!path || !*path || strlen(path) >= sizeof out_path) {
        out_disabled = 1;
        return -1;
    }
    void *mem = mmap(NULL, TABLE_SLOTS * sizeof(live_slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        table_failed = 1;
        return -1;
    }
    __atomic_store_n(&table, (live_slot *)mem, __ATOMIC_RELEASE);
    const char *align = getenv("TDM_CAPTURE_ALIGNMENT");
    if (align && *align)
        want_alignment = (size_t)strtoull(align, NULL, 10);
    snprintf(out_path, sizeof out_path, "%s", path);
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", path);
    out_fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (out_fd < 0) {
        out_disabled = 1;
        return -1;
    }
    put_str("# tidemark replay trace v1: captured at posix_memalign/free\n"
            "action,time_ns,id,size,category\n");
    return 0;
}

static void remember_locked(void *p, size_t size)
{
    if (table_used >= TABLE_SLOTS / 2)
        return; /* full enough that probes would crawl: stop logging new ones */
    size_t i = slot_of((uintptr_t)p);
    while (table[i].ptr)
        i = (i + 1) & (TABLE_SLOTS - 1);
    table[i] = (live_slot){(uintptr_t)p, next_id, size};
    table_used++;
    put_str("alloc,");
    put_u64(now_ns_locked());
    put_str(",");
    put_u64(next_id);
    put_str(",");
    put_u64(size);
    put_str(",\n");
    next_id++;
}

static void forget_locked(void *p)
{
    size_t i = slot_of((uintptr_t)p);
    while (table[i].ptr && table[i].ptr != (uintptr_t)p)
        i = (i + 1) & (TABLE_SLOTS - 1);
    if (!table[i].ptr)
        return; /* not from posix_memalign */
    put_str("free,");
    put_u64(now_ns_locked());
    put_str(",");
    put_u64(table[i].id);
    put_str(",");
    put_u64(table[i].size);
    put_str(",\n");
    table[i].ptr = 0;
    table_used--;
    /* Shift the rest of the probe run back over the hole. */
    size_t hole = i;
    for (size_t j = (i + 1) & (TABLE_SLOTS - 1); table[j].ptr; j = (j + 1) & (TABLE_SLOTS - 1)) {
        size_t home = slot_of(table[j].ptr);
        /* j may move to the hole if its home is not in (hole, j] cyclically. */
        int home_between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_between) {
            table[hole] = table[j];
            table[j].ptr = 0;
            hole = j;
        }
    }
}

SHIM_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
    /* Threads may race to resolve it; they all store the same pointer. */
    static posix_memalign_fn resolved;
    posix_memalign_fn real = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (!real) {
        real = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
        __atomic_store_n(&resolved, real, __ATOMIC_RELEASE);
    }
    if (!real)
        return ENOMEM;
    int rc = real(out, alignment, size);
    if (rc != 0 || !*out)
        return rc; /* the allocator's own error code, unchanged */
    pthread_mutex_lock(&shim_lock);
    if (ready_locked() == 0 && (want_alignment == 0 || alignment == want_alignment))
        remember_locked(*out, size);
    pthread_mutex_unlock(&shim_lock);
    return rc;
}

SHIM_EXPORT void free(void *p)
{
    /* Before the first logged allocation no pointer can be ours: skip the lock. */
    if (p && __atomic_load_n(&table, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&shim_lock);
        if (out_fd >= 0)
            forget_locked(p);
        pthread_mutex_unlock(&shim_lock);
    }
    __libc_free(p);
}

SHIM_EXPORT void tidemark_capture_phase(const char *name)
{
    pthread_mutex_lock(&shim_lock);
    if (ready_locked() == 0) {
        put_str("phase,");
        put_u64(now_ns_locked());
        put_str(",,,");
        put_str(name ? name : "");
        put_str("\n");
    }
    pthread_mutex_unlock(&shim_lock);
}

/* Allocations still live here are never freed in the trace, as its format says. */
__attribute__((destructor)) static void finish(void)
{
    pthread_mutex_lock(&shim_lock);
    if (out_fd >= 0) {
        flush_locked();
        close(out_fd);
        out_fd = -1;
        out_disabled = 1;
        if (rename(tmp_path, out_path) != 0)
            unlink(tmp_path);
    }
    pthread_mutex_unlock(&shim_lock);
}
