/* snapshot/stack_cfi.c: tidemark's own unwinder over the .eh_frame tables.
 *
 * Why: libunwind's unw_backtrace costs about 9 ns a frame here, most of it
 * a miss in its 256 KiB per-thread trace cache; with Python frames on top
 * (stacks=all) a 30-frame alloc+free pair spent half its time there.  This
 * walker keeps a rule per return address in a 32 KiB per-thread cache
 * (512 sets of 4, one cache line each) and needs for a frame one lookup
 * and two loads from the stack.
 *
 * A rule is the row of the DWARF call frame table at that address, reduced
 * to what a walk needs on x86-64: the CFA (canonical frame address: the
 * caller's stack pointer) as rsp or rbp plus an offset, where the return
 * address is saved (an offset from the CFA), and whether and where the
 * caller's rbp is saved.  It is read from the module's .eh_frame_hdr
 * (binary search table, found with _dl_find_object, which takes no lock)
 * and the FDE's and CIE's instructions, run up to the address.  Anything
 * else a rule may say for these registers (DWARF expressions, a register
 * saved in another register, signal frames) is not read: the walk fails
 * and the caller uses libunwind for that stack, so a stack is never cut
 * short or wrong for want of a case here.
 *
 * Every load from the stack is checked against the thread's stack bounds
 * and each frame must move toward the stack's base, so a wrong rule (code
 * unloaded and other code loaded at its address since its rule was
 * cached, which libunwind's cache does not notice either) gives a wrong or
 * failed walk, never a fault.  The tables are read in place: a module
 * unloaded by another thread during the read of its tables is the one
 * case this (like every in-process unwinder) cannot guard.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "stack_cfi.h"

#define NO_ASAN __attribute__((no_sanitize_address))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#if defined(__x86_64__) && defined(DLFO_EH_SEGMENT_TYPE)
#define HAVE_CFI 1
#else
#define HAVE_CFI 0
#endif

int tdm__cfi_available(void) { return HAVE_CFI; }

#if HAVE_CFI

/* DWARF register numbers on x86-64. */
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

/* ---- the rule of one address, packed into a word ------------------------ */

/* bits 0..31 CFA offset (signed), 32..47 rbp's save offset from the CFA
 * (signed), 48..55 return address's offset from the CFA (signed), 56: CFA
 * is rbp-based (else rsp), 57: rbp saved, 58: outermost frame (the return
 * address is undefined), 63: valid.  0 is "no rule". */
#define RULE_RBP_CFA (1ull << 56)
#define RULE_RBP_SAVED (1ull << 57)
#define RULE_END (1ull << 58)
#define RULE_VALID (1ull << 63)

static inline int32_t rule_cfa_off(uint64_t r) { return (int32_t)(uint32_t)r; }
static inline int16_t rule_rbp_off(uint64_t r) { return (int16_t)(uint16_t)(r >> 32); }
static inline int8_t rule_ra_off(uint64_t r) { return (int8_t)(uint8_t)(r >> 48); }

/* ---- reading the tables ------------------------------------------------- */

enum {
    PE_OMIT = 0xff,
    PE_FORMAT = 0x0f,
    PE_APPL = 0x70,
    PE_INDIRECT = 0x80,
    PE_ABSPTR = 0x00,
    PE_ULEB = 0x01,
    PE_UDATA2 = 0x02,
    PE_UDATA4 = 0x03,
    PE_UDATA8 = 0x04,
    PE_SLEB = 0x09,
    PE_SDATA2 = 0x0a,
    PE_SDATA4 = 0x0b,
    PE_SDATA8 = 0x0c,
    PE_PCREL = 0x10,
    PE_DATAREL = 0x30,
};

typedef struct reader {
    const uint8_t *p, *end;
    int bad;
} reader;

static uint64_t uleb(reader *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t sleb(reader *r)
{
    int64_t v = 0;
    unsigned shift = 0;
    while (r->p < r->end) {
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= -((int64_t)1 << shift);
            return v;
        }
    }
    r->bad = 1;
    return 0;
}

static uint64_t fixed(reader *r, unsigned bytes)
{
    if ((size_t)(r->end - r->p) < bytes) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, r->p, bytes); /* little-endian */
    r->p += bytes;
    return v;
}

