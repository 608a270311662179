/* snapshot/pycode.c: the table of Python code objects seen by captures.
 *
 * One anonymous mapping, reserved once (MAP_NORESERVE, so only the pages
 * used count), never the program's heap: hash slots, a record per code
 * object and a pool of bytes for the copied texts.  Like the stack intern
 * table (stack.c), a lookup takes no lock, and an object not yet seen is
 * inserted under a short mutex that copies its texts and publishes the
 * record and its slot with release stores.
 *
 * Why copy at first sight.  A code object can die and its address be
 * reused by another one long before the dump; the interpreter may have
 * finalized by then (dump_on=exit).  So the record is keyed by the code
 * object's address *and* by fields read from the live object at capture:
 * the addresses of its file name, qualified name and line table objects,
 * the two strings' cached hashes, the line table's and bytecode's lengths
 * and the first line.  A reused address with other content differs in at
 * least one of them and gets a record of its own, so a name is never that
 * of a dead code object.  The residual case: a function recompiled under
 * the same name, file and first line, with bytecode and line table of the
 * same lengths, whose new objects all land at the old addresses, would
 * show the old line numbers (never another function's name).
 *
 * The texts are read from the objects' memory as the interpreter lays
 * them out (compact str: 1, 2 or 4 bytes a character, written here as
 * UTF-8; bytes: ob_sval), never through the interpreter's API.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "pyframes.h"

#define MAX_CODES (1u << 18)
#define POOL_BYTES (UINT32_C(1) << 27) /* 128 MiB reserved */
#define TEXT_MAX 1024u                 /* characters kept of a name */
#define LINETABLE_MAX (1u << 20)       /* bytes kept of a line table */

typedef struct code_rec {
    tdm__py_code_key key;
    uint32_t filename_off, qualname_off, linetable_off, linetable_len;
} code_rec;

static struct {
    pthread_mutex_t lock;
    _Atomic int ready; /* 1 mapped, -1 mapping failed */
    tdm__py_text_layout layout;
    void *map;
    size_t map_bytes;
    _Atomic uint64_t *slots; /* tag << 32 | id; 0 = empty */
    uint64_t slot_mask;
    code_rec *recs;          /* [0..MAX_CODES] by id */
    char *pool;
    uint32_t pool_used;      /* under lock */
    _Atomic uint32_t count;
    _Atomic uint64_t overflows;
} codes = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Each thread's memo of the code objects it saw last, direct-mapped by
 * address.  A Python loop's captures see the same few code objects again
 * and again; their slots and records in the shared table lie scattered
 * over megabytes, so the shared lookup costs a cache or TLB miss or two
 * per frame, while the memo stays in a few lines of L1.  An entry answers
 * only for the full key: a reused address with other content misses it,
 * as it misses in the table.  Ids are never taken back (the table lives
 * as long as the process), so a memo entry never goes stale.  An entry
 * is made only after the capture checked the types of the code object's
 * strings, so a hit needs no type checks of its own. */
static __thread tdm__py_code_memo thread_memo;

tdm__py_code_memo *tdm__py_code_memo_this_thread(void)
{
    return &thread_memo;
}

static void atfork_prepare(void) { pthread_mutex_lock(&codes.lock); }
static void atfork_release(void) { pthread_mutex_unlock(&codes.lock); }

/* At load: the C library runs in a child only the handlers registered
 * before its fork began, so handlers registered when the table is first
 * made (under its lock) missed a fork made meanwhile, and the child got
 * the lock held by a thread it does not have (test_pycode_fork). */
