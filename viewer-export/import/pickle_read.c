/* viewer-export/import/pickle_read.c: the pickle reader (pickle_read.h).
 *
 * A single forward pass over the opcodes with an explicit value stack, a
 * stack of MARK positions and a memo table, as the pickle virtual machine
 * defines them.  Values are nodes in an arena owned by the document; the
 * item arrays of lists and dicts grow by doubling inside the arena (the
 * old array is abandoned, so an array costs at most twice its final size).
 *
 * Invariants: `sp` values are on the stack, each a valid node; marks[]
 * holds stack heights in increasing order, each <= sp; a memo slot is NULL
 * or a node of this document.  Every read checks the bytes left first, so
 * a truncated or lying length never reads past the input or allocates
 * more than the input could describe.  No state, no locks.
 */
#include "pickle_read.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} arena_chunk;

struct tdm_pk_doc {
    arena_chunk *chunks;
};

#define ARENA_CHUNK (4u * 1024u * 1024u)

static void *arena_alloc(tdm_pk_doc *d, size_t n)
{
    n = (n + 7) & ~(size_t)7; /* nodes, pointers and doubles need 8 */
    arena_chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = d->chunks;
        d->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

void tdm__pk_free(tdm_pk_doc *doc)
{
    if (!doc)
        return;
    arena_chunk *c = doc->chunks;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

/* ---- opcode names, for messages ----------------------------------------- */

static const char *op_name(unsigned op)
{
    static const struct {
        unsigned char op;
        const char *name;
    } names[] = {
        {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
        {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
        {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"},
        {'R', "REDUCE"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
        {'V', "UNICODE"}, {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"},
        {'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"}, {'e', "APPENDS"},
        {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"},
        {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"},
        {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"},
        {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
        {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"},
        {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
        {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"},
        {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
        {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"},
        {0x92, "NEWOBJ_EX"}, {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"},
        {0x95, "FRAME"}, {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"},
        {0x98, "READONLY_BUFFER"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].op == op)
            return names[i].name;
    return "not a pickle opcode";
}

/* ---- the machine -------------------------------------------------------- */

typedef struct vm {
    const unsigned char *p; /* input */
    size_t len;
    size_t pos;             /* next byte to read */
    size_t op_at;           /* offset of the opcode being executed */
    tdm_pk_doc *doc;
    tdm_pkv **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t nmarks, marks_cap;
    tdm_pkv **memo;
    size_t memo_cap;   /* slots allocated */
    size_t memo_count; /* MEMOIZE's next index: highest index stored + 1 */
    /* Equal short strings and small ints share one node: a snapshot
     * repeats its keys, file names and function names millions of times,
     * and values are immutable, so sharing is invisible to readers. */
    tdm_pkv **strs;      /* open addressing, NULL = empty */
    size_t strs_mask, strs_used;
    tdm_pkv *small_int[256];
    tdm_pkv *singleton[3]; /* None, False, True */
    tdm_pk_error *err;
    tdm_status status;
} vm;

__attribute__((format(printf, 3, 4)))
static int fail(vm *m, tdm_status st, const char *fmt, ...)
{
    m->status = st;
    if (m->err) {
        m->err->offset = m->op_at;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->err->message, sizeof m->err->message, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int oom(vm *m)
{
    return fail(m, TDM_HOST_OUT_OF_MEMORY, "out of memory");
}

/* Points *out at the next n input bytes. */
static int take(vm *m, size_t n, const unsigned char **out)
{
    *out = NULL;
    if (m->len - m->pos < n)
        return fail(m, TDM_TRUNCATED,
                    "%s needs %zu more bytes but the input ends at byte %zu",
                    op_name(m->p[m->op_at]), n, m->len);
    *out = m->p + m->pos;
    m->pos += n;
    return 0;
}

static uint64_t le(const unsigned char *b, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static tdm_pkv *node(vm *m, tdm_pkv_type type)
{
    tdm_pkv *v = arena_alloc(m->doc, sizeof *v);
    if (!v) {
        oom(m);
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)type;
    v->at = m->op_at > UINT32_MAX ? UINT32_MAX : (uint32_t)m->op_at;
    return v;
}

static int push(vm *m, tdm_pkv *v)
{
    if (!v)
        return -1;
    if (m->sp == m->stack_cap) {
        size_t cap = m->stack_cap ? m->stack_cap * 2 : 64;
        tdm_pkv **s = realloc(m->stack, cap * sizeof *s);
        if (!s)
            return oom(m);
        m->stack = s;
        m->stack_cap = cap;
    }
    m->stack[m->sp++] = v;
    return 0;
}

/* The stack height at the innermost MARK, which is popped. */
static int pop_mark(vm *m, size_t *at)
{
    if (!m->nmarks)
        return fail(m, TDM_FORMAT_ERROR, "%s without a MARK", op_name(m->p[m->op_at]));
    *at = m->marks[--m->nmarks];
    return 0;
}

/* Items above the innermost MARK live on the stack; anything that takes
 * values off the stack must not reach below that MARK. */
static size_t floor_of_stack(const vm *m)
{
    return m->nmarks ? m->marks[m->nmarks - 1] : 0;
}

static int need(vm *m, size_t n)
{
    if (m->sp - floor_of_stack(m) < n)
        return fail(m, TDM_FORMAT_ERROR, "%s needs %zu value%s on the stack",
                    op_name(m->p[m->op_at]), n, n == 1 ? "" : "s");
    return 0;
}

/* A new LIST/TUPLE/DICT holding a copy of `count` slots. */
static tdm_pkv *container(vm *m, tdm_pkv_type type, tdm_pkv **slots, size_t count)
{
    if (count > UINT32_MAX) {
        fail(m, TDM_FORMAT_ERROR, "container of %zu items is too large", count);
        return NULL;
    }
    tdm_pkv *v = node(m, type);
    if (!v)
        return NULL;
    if (count) {
        v->v.items = arena_alloc(m->doc, count * sizeof *v->v.items);
        if (!v->v.items) {
            oom(m);
            return NULL;
        }
        memcpy(v->v.items, slots, count * sizeof *slots);
    }
    v->cap = (uint32_t)count;
    v->n = (uint32_t)(type == TDM_PKV_DICT ? count / 2 : count);
    return v;
}

/* Appends `count` slots to a list's or dict's item array. */
static int extend(vm *m, tdm_pkv *c, tdm_pkv **slots, size_t count)
{
    size_t used = c->type == TDM_PKV_DICT ? 2 * (size_t)c->n : c->n;
    if (count == 0)
        return 0; /* MARK APPENDS with nothing between: valid, a no-op */
    if (count > UINT32_MAX - used)
        return fail(m, TDM_FORMAT_ERROR, "container grows past 2^32 items");
    if (used + count > c->cap) {
        /* The first batch sizes the array exactly: most dicts and lists
         * get all their items in one SETITEMS/APPENDS. */
        size_t cap = c->cap ? (size_t)c->cap * 2 : count;
        while (cap < used + count)
            cap *= 2;
        if (cap > UINT32_MAX)
            cap = UINT32_MAX;
        tdm_pkv **items = arena_alloc(m->doc, cap * sizeof *items);
        if (!items)
            return oom(m);
        if (used)
            memcpy(items, c->v.items, used * sizeof *items);
        c->v.items = items;
        c->cap = (uint32_t)cap;
    }
    memcpy(c->v.items + used, slots, count * sizeof *slots);
    used += count;
    c->n = (uint32_t)(c->type == TDM_PKV_DICT ? used / 2 : used);
    return 0;
}

/* Strings up to this long are shared (longer ones are rarely repeated). */
#define SHARED_STR_MAX 256

static uint64_t str_hash(const unsigned char *b, size_t n)
{
    /* 8 bytes at a time, then a full avalanche: the table is indexed by
     * the low bits, and snapshot strings share long prefixes. */
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, b + i, n - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* The slot of the shared string b[0..n), or the empty slot for it. */
static size_t strs_slot(const vm *m, const unsigned char *b, size_t n)
{
    size_t i = str_hash(b, n) & m->strs_mask;
    while (m->strs[i] && (m->strs[i]->n != n || memcmp(m->strs[i]->v.s, b, n) != 0))
        i = (i + 1) & m->strs_mask;
    return i;
}

static int strs_grow(vm *m)
{
    size_t cap = m->strs ? (m->strs_mask + 1) * 2 : 4096;
    tdm_pkv **old = m->strs;
    size_t old_cap = m->strs ? m->strs_mask + 1 : 0;
    m->strs = calloc(cap, sizeof *m->strs);
    if (!m->strs) {
        m->strs = old;
        return -1;
    }
    m->strs_mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            m->strs[strs_slot(m, (const unsigned char *)old[i]->v.s, old[i]->n)] = old[i];
    free(old);
    return 0;
}

static int op_str(vm *m, tdm_pkv_type type, size_t n)
{
    const unsigned char *b;
    if (take(m, n, &b) != 0)
        return -1;
    if (n > UINT32_MAX)
        return fail(m, TDM_FORMAT_ERROR, "string of %zu bytes is too long", n);
    size_t slot = 0;
    int shared = type == TDM_PKV_STR && n <= SHARED_STR_MAX;
    if (shared) {
        if ((m->strs_used + 1) * 2 > (m->strs ? m->strs_mask + 1 : 0) && strs_grow(m) != 0)
            return oom(m);
        slot = strs_slot(m, b, n);
        if (m->strs[slot])
            return push(m, m->strs[slot]);
    }
    tdm_pkv *v = node(m, type);
    if (!v)
        return -1;
    char *s = arena_alloc(m->doc, n + 1);
    if (!s)
        return oom(m);
    memcpy(s, b, n);
    s[n] = 0;
    v->v.s = s;
    v->n = (uint32_t)n;
    if (shared) {
        m->strs[slot] = v;
        m->strs_used++;
    }
    return push(m, v);
}

static int op_int(vm *m, int64_t i)
{
    if (i >= 0 && i < 256 && m->small_int[i])
        return push(m, m->small_int[i]);
    tdm_pkv *v = node(m, TDM_PKV_INT);
    if (!v)
        return -1;
    v->v.i = i;
    if (i >= 0 && i < 256)
        m->small_int[i] = v;
    return push(m, v);
}

/* None (0), False (1), True (2): one node each. */
static int op_singleton(vm *m, int which)
{
    if (!m->singleton[which]) {
        tdm_pkv *v = node(m, which ? TDM_PKV_BOOL : TDM_PKV_NONE);
        if (!v)
            return -1;
        v->v.i = which == 2;
        m->singleton[which] = v;
    }
    return push(m, m->singleton[which]);
}

static int op_long1(vm *m)
{
    const unsigned char *b;
    if (take(m, 1, &b) != 0)
        return -1;
    size_t n = b[0];
    if (take(m, n, &b) != 0)
        return -1;
    tdm_pkv *v = node(m, TDM_PKV_INT);
    if (!v)
        return -1;
    if (n == 0)
        return push(m, v); /* LONG1 with no bytes is 0 */
    int negative = (b[n - 1] & 0x80) != 0;
    if (n <= 8) {
        uint64_t u = le(b, (unsigned)n);
        if (negative && n < 8)
            u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
        v->v.i = (int64_t)u;
        return push(m, v);
    }
    /* Python writes unsigned values >= 2^63 (high-half addresses, SIZE_MAX)
     * as 9 bytes with a zero top byte; accept any length whose extra bytes
     * are zero, i.e. a non-negative value below 2^64. */
    for (size_t k = 8; k < n; k++)
        if (b[k] != 0)
            return fail(m, TDM_FORMAT_ERROR,
                        "LONG1 of %zu bytes does not fit in 64 bits", n);
    v->v.u = le(b, 8);
    v->big = (v->v.u >> 63) != 0;
    return push(m, v);
}

static int memo_put(vm *m, uint64_t idx)
{
    if (!m->sp)
        return fail(m, TDM_FORMAT_ERROR, "%s on an empty stack", op_name(m->p[m->op_at]));
    /* Memo indices are dense in every real pickle; one beyond the input's
     * size could only be a forged value meant to make us allocate. */
    if (idx >= m->len)
        return fail(m, TDM_FORMAT_ERROR, "memo index %" PRIu64 " out of range", idx);
    if (idx >= m->memo_cap) {
        size_t cap = m->memo_cap ? m->memo_cap : 256;
        while (cap <= idx)
            cap *= 2;
        tdm_pkv **t = realloc(m->memo, cap * sizeof *t);
        if (!t)
            return oom(m);
        memset(t + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *t);
        m->memo = t;
        m->memo_cap = cap;
    }
    m->memo[idx] = m->stack[m->sp - 1];
    if (idx + 1 > m->memo_count)
        m->memo_count = (size_t)idx + 1;
    return 0;
}

static int memo_get(vm *m, uint64_t idx)
{
    if (idx >= m->memo_cap || !m->memo[idx])
        return fail(m, TDM_FORMAT_ERROR, "memo index %" PRIu64 " was never stored", idx);
    return push(m, m->memo[idx]);
}

static int op_mark(vm *m)
{
    if (m->nmarks == m->marks_cap) {
        size_t cap = m->marks_cap ? m->marks_cap * 2 : 32;
        size_t *t = realloc(m->marks, cap * sizeof *t);
        if (!t)
            return oom(m);
        m->marks = t;
        m->marks_cap = cap;
    }
    m->marks[m->nmarks++] = m->sp;
    return 0;
}

/* DICT, LIST, TUPLE: a new container from the items above the MARK. */
static int op_build_from_mark(vm *m, tdm_pkv_type type)
{
    size_t at = 0;
    if (pop_mark(m, &at) != 0)
        return -1;
    size_t count = m->sp - at;
    if (type == TDM_PKV_DICT && count % 2)
        return fail(m, TDM_FORMAT_ERROR, "DICT with an odd number of items");
    tdm_pkv *v = container(m, type, m->stack + at, count);
    if (!v)
        return -1;
    m->sp = at;
    return push(m, v);
}

/* APPEND(S), SETITEM(S): add items to the container below them. */
static int op_add(vm *m, tdm_pkv_type type, int from_mark, size_t single)
{
    size_t at = 0;
    if (from_mark) {
        if (pop_mark(m, &at) != 0)
            return -1;
    } else {
        if (need(m, single) != 0)
            return -1;
        at = m->sp - single;
    }
    size_t count = m->sp - at;
    if (at == 0 || at <= floor_of_stack(m))
        return fail(m, TDM_FORMAT_ERROR, "%s has no container to add to",
                    op_name(m->p[m->op_at]));
    tdm_pkv *c = m->stack[at - 1];
    if (c->type != type)
        return fail(m, TDM_FORMAT_ERROR, "%s on a %s", op_name(m->p[m->op_at]),
                    tdm__pk_type_name(c));
    if (type == TDM_PKV_DICT && count % 2)
        return fail(m, TDM_FORMAT_ERROR, "SETITEMS with an odd number of items");
    if (extend(m, c, m->stack + at, count) != 0)
        return -1;
    m->sp = at;
    return 0;
}

static int op_tuple_n(vm *m, size_t n)
{
    if (need(m, n) != 0)
        return -1;
    tdm_pkv *v = container(m, TDM_PKV_TUPLE, m->stack + m->sp - n, n);
    if (!v)
        return -1;
    m->sp -= n;
    return push(m, v);
}

/* Executes one opcode; 1 after STOP, 0 to go on, -1 on error. */
static int step(vm *m)
{
    const unsigned char *b;
    m->op_at = m->pos;
    unsigned op = m->p[m->pos++];
    switch (op) {
    case 0x80: /* PROTO */
        if (take(m, 1, &b) != 0)
            return -1;
        if (b[0] < 2 || b[0] > 5)
            return fail(m, TDM_FORMAT_ERROR,
                        "pickle protocol %u is not supported (2 to 5 are)", b[0]);
        return 0;
    case 0x95: /* FRAME: only a length hint; the content is parsed inline */
        if (take(m, 8, &b) != 0)
            return -1;
        if (le(b, 8) > m->len - m->pos)
            return fail(m, TDM_TRUNCATED, "FRAME of %" PRIu64 " bytes but only %zu left",
                        le(b, 8), m->len - m->pos);
        return 0;
    case '.': /* STOP */
        if (m->nmarks)
            return fail(m, TDM_FORMAT_ERROR, "STOP inside an unclosed MARK");
        if (m->sp != 1)
            return fail(m, TDM_FORMAT_ERROR, "STOP with %zu values on the stack", m->sp);
        return 1;
    case '(':
        return op_mark(m);
    case '}':
        return push(m, node(m, TDM_PKV_DICT));
    case ']':
        return push(m, node(m, TDM_PKV_LIST));
    case ')':
        return push(m, node(m, TDM_PKV_TUPLE));
    case 'd':
        return op_build_from_mark(m, TDM_PKV_DICT);
    case 'l':
        return op_build_from_mark(m, TDM_PKV_LIST);
    case 't':
        return op_build_from_mark(m, TDM_PKV_TUPLE);
    case 0x85:
        return op_tuple_n(m, 1);
    case 0x86:
        return op_tuple_n(m, 2);
    case 0x87:
        return op_tuple_n(m, 3);
    case 's':
        return op_add(m, TDM_PKV_DICT, 0, 2);
    case 'u':
        return op_add(m, TDM_PKV_DICT, 1, 0);
    case 'a':
        return op_add(m, TDM_PKV_LIST, 0, 1);
    case 'e':
        return op_add(m, TDM_PKV_LIST, 1, 0);
    case 'N':
        return op_singleton(m, 0);
    case 0x88:
        return op_singleton(m, 2);
    case 0x89:
        return op_singleton(m, 1);
    case 'K':
        if (take(m, 1, &b) != 0)
            return -1;
        return op_int(m, b[0]);
    case 'M':
        if (take(m, 2, &b) != 0)
            return -1;
        return op_int(m, (int64_t)le(b, 2));
    case 'J':
        if (take(m, 4, &b) != 0)
            return -1;
        return op_int(m, (int32_t)(uint32_t)le(b, 4));
    case 0x8a:
        return op_long1(m);
    case 'G': {
        if (take(m, 8, &b) != 0)
            return -1;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | b[i]; /* big-endian */
        tdm_pkv *v = node(m, TDM_PKV_FLOAT);
        if (!v)
            return -1;
        memcpy(&v->v.f, &u, sizeof u);
        return push(m, v);
    }
    case 0x8c:
        if (take(m, 1, &b) != 0)
            return -1;
        return op_str(m, TDM_PKV_STR, b[0]);
    case 'X':
        if (take(m, 4, &b) != 0)
            return -1;
        return op_str(m, TDM_PKV_STR, (size_t)le(b, 4));
    case 0x96: {
        if (take(m, 8, &b) != 0)
            return -1;
        uint64_t n = le(b, 8);
        if (n > m->len - m->pos)
            return fail(m, TDM_TRUNCATED, "BYTEARRAY8 of %" PRIu64 " bytes but only %zu left",
                        n, m->len - m->pos);
        return op_str(m, TDM_PKV_BYTES, (size_t)n);
    }
    case 'q':
        if (take(m, 1, &b) != 0)
            return -1;
        return memo_put(m, b[0]);
    case 'r':
        if (take(m, 4, &b) != 0)
            return -1;
        return memo_put(m, le(b, 4));
    case 0x94:
        return memo_put(m, m->memo_count);
    case 'h':
        if (take(m, 1, &b) != 0)
            return -1;
        return memo_get(m, b[0]);
    case 'j':
        if (take(m, 4, &b) != 0)
            return -1;
        return memo_get(m, le(b, 4));
    default:
        if (op >= 0x20 && op < 0x7f)
            return fail(m, TDM_FORMAT_ERROR,
                        "unsupported pickle opcode 0x%02x ('%c', %s): PyTorch snapshots "
                        "use only plain dicts, lists, tuples, strings and numbers",
                        op, (int)op, op_name(op));
        return fail(m, TDM_FORMAT_ERROR,
                    "unsupported pickle opcode 0x%02x (%s): PyTorch snapshots use only "
                    "plain dicts, lists, tuples, strings and numbers",
                    op, op_name(op));
    }
}

tdm_status tdm__pk_parse(const void *data, size_t len, tdm_pk_doc **doc,
                         const tdm_pkv **root, tdm_pk_error *err)
{
    *doc = NULL;
    *root = NULL;
    if (err) {
        err->offset = 0;
        err->message[0] = 0;
    }
    vm m = {.p = data, .len = len, .err = err, .status = TDM_OK};
    m.doc = calloc(1, sizeof *m.doc);
    /* The stack exists from the start: an opcode that takes zero items
     * from it ("(t", an empty TUPLE) computes stack + sp, which on a null
     * pointer is undefined even when sp is 0. */
    m.stack_cap = 64;
    m.stack = malloc(m.stack_cap * sizeof *m.stack);
    if (!m.doc || !m.stack) {
        free(m.doc);
        free(m.stack);
        if (err)
            snprintf(err->message, sizeof err->message, "out of memory");
        return TDM_HOST_OUT_OF_MEMORY;
    }
    int r = 0;
    while (r == 0) {
        if (m.pos >= m.len) {
            m.op_at = m.len;
            fail(&m, TDM_TRUNCATED, len ? "the pickle ends without STOP" : "the input is empty");
            r = -1;
            break;
        }
        r = step(&m);
    }
    free(m.marks);
    free(m.memo);
    free(m.strs);
    if (r < 0) {
        free(m.stack);
        tdm__pk_free(m.doc);
        return m.status;
    }
    *root = m.stack[0];
    free(m.stack);
    *doc = m.doc;
    return TDM_OK;
}

/* ---- queries ------------------------------------------------------------ */

const tdm_pkv *tdm__pk_get(const tdm_pkv *dict, const char *key)
{
    if (!dict || dict->type != TDM_PKV_DICT)
        return NULL;
    size_t klen = strlen(key);
    const tdm_pkv *found = NULL;
    for (uint32_t i = 0; i < dict->n; i++) {
        const tdm_pkv *k = dict->v.items[2 * i];
        /* Later SETITEMs win, as in Python. */
        if (k->type == TDM_PKV_STR && k->n == klen && memcmp(k->v.s, key, klen) == 0)
            found = dict->v.items[2 * i + 1];
    }
    return found;
}

const char *tdm__pk_type_name(const tdm_pkv *v)
{
    static const char *const names[] = {"None", "bool", "int",   "float", "str",
                                        "bytearray", "list", "tuple", "dict"};
    if (!v)
        return "nothing";
    return v->type < sizeof names / sizeof names[0] ? names[v->type] : "?";
}

int tdm__pk_u64(const tdm_pkv *v, uint64_t *out)
{
    if (!v || (v->type != TDM_PKV_INT && v->type != TDM_PKV_BOOL))
        return -1;
    *out = v->big ? v->v.u : (uint64_t)v->v.i;
    return 0;
}