/* A pointer in encoding `enc`; `datarel` is the base of DW_EH_PE_datarel
 * (the .eh_frame_hdr).  Indirect pointers are not followed (the walker
 * needs none of them): one fails the read (a caller that only skips a
 * field clears the bit first). */
static uintptr_t pointer(reader *r, uint8_t enc, uintptr_t datarel)
{
    if (enc == PE_OMIT || (enc & PE_INDIRECT)) {
        r->bad = 1;
        return 0;
    }
    uintptr_t at = (uintptr_t)r->p;
    uint64_t v;
    switch (enc & PE_FORMAT) {
    case PE_ABSPTR: v = fixed(r, 8); break;
    case PE_ULEB: v = uleb(r); break;
    case PE_UDATA2: v = fixed(r, 2); break;
    case PE_UDATA4: v = fixed(r, 4); break;
    case PE_UDATA8: v = fixed(r, 8); break;
    case PE_SLEB: v = (uint64_t)sleb(r); break;
    case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)fixed(r, 2); break;
    case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)fixed(r, 4); break;
    case PE_SDATA8: v = fixed(r, 8); break;
    default: r->bad = 1; return 0;
    }
    switch (enc & PE_APPL) {
    case 0: break;
    case PE_PCREL: v += at; break;
    case PE_DATAREL: v += datarel; break;
    default: r->bad = 1; return 0;
    }
    return (uintptr_t)v;
}

/* The length field of a CIE or FDE: the entry's end, or NULL. */
static const uint8_t *entry_end(reader *r)
{
    uint64_t len = fixed(r, 4);
    if (len == 0xffffffffu)
        len = fixed(r, 8);
    if (r->bad || len == 0 || len > ((uint64_t)1 << 30))
        return NULL;
    return r->p + len;
}

/* What the CFA program says of the registers the walk needs. */
enum { RS_SAME = 0, RS_OFFSET, RS_UNDEFINED, RS_OTHER };
typedef struct row {
    int cfa_reg;       /* REG_RSP or REG_RBP; -1: an expression */
    int64_t cfa_off;
    int rbp, ra;       /* RS_* */
    int64_t rbp_off, ra_off;
} row;

typedef struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    int has_aug_data; /* 'z' */
    int signal_frame; /* 'S' */
    const uint8_t *instr, *instr_end;
} cie;

static int read_cie(const uint8_t *at, cie *c)
{
    reader r = {at, at + 16, 0};
    const uint8_t *end = entry_end(&r);
    if (!end)
        return 0;
    r.end = end;
    if (fixed(&r, 4) != 0) /* CIE id in .eh_frame */
        return 0;
    uint8_t version = (uint8_t)fixed(&r, 1);
    if (version != 1 && version != 3)
        return 0;
    const char *aug = (const char *)r.p;
    size_t aug_len = strnlen(aug, (size_t)(end - r.p));
    if (aug_len == (size_t)(end - r.p))
        return 0;
    r.p += aug_len + 1;
    c->code_align = uleb(&r);
    c->data_align = sleb(&r);
    uint64_t ra_reg = version == 1 ? fixed(&r, 1) : uleb(&r);
    if (r.bad || ra_reg != REG_RA)
        return 0;
    c->fde_enc = PE_ABSPTR;
    c->has_aug_data = 0;
    c->signal_frame = 0;
    if (aug[0] == 'z') {
        c->has_aug_data = 1;
        uint64_t n = uleb(&r);
        if (r.bad || n > (uint64_t)(end - r.p))
            return 0;
        const uint8_t *data_end = r.p + n;
        for (const char *a = aug + 1; *a; a++) {
            switch (*a) {
            case 'R': c->fde_enc = (uint8_t)fixed(&r, 1); break;
            case 'L': (void)fixed(&r, 1); break;
            case 'P': {
                uint8_t enc = (uint8_t)fixed(&r, 1);
                (void)pointer(&r, enc & (uint8_t)~PE_INDIRECT, 0);
                break;
            }
            case 'S': c->signal_frame = 1; break;
            case 'B': break;
            default: return 0;
            }
        }
        if (r.bad || r.p > data_end)
            return 0;
        r.p = data_end;
    } else if (aug[0]) {
        return 0;
    }
    c->instr = r.p;
    c->instr_end = end;
    return !r.bad;
}

#define STATE_DEPTH 8