__attribute__((constructor)) static void register_atfork_at_load(void)
{
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

int tdm__py_code_init(const tdm__py_text_layout *layout)
{
    int r = atomic_load_explicit(&codes.ready, memory_order_acquire);
    if (r)
        return r > 0;
    pthread_mutex_lock(&codes.lock);
    if (!atomic_load_explicit(&codes.ready, memory_order_relaxed)) {
        uint64_t nslots = 2 * (uint64_t)MAX_CODES;
        size_t slot_bytes = nslots * sizeof(uint64_t);
        size_t rec_bytes = (MAX_CODES + 1) * sizeof(code_rec);
        size_t bytes = slot_bytes + rec_bytes + POOL_BYTES;
        void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED) {
            atomic_store_explicit(&codes.ready, -1, memory_order_release);
        } else {
            codes.layout = *layout;
            codes.map = map;
            codes.map_bytes = bytes;
            codes.slots = (_Atomic uint64_t *)map;
            codes.slot_mask = nslots - 1;
            codes.recs = (code_rec *)((char *)map + slot_bytes);
            codes.pool = (char *)map + slot_bytes + rec_bytes;
            codes.pool_used = 1; /* offset 0 is the empty string */
            atomic_store_explicit(&codes.ready, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&codes.lock);
    return atomic_load_explicit(&codes.ready, memory_order_acquire) > 0;
}

static inline uint64_t hash_key(const tdm__py_code_key *k)
{
    uint64_t h = (uint64_t)k->code * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)k->qualname + ((uint64_t)k->filename << 7) +
         (uint64_t)k->firstlineno;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

static inline uint32_t probe(uint64_t h, const tdm__py_code_key *key,
                             uint64_t *empty)
{
    const uint64_t tag = h >> 32, mask = codes.slot_mask;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t s = atomic_load_explicit(&codes.slots[i], memory_order_acquire);
        if (s == 0) {
            *empty = i;
            return 0;
        }
        if ((s >> 32) == tag && tdm__py_same_key(&codes.recs[(uint32_t)s].key, key))
            return (uint32_t)s;
    }
}

/* ---- copying texts (under the lock) ------------------------------------- */

static int pool_room(size_t n) { return n <= POOL_BYTES - codes.pool_used; }

static void put_utf8(char *out, size_t *n, uint32_t c)
{
    if (c < 0x80) {
        out[(*n)++] = (char)c;
    } else if (c < 0x800) {
        out[(*n)++] = (char)(0xc0 | c >> 6);
        out[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        out[(*n)++] = (char)(0xe0 | c >> 12);
        out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f));
        out[(*n)++] = (char)(0x80 | (c & 0x3f));
    } else {
        out[(*n)++] = (char)(0xf0 | c >> 18);
        out[(*n)++] = (char)(0x80 | (c >> 12 & 0x3f));
        out[(*n)++] = (char)(0x80 | (c >> 6 & 0x3f));
        out[(*n)++] = (char)(0x80 | (c & 0x3f));
    }
}

/* Copies a str object's text into the pool as UTF-8; returns its offset,
 * 0 (the empty string) for a form it does not read, UINT32_MAX when the
 * pool is full.  State bits (3.11 to 3.13): kind 2-4, compact 5, ascii 6. */
static uint32_t copy_str(uintptr_t obj)
{
    const tdm__py_text_layout *l = &codes.layout;
    if (!obj)
        return 0;
    int64_t len = *(const int64_t *)(obj + l->str_length);
    unsigned state = *(const unsigned char *)(obj + l->str_state);
    unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
    if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4))
        return 0;
    if (len > TEXT_MAX)
        len = TEXT_MAX;
    if (!pool_room((size_t)len * 4 + 1))
        return UINT32_MAX;
    uint32_t off = codes.pool_used;
    char *out = codes.pool + off;
    size_t n = 0;
    if (ascii) {
        memcpy(out, (const char *)(obj + l->str_ascii_size), (size_t)len);
        n = (size_t)len;
    } else {
        const unsigned char *d = (const unsigned char *)(obj + l->str_compact_size);
        for (int64_t i = 0; i < len; i++) {
            uint32_t c = kind == 1 ? d[i]
                         : kind == 2 ? ((const uint16_t *)d)[i]
                                     : ((const uint32_t *)d)[i];
            put_utf8(out, &n, c > 0x10ffff ? '?' : c);
        }
    }
    out[n] = '\0';
    codes.pool_used += (uint32_t)n + 1;
    return off;
}

static uint32_t insert(uint64_t h, const tdm__py_code_key *key)
{
    const tdm__py_text_layout *l = &codes.layout;
    uint64_t slot = 0;
    pthread_mutex_lock(&codes.lock);
    uint32_t id = probe(h, key, &slot);
    if (id == 0) {
        uint32_t count = atomic_load_explicit(&codes.count, memory_order_relaxed);
        uint32_t saved_used = codes.pool_used;
        uint32_t fn = UINT32_MAX, qn = UINT32_MAX, lt = UINT32_MAX;
        uint32_t lt_len = 0;
        if (count < MAX_CODES) {
            fn = copy_str(key->filename);
            qn = fn == UINT32_MAX ? UINT32_MAX : copy_str(key->qualname);
            int64_t n = key->linetable_len;
            if (n < 0 || n > LINETABLE_MAX)
                n = 0; /* no lines rather than a wrong one */
            if (qn != UINT32_MAX && pool_room((size_t)n)) {
                lt = codes.pool_used;
                lt_len = (uint32_t)n;
                memcpy(codes.pool + lt, (const char *)(key->linetable + l->bytes_data),
                       (size_t)n);
                codes.pool_used += lt_len;
            }
        }
        if (lt == UINT32_MAX) {
            codes.pool_used = saved_used;
            atomic_fetch_add_explicit(&codes.overflows, 1, memory_order_relaxed);
        } else {
            id = count + 1;
            code_rec *r = &codes.recs[id];
            r->key = *key;
            r->filename_off = fn;
            r->qualname_off = qn;
            r->linetable_off = lt;
            r->linetable_len = lt_len;
            atomic_store_explicit(&codes.count, id, memory_order_release);
            atomic_store_explicit(&codes.slots[slot], ((h >> 32) << 32) | id,
                                  memory_order_release);
        }
    }
    pthread_mutex_unlock(&codes.lock);
    return id;
}