/* Runs CFA instructions [p, end) from `loc` while the address stays at or
 * below `pc`.  `init` is the row after the CIE's instructions
 * (DW_CFA_restore goes back to it).  0 on an instruction not understood. */
static int run_cfa(const uint8_t *p, const uint8_t *end, const cie *c, uintptr_t loc,
                   uintptr_t pc, row *rw, const row *init)
{
    row saved[STATE_DEPTH];
    unsigned depth = 0;
    reader r = {p, end, 0};
    while (r.p < r.end && !r.bad) {
        uint8_t op = *r.p++;
        uint64_t reg = 0, delta = 0;
        int64_t off = 0;
        int is_off = 0, is_other = 0, is_restore = 0, is_undef = 0, is_same = 0;
        switch (op >> 6) {
        case 1: delta = op & 0x3f; goto advance;
        case 2:
            reg = op & 0x3f;
            off = (int64_t)uleb(&r) * c->data_align;
            is_off = 1;
            goto set;
        case 3: reg = op & 0x3f; is_restore = 1; goto set;
        default: break;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x01: /* set_loc */
            loc = pointer(&r, c->fde_enc, 0);
            if (loc > pc)
                return 1;
            continue;
        case 0x02: delta = fixed(&r, 1); goto advance;
        case 0x03: delta = fixed(&r, 2); goto advance;
        case 0x04: delta = fixed(&r, 4); goto advance;
        case 0x05: reg = uleb(&r); off = (int64_t)uleb(&r) * c->data_align; is_off = 1; goto set;
        case 0x06: reg = uleb(&r); is_restore = 1; goto set;
        case 0x07: reg = uleb(&r); is_undef = 1; goto set;
        case 0x08: reg = uleb(&r); is_same = 1; goto set;
        case 0x09: reg = uleb(&r); (void)uleb(&r); is_other = 1; goto set;
        case 0x0a:
            if (depth == STATE_DEPTH)
                return 0;
            saved[depth++] = *rw;
            continue;
        case 0x0b:
            if (depth == 0)
                return 0;
            *rw = saved[--depth];
            continue;
        case 0x0c: rw->cfa_reg = (int)uleb(&r); rw->cfa_off = (int64_t)uleb(&r); continue;
        case 0x0d: rw->cfa_reg = (int)uleb(&r); continue;
        case 0x0e: rw->cfa_off = (int64_t)uleb(&r); continue;
        case 0x0f: { /* def_cfa_expression */
            uint64_t n = uleb(&r);
            if (n > (uint64_t)(r.end - r.p))
                return 0;
            r.p += n;
            rw->cfa_reg = -1;
            continue;
        }
        case 0x10: /* expression */
        case 0x16: { /* val_expression */
            reg = uleb(&r);
            uint64_t n = uleb(&r);
            if (n > (uint64_t)(r.end - r.p))
                return 0;
            r.p += n;
            is_other = 1;
            goto set;
        }
        case 0x11: reg = uleb(&r); off = sleb(&r) * c->data_align; is_off = 1; goto set;
        case 0x12:
            rw->cfa_reg = (int)uleb(&r);
            rw->cfa_off = sleb(&r) * c->data_align;
            continue;
        case 0x13: rw->cfa_off = sleb(&r) * c->data_align; continue;
        case 0x14: reg = uleb(&r); (void)uleb(&r); is_other = 1; goto set;
        case 0x15: reg = uleb(&r); (void)sleb(&r); is_other = 1; goto set;
        case 0x2e: (void)uleb(&r); continue; /* GNU_args_size */
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(&r);
            off = -(int64_t)uleb(&r) * c->data_align;
            is_off = 1;
            goto set;
        default: return 0;
        }
    advance:
        loc += delta * c->code_align;
        if (loc > pc)
            return !r.bad;
        continue;
    set:
        if (reg != REG_RBP && reg != REG_RA)
            continue; /* registers the walk does not restore */
        {
            int *state = reg == REG_RBP ? &rw->rbp : &rw->ra;
            int64_t *at = reg == REG_RBP ? &rw->rbp_off : &rw->ra_off;
            if (is_restore) {
                *state = reg == REG_RBP ? init->rbp : init->ra;
                *at = reg == REG_RBP ? init->rbp_off : init->ra_off;
            } else if (is_off) {
                *state = RS_OFFSET;
                *at = off;
            } else if (is_undef) {
                *state = RS_UNDEFINED;
            } else if (is_same) {
                *state = RS_SAME;
            } else if (is_other) {
                *state = RS_OTHER;
            }
        }
    }
    return !r.bad;
}

/* The rule at `pc` from the tables, or 0. */
static NO_ASAN uint64_t read_rule(uintptr_t pc)
{
    struct dl_find_object obj;
    if (_dl_find_object((void *)pc, &obj) != 0 || !obj.dlfo_eh_frame)
        return 0;
    const uint8_t *hdr = obj.dlfo_eh_frame;
    if (hdr[0] != 1)
        return 0;
    reader r = {hdr + 4, hdr + 4 + 32, 0};
    (void)pointer(&r, hdr[1], (uintptr_t)hdr); /* .eh_frame's address */
    uint64_t count = pointer(&r, hdr[2], (uintptr_t)hdr);
    /* The search table: pairs of sdata4 relative to the header, sorted. */
    if (r.bad || hdr[3] != (PE_DATAREL | PE_SDATA4) || count == 0)
        return 0;
    const int32_t *table = (const int32_t *)(const void *)r.p;
    intptr_t rel = (intptr_t)pc - (intptr_t)hdr;
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((intptr_t)table[2 * mid] <= rel)
            lo = mid;
        else
            hi = mid;
    }
    if ((intptr_t)table[2 * lo] > rel)
        return 0;
    const uint8_t *fde = hdr + table[2 * lo + 1];

    reader f = {fde, fde + 16, 0};
    const uint8_t *fde_end = entry_end(&f);
    if (!fde_end)
        return 0;
    f.end = fde_end;
    const uint8_t *cie_ptr_at = f.p;
    uint32_t cie_off = (uint32_t)fixed(&f, 4);
    if (f.bad || cie_off == 0)
        return 0;
    cie c;
    if (!read_cie(cie_ptr_at - cie_off, &c) || c.signal_frame)
        return 0;
    uintptr_t begin = pointer(&f, c.fde_enc, 0);
    uintptr_t range = pointer(&f, c.fde_enc & PE_FORMAT, 0);
    if (f.bad || pc < begin || pc - begin >= range)
        return 0;
    if (c.has_aug_data) {
        uint64_t n = uleb(&f);
        if (f.bad || n > (uint64_t)(f.end - f.p))
            return 0;
        f.p += n;
    }
    row init = {.cfa_reg = REG_RSP, .cfa_off = 8, .rbp = RS_SAME, .ra = RS_UNDEFINED};
    if (!run_cfa(c.instr, c.instr_end, &c, begin, pc, &init, &init))
        return 0;
    row rw = init;
    if (!run_cfa(f.p, f.end, &c, begin, pc, &rw, &init))
        return 0;

    if (rw.ra == RS_UNDEFINED)
        return RULE_VALID | RULE_END;
    if (rw.cfa_reg != REG_RSP && rw.cfa_reg != REG_RBP)
        return 0;
    if (rw.cfa_off < INT32_MIN || rw.cfa_off > INT32_MAX)
        return 0;
    if (rw.ra != RS_OFFSET || rw.ra_off < INT8_MIN || rw.ra_off > INT8_MAX)
        return 0;
    uint64_t rule = RULE_VALID | (uint32_t)(int32_t)rw.cfa_off |
                    (uint64_t)(uint8_t)(int8_t)rw.ra_off << 48;
    if (rw.cfa_reg == REG_RBP)
        rule |= RULE_RBP_CFA;
    if (rw.rbp == RS_OFFSET) {
        if (rw.rbp_off < INT16_MIN || rw.rbp_off > INT16_MAX)
            return 0;
        rule |= RULE_RBP_SAVED | (uint64_t)(uint16_t)(int16_t)rw.rbp_off << 32;
    } else if (rw.rbp != RS_SAME) {
        return 0;
    }
    return rule;
}

/* ---- the per-thread cache ----------------------------------------------- */