uint64_t tdm__py_code_id(tdm__py_code_memo *memo, const tdm__py_code_key *key)
{
    if (atomic_load_explicit(&codes.ready, memory_order_acquire) <= 0)
        return 0;
    uint64_t h = hash_key(key), slot;
    uint32_t id = probe(h, key, &slot);
    if (!id)
        id = insert(h, key);
    if (id) {
        unsigned i = tdm__py_memo_index(key->code);
        memo->slot[i].key = *key;
        memo->slot[i].id = id;
    }
    return id;
}

uint64_t tdm__py_code_overflows(void)
{
    return atomic_load_explicit(&codes.overflows, memory_order_relaxed);
}

/* ---- line tables -------------------------------------------------------- */

/* The location table of 3.11 to 3.13 (CPython's Objects/locations.md):
 * entries of a header byte (bit 7 set; bits 3-6 the form, bits 0-2 the
 * code units covered minus one) and the form's operands.  Forms: 15 no
 * location; 14 long (signed line delta, end line, column, end column as
 * varints); 13 no column (signed line delta); 10-12 one line (delta
 * form - 10, two column bytes); 0-9 short (delta 0, one column byte). */
typedef struct reader {
    const unsigned char *p, *end;
} reader;

static int read_varint(reader *r, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (r->p >= r->end || shift > 60)
            return -1;
        unsigned b = *r->p++;
        v |= (uint64_t)(b & 63) << shift;
        if (!(b & 64))
            break;
        shift += 6;
    }
    *out = v;
    return 0;
}

static int read_svarint(reader *r, int64_t *out)
{
    uint64_t u;
    if (read_varint(r, &u) != 0)
        return -1;
    *out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return 0;
}

/* The line of instruction `instr` (code units), 0 when none. */
static unsigned line_of(const unsigned char *table, uint32_t len,
                        int64_t firstlineno, int64_t instr)
{
    if (instr < 0)
        return firstlineno > 0 ? (unsigned)firstlineno : 0;
    reader r = {table, table + len};
    int64_t line = firstlineno, addr = 0;
    while (r.p < r.end) {
        unsigned head = *r.p++;
        if (!(head & 0x80))
            return 0; /* not at an entry: the table is not what we think */
        unsigned form = head >> 3 & 15, units = (head & 7) + 1;
        int64_t delta = 0;
        int has_line = 1;
        uint64_t skip;
        if (form == 15) {
            has_line = 0;
        } else if (form == 14) {
            if (read_svarint(&r, &delta) || read_varint(&r, &skip) ||
                read_varint(&r, &skip) || read_varint(&r, &skip))
                return 0;
        } else if (form == 13) {
            if (read_svarint(&r, &delta))
                return 0;
        } else if (form >= 10) {
            delta = form - 10;
            r.p += 2;
        } else {
            r.p += 1;
        }
        if (r.p > r.end)
            return 0;
        line += delta;
        if (instr < addr + units)
            return has_line && line > 0 ? (unsigned)line : 0;
        addr += units;
    }
    return 0;
}

int tdm__py_code_resolve(uint64_t id, int64_t instr, tdm__py_symbol *out)
{
    if (id == 0 || id > atomic_load_explicit(&codes.count, memory_order_acquire))
        return 0;
    const code_rec *r = &codes.recs[id];
    out->function = codes.pool + r->qualname_off;
    out->file = codes.pool + r->filename_off;
    out->line = line_of((const unsigned char *)codes.pool + r->linetable_off,
                        r->linetable_len, r->key.firstlineno, instr);
    return 1;
}