#define SETS 512u
#define WAYS 4u
typedef struct cache_set {
    _Alignas(64) struct {
        uintptr_t pc;
        uint64_t rule; /* 0: the tables have no usable rule */
    } way[WAYS];
} cache_set;
/* The thread's last walk that reached the outermost frame or its cap:
 * where each return address was read (increasing toward the stack's base)
 * and what it was.  A later walk that reads the same return address at
 * the same place has reached a frame of that walk; the frames outside it
 * are the same while every return address is still where it was, which
 * costs a load each instead of a rule's lookup (a cache line of `sets` a
 * frame).  A walk cut at its cap (a deep stack: PyTorch's often are) can
 * stand in only for a walk that it fills to that walk's cap. */
#define PREV_MAX 128u
typedef struct prev_walk {
    unsigned n;    /* frames; 0: none to reuse */
    int cut;       /* stopped at its cap: the stack goes on past ra[n - 1] */
    uintptr_t hi;  /* the stack's base it was walked under */
    uintptr_t ra_at[PREV_MAX];
    uintptr_t ra[PREV_MAX];
} prev_walk;

typedef struct walk_area {
    cache_set sets[SETS];
    prev_walk prev;
    int busy; /* a walk is running: a signal handler's walk leaves prev alone */
} walk_area;

typedef struct thread_cache {
    walk_area *area; /* mapped at the thread's first walk */
    unsigned victim;
    uint64_t misses, reused;
} thread_cache;
static __thread thread_cache tc;

static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static _Atomic int cache_key_ok;

static void cache_free(void *area)
{
    /* The destructor runs in the exiting thread: its walks after this one
     * (other destructors that record) map a fresh cache. */
    if (tc.area == area)
        tc.area = NULL;
    munmap(area, sizeof(walk_area));
}

static void make_cache_key(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* The library is unloaded (dlclose by a program that recorded through the
 * API): a thread that ends afterwards must not call cache_free, which is
 * then unmapped.  The caches of threads still running stay mapped. */
__attribute__((destructor)) static void forget_cache_key(void)
{
    if (atomic_exchange(&cache_key_ok, 0))
        pthread_key_delete(cache_key);
}

static __attribute__((noinline)) walk_area *cache_map(void)
{
    void *m = mmap(NULL, sizeof(walk_area), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    pthread_once(&cache_key_once, make_cache_key);
    tc.area = m;
    if (atomic_load(&cache_key_ok))
        (void)pthread_setspecific(cache_key, m);
    return m;
}

static inline unsigned set_of(uintptr_t pc)
{
    uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> 55) & (SETS - 1);
}

static __attribute__((noinline)) uint64_t rule_miss(cache_set *s, uintptr_t pc)
{
    uint64_t rule = read_rule(pc);
    unsigned w = tc.victim++ % WAYS;
    /* A signal handler's walk on this thread may run between any two of
     * these stores: the way reads as empty until it is whole. */
    s->way[w].pc = 0;
    __asm__ volatile("" ::: "memory");
    s->way[w].rule = rule;
    __asm__ volatile("" ::: "memory");
    s->way[w].pc = pc;
    tc.misses++;
    return rule;
}

static inline uint64_t rule_at(cache_set *sets, uintptr_t pc)
{
    cache_set *s = &sets[set_of(pc)];
    for (unsigned w = 0; w < WAYS; w++)
        if (s->way[w].pc == pc)
            return s->way[w].rule;
    return rule_miss(s, pc);
}

/* ---- the walk ----------------------------------------------------------- */

/* The first of the frames of `p` from j outward whose return address is
 * no longer where it was read (p->n: all still on the stack). */
static NO_ASAN unsigned first_frame_gone(const prev_walk *p, unsigned j)
{
    for (unsigned m = j; m < p->n; m++)
        if (*(const uintptr_t *)p->ra_at[m] != p->ra[m])
            return m;
    return p->n;
}

/* Makes prev the walk of n frames read at at[0..n) (ra in buf), followed
 * by prev's own frames from `from` on (none when from = prev->n). */
static void keep_walk(prev_walk *p, const uintptr_t *at, void *const *buf, unsigned n,
                      unsigned from, uintptr_t hi)
{
    unsigned tail = p->n - from;
    if (n + tail > PREV_MAX) {
        p->n = 0;
        return;
    }
    if (n != from) {
        memmove(&p->ra_at[n], &p->ra_at[from], tail * sizeof p->ra_at[0]);
        memmove(&p->ra[n], &p->ra[from], tail * sizeof p->ra[0]);
    }
    memcpy(p->ra_at, at, n * sizeof *at);
    memcpy(p->ra, buf, n * sizeof *buf);
    p->n = n + tail;
    p->hi = hi;
}

NO_ASAN int tdm__cfi_walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t hi, void **buf,
                          unsigned cap)
{
    walk_area *area = tc.area;
    if (UNLIKELY(!area) && !(area = cache_map()))
        return -1;
    cache_set *sets = area->sets;
    prev_walk *prev = &area->prev;
    /* A walk in a signal handler that interrupted this thread's walk
     * neither reuses nor replaces the walk being read or written. */
    int own = !area->busy;
    area->busy = 1;
    __asm__ volatile("" ::: "memory");
    /* j: the last walk's frames inside this one's; gone: one of its frames
     * seen changed (the frames inside it cannot be reused either). */
    unsigned have = own && prev->hi == hi ? prev->n : 0, j = 0, gone = 0;
    uintptr_t at[PREV_MAX];
    unsigned n = 0;
    int result = -1, cut = 0;
    /* The first frame's rule is at its pc; a caller's at the call (the
     * return address may be the first byte of the next function). */
    uintptr_t key = pc;
    while (n < cap) {
        uint64_t rule = rule_at(sets, key);
        if (UNLIKELY(!rule))
            goto out;
        if (rule & RULE_END) {
            result = (int)n;
            goto out;
        }
        uintptr_t cfa = ((rule & RULE_RBP_CFA) ? bp : sp) + (uintptr_t)(intptr_t)rule_cfa_off(rule);
        uintptr_t ra_at = cfa + (uintptr_t)(intptr_t)rule_ra_off(rule);
        if (cfa <= sp || cfa > hi || ra_at < sp || ra_at > hi - 8 || (ra_at & 7))
            goto out;
        if (rule & RULE_RBP_SAVED) {
            uintptr_t bp_at = cfa + (uintptr_t)(intptr_t)rule_rbp_off(rule);
            if (bp_at < sp || bp_at > hi - 8 || (bp_at & 7))
                goto out;
            bp = *(const uintptr_t *)bp_at;
        }
        uintptr_t ra = *(const uintptr_t *)ra_at;
        if (ra == 0) { /* some outermost frames end the chain with 0 */
            result = (int)n;
            goto out;
        }
        /* A frame of the last walk: the rest is that walk's, if it holds. */
        while (j < have && prev->ra_at[j] < ra_at)
            j++;
        if (j < have && j >= gone && prev->ra_at[j] == ra_at && prev->ra[j] == ra &&
            (gone = first_frame_gone(prev, j + 1)) == have) {
            unsigned total = n + (have - j);
            if (total > PREV_MAX || (total < cap && prev->cut))
                goto walk_on; /* frames past the last walk's cut are unknown */
            if (total > cap)
                total = cap; /* this walk's cap, as a walk alone stops */
            for (unsigned m = j; n + m - j < total; m++)
                buf[n + m - j] = (void *)prev->ra[m];
            keep_walk(prev, at, buf, n, j, hi);
            tc.reused++;
            result = (int)total;
            goto done;
        }
    walk_on:
        if (n < PREV_MAX)
            at[n] = ra_at;
        buf[n++] = (void *)ra;
        sp = cfa;
        key = ra - 1;
    }
    result = (int)n; /* at cap: the stack goes on */
    cut = 1;
out:
    /* The outermost frame or the cap reached: this walk is the one to
     * reuse. */
    if (own && result >= 0) {
        prev->n = 0;
        if ((unsigned)result <= PREV_MAX) {
            keep_walk(prev, at, buf, (unsigned)result, 0, hi);
            prev->cut = cut;
        }
    }
done:
    __asm__ volatile("" ::: "memory");
    if (own)
        area->busy = 0;
    return result;
}

uint64_t tdm__cfi_rules_read(void) { return tc.misses; }
uint64_t tdm__cfi_walks_reused(void) { return tc.reused; }

#else /* !HAVE_CFI */

int tdm__cfi_walk(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t hi, void **buf,
                  unsigned cap)
{
    (void)pc, (void)sp, (void)bp, (void)hi, (void)buf, (void)cap;
    return -1;
}

uint64_t tdm__cfi_rules_read(void) { return 0; }
uint64_t tdm__cfi_walks_reused(void) { return 0; }

#endif
