/* viewer-export/import/import_pytorch_tables.c: the bookkeeping half of the
 * PyTorch pickle importer (import_pytorch.h): the snapshot's memory (one
 * `owned` block freed by tdm__import_pytorch_free), a string arena,
 * open-addressing indexes that intern strings, frames and stacks, and
 * typed reads of dict values with errors that name the byte offset.
 *
 * Invariants: every string in the snapshot is interned (pointer equality
 * is string equality); frame i and stack i are unique by content; stack 0
 * is the empty stack.  No state, no locks.
 */
#include "import_pytorch.h"
#include "hash.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the snapshot this importer owns ------------------------------------ */

void tdm__import_pytorch_free(tdm_snap *snap)
{
    owned *o = (owned *)snap;
    if (!o)
        return;
    free(o->snap.devices);
    free((void *)o->snap.phase_names);
    free(o->snap.frames);
    free(o->snap.stacks);
    free(o->snap.events);
    free(o->snap.segments);
    free(o->snap.blocks);
    free(o->snap.annotations);
    free(o->stack_frames);
    for (schunk *c = o->strings, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(o);
}

/* ---- a hash index ----------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
    return mix(tdm__fnv1a_from(TDM__FNV_BASIS ^ seed, p, n)); /* FNV-1a, then mixed */
}

int tdm__pti_htab_init(htab *t)
{
    t->mask = 1023;
    t->used = 0;
    t->slot = calloc(t->mask + 1, sizeof *t->slot);
    t->hash = calloc(t->mask + 1, sizeof *t->hash);
    return t->slot && t->hash ? 0 : -1;
}

void tdm__pti_htab_destroy(htab *t)
{
    free(t->slot);
    free(t->hash);
}


/* The index stored for `key`, or UINT32_MAX (then *where is its slot). */
static uint32_t htab_find(const htab *t, uint64_t h, eq_fn eq, const void *ctx,
                          const void *key, size_t *where)
{
    size_t i = h & t->mask;
    while (t->slot[i]) {
        if (t->hash[i] == h && eq(ctx, t->slot[i] - 1, key))
            return t->slot[i] - 1;
        i = (i + 1) & t->mask;
    }
    *where = i;
    return UINT32_MAX;
}

static int htab_add(htab *t, size_t where, uint64_t h, uint32_t idx)
{
    t->slot[where] = idx + 1;
    t->hash[where] = h;
    if (++t->used * 2 <= t->mask + 1)
        return 0;
    htab g = {.mask = t->mask * 2 + 1};
    g.slot = calloc(g.mask + 1, sizeof *g.slot);
    g.hash = calloc(g.mask + 1, sizeof *g.hash);
    if (!g.slot || !g.hash) {
        tdm__pti_htab_destroy(&g);
        return -1;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        if (!t->slot[i])
            continue;
        size_t k = t->hash[i] & g.mask;
        while (g.slot[k])
            k = (k + 1) & g.mask;
        g.slot[k] = t->slot[i];
        g.hash[k] = t->hash[i];
    }
    g.used = t->used;
    tdm__pti_htab_destroy(t);
    *t = g;
    return 0;
}

void tdm__pti_escape(char *dst, size_t cap, const char *src, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && src[i] && o + 5 <= cap; i++) {
        unsigned char b = (unsigned char)src[i];
        if (b >= 0x20 && b < 0x7f) {
            dst[o++] = (char)b;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[b >> 4];
            dst[o++] = hex[b & 15];
        }
    }
    if (cap)
        dst[o < cap ? o : cap - 1] = '\0';
}

/* "list[i][j]: ", "list[i]: " or "list: ": where in the pickle an error is,
 * for its message ("" without a place). */
static void where_text(char *out, size_t len, const where_t *w)
{
    if (w && w->j >= 0)
        snprintf(out, len, "%s[%ld][%ld]: ", w->list, w->i, w->j);
    else if (w && w->i >= 0)
        snprintf(out, len, "%s[%ld]: ", w->list, w->i);
    else if (w)
        snprintf(out, len, "%s: ", w->list);
}

int tdm__pti_fail(im *c, const tdm_pkv *at, const where_t *w, const char *fmt, ...)
{
    if (c->status != TDM_OK)
        return -1;
    c->status = TDM_FORMAT_ERROR;
    char raw[200], msg[200], path[64] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* The message may quote the pickle's own bytes: printable ASCII only,
     * so that a terminal or a script decoding the tool's output as UTF-8
     * gets text. */
    tdm__pti_escape(msg, sizeof msg, raw, sizeof raw);
    where_text(path, sizeof path, w);
    if (c->err)
        snprintf(c->err, c->errlen, "at byte %u: %s%s", at ? at->at : 0, path, msg);
    return -1;
}

int tdm__pti_oom(im *c)
{
    if (c->status == TDM_OK) {
        c->status = TDM_HOST_OUT_OF_MEMORY;
        if (c->err)
            snprintf(c->err, c->errlen, "out of memory");
    }
    return -1;
}

static char *str_alloc(im *c, size_t n)
{
    schunk *k = c->o->strings;
    if (!k || k->cap - k->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        k = malloc(sizeof *k + cap);
        if (!k)
            return NULL;
        k->cap = cap;
        k->used = 0;
        k->next = c->o->strings;
        c->o->strings = k;
    }
    char *p = k->data + k->used;
    k->used += n;
    return p;
}

static int str_eq(const void *ctx, uint32_t idx, const void *key)
{
    const im *c = ctx;
    const str_key *k = key;
    return strlen(c->strs[idx]) == k->n && memcmp(c->strs[idx], k->s, k->n) == 0;
}

/* One copy of every distinct string (NUL-terminated at its first NUL). */
const char *tdm__pti_intern(im *c, const char *s, size_t n)
{
    const char *nul = memchr(s, 0, n);
    if (nul)
        n = (size_t)(nul - s);
    str_key k = {s, n};
    uint64_t h = hash_bytes(s, n, 0);
    size_t where;
    uint32_t idx = htab_find(&c->str_index, h, str_eq, c, &k, &where);
    if (idx != UINT32_MAX)
        return c->strs[idx];
    char *copy = str_alloc(c, n + 1);
    if (!copy || tdm__grow_array(&c->strs, &c->cap_strs, c->nstrs + 1, sizeof *c->strs) != 0) {
        tdm__pti_oom(c);
        return NULL;
    }
    memcpy(copy, s, n);
    copy[n] = 0;
    c->strs[c->nstrs] = copy;
    if (htab_add(&c->str_index, where, h, (uint32_t)c->nstrs) != 0) {
        tdm__pti_oom(c);
        return NULL;
    }
    c->nstrs++;
    return copy;
}

/* ---- typed access --------------------------------------------------------- */

/* The int under `key` in dict d: 1 found, 0 absent (and !required), -1 error. */
int tdm__pti_fail_range(im *c, const tdm_pkv *v, const where_t *w, const char *key,
                        int64_t min, uint64_t max)
{
    if (c->status != TDM_OK)
        return -1;
    c->status = TDM_FORMAT_ERROR;
    char path[64] = "", value[24];
    where_text(path, sizeof path, w);
    if (v->big)
        snprintf(value, sizeof value, "%" PRIu64, v->v.u);
    else
        snprintf(value, sizeof value, "%" PRId64, v->v.i);
    if (c->err)
        snprintf(c->err, c->errlen, "%s%s out of range at byte %u: %s (want %" PRId64 " to %" PRIu64 ")",
                 path, key, v->at, value, min, max);
    return -1;
}

int tdm__pti_get_range(im *c, const tdm_pkv *d, const char *key, int required,
                       const where_t *w, int64_t min, int64_t max, int64_t *out)
{
    const tdm_pkv *v = tdm__pk_get(d, key);
    if (!v || v->type == TDM_PKV_NONE) {
        if (required)
            return tdm__pti_fail(c, d, w, "'%s' is missing", key);
        return 0;
    }
    if (v->type != TDM_PKV_INT && v->type != TDM_PKV_BOOL)
        return tdm__pti_fail(c, v, w, "'%s' is %s, not int", key, tdm__pk_type_name(v));
    if (v->big || v->v.i < min || v->v.i > max)
        return tdm__pti_fail_range(c, v, w, key, min, (uint64_t)max);
    *out = v->v.i;
    return 1;
}

int tdm__pti_get_bits(im *c, const tdm_pkv *d, const char *key, int required,
                      const where_t *w, uint64_t *out)
{
    const tdm_pkv *v = tdm__pk_get(d, key);
    if (!v || v->type == TDM_PKV_NONE) {
        if (required)
            return tdm__pti_fail(c, d, w, "'%s' is missing", key);
        return 0;
    }
    if (tdm__pk_u64(v, out) != 0)
        return tdm__pti_fail(c, v, w, "'%s' is %s, not int", key, tdm__pk_type_name(v));
    return 1;
}

int tdm__pti_get_u64(im *c, const tdm_pkv *d, const char *key, int required,
                   const where_t *w, uint64_t *out)
{
    int got = tdm__pti_get_bits(c, d, key, required, w, out);
    if (got != 1)
        return got;
    /* A negative size or address would wrap to a huge one. */
    const tdm_pkv *v = tdm__pk_get(d, key);
    if (!v->big && v->v.i < 0)
        return tdm__pti_fail_range(c, v, w, key, 0, UINT64_MAX);
    return 1;
}

int tdm__pti_get_str(im *c, const tdm_pkv *d, const char *key, int required,
                   const where_t *w, const tdm_pkv **out)
{
    const tdm_pkv *v = tdm__pk_get(d, key);
    if (!v || v->type == TDM_PKV_NONE) {
        if (required)
            return tdm__pti_fail(c, d, w, "'%s' is missing", key);
        return 0;
    }
    if (v->type != TDM_PKV_STR)
        return tdm__pti_fail(c, v, w, "'%s' is %s, not str", key, tdm__pk_type_name(v));
    *out = v;
    return 1;
}


/* ---- frames and stacks ---------------------------------------------------- */

static int frame_eq(const void *ctx, uint32_t idx, const void *key)
{
    const tdm_snap_frame *f = &((const im *)ctx)->frames[idx];
    const frame_key *k = key;
    return f->file == k->file && f->function == k->function && f->line == k->line;
}

static int stack_eq(const void *ctx, uint32_t idx, const void *key)
{
    const im *c = ctx;
    const stack_key *k = key;
    return c->stacks[idx].depth == k->depth &&
           memcmp(c->o->stack_frames + c->stack_offs[idx], k->frames,
                  k->depth * sizeof *k->frames) == 0;
}

static const char *frame_text(im *c, const tdm_pkv *f, const char *key)
{
    const tdm_pkv *v = tdm__pk_get(f, key);
    if (v && v->type == TDM_PKV_STR)
        return tdm__pti_intern(c, v->v.s, v->n);
    return tdm__pti_intern(c, "", 0);
}

/* The stack id of a frames list (0 for none or empty); UINT32_MAX on error. */
uint32_t tdm__pti_stack_of(im *c, const tdm_pkv *list, const where_t *w)
{
    if (!list || list->type == TDM_PKV_NONE)
        return 0;
    if (!tdm__pk_is_seq(list)) {
        tdm__pti_fail(c, list, w, "'frames' is %s, not list", tdm__pk_type_name(list));
        return UINT32_MAX;
    }
    if (list == c->last_list) /* memo-shared, or a free reusing its alloc's */
        return c->last_stack;
    uint32_t depth = list->n < 1024 ? list->n : 1024; /* deeper is cut */
    if (depth == 0)
        return 0;
    for (uint32_t k = 0; k < depth; k++) {
        const tdm_pkv *f = list->v.items[k];
        if (f->type != TDM_PKV_DICT) {
            tdm__pti_fail(c, f, w, "frame %u is %s, not dict", k, tdm__pk_type_name(f));
            return UINT32_MAX;
        }
        uint64_t line = 0;
        const tdm_pkv *lv = tdm__pk_get(f, "line");
        if (lv && tdm__pk_u64(lv, &line) != 0)
            line = 0;
        const tdm_pkv *fv = tdm__pk_get(f, "filename"), *nv = tdm__pk_get(f, "name");
        size_t memo = mix((uintptr_t)fv ^ ((uintptr_t)nv << 1) ^ line) &
                      (sizeof c->frame_memo / sizeof c->frame_memo[0] - 1);
        if (fv && nv && c->frame_memo[memo].file == fv && c->frame_memo[memo].name == nv &&
            c->frame_memo[memo].line == line) {
            c->scratch[k] = c->frame_memo[memo].idx;
            continue;
        }
        frame_key fk = {frame_text(c, f, "filename"), frame_text(c, f, "name"),
                        line > UINT32_MAX ? 0 : (uint32_t)line};
        if (!fk.file || !fk.function)
            return UINT32_MAX;
        uint64_t h = mix((uintptr_t)fk.file * 31 + (uintptr_t)fk.function * 7 + fk.line);
        size_t where_slot;
        uint32_t fi = htab_find(&c->frame_index, h, frame_eq, c, &fk, &where_slot);
        if (fi == UINT32_MAX) {
            if (tdm__grow_array(&c->frames, &c->cap_frames, c->nframes + 1, sizeof *c->frames) != 0) {
                tdm__pti_oom(c);
                return UINT32_MAX;
            }
            fi = (uint32_t)c->nframes;
            /* PyTorch writes Python and C++ frames alike; a Python one
             * is a .py file's (as memory_viz tells them apart). */
            size_t flen = strlen(fk.file);
            int python = flen > 3 && strcmp(fk.file + flen - 3, ".py") == 0;
            c->frames[fi] = (tdm_snap_frame){.function = fk.function, .file = fk.file,
                                             .line = fk.line, .module = "",
                                             .kind = python ? TDM_FRAME_PYTHON
                                                            : TDM_FRAME_NATIVE};
            if (htab_add(&c->frame_index, where_slot, h, fi) != 0) {
                tdm__pti_oom(c);
                return UINT32_MAX;
            }
            c->nframes++;
        }
        c->scratch[k] = fi;
        c->frame_memo[memo].file = fv;
        c->frame_memo[memo].name = nv;
        c->frame_memo[memo].line = line;
        c->frame_memo[memo].idx = fi;
    }
    stack_key sk = {c->scratch, depth};
    uint64_t h = hash_bytes(c->scratch, depth * sizeof *c->scratch, depth);
    size_t where_slot;
    uint32_t id = htab_find(&c->stack_index, h, stack_eq, c, &sk, &where_slot);
    if (id == UINT32_MAX) {
        if (tdm__grow_array(&c->stacks, &c->cap_stacks, c->nstacks + 1, sizeof *c->stacks) != 0 ||
            tdm__grow_array(&c->stack_offs, &c->cap_offs, c->nstacks + 1,
                          sizeof *c->stack_offs) != 0 ||
            tdm__grow_array(&c->o->stack_frames, &c->cap_sf, c->nsf + depth,
                          sizeof *c->o->stack_frames) != 0) {
            tdm__pti_oom(c);
            return UINT32_MAX;
        }
        id = (uint32_t)c->nstacks;
        memcpy(c->o->stack_frames + c->nsf, c->scratch, depth * sizeof *c->scratch);
        c->stack_offs[id] = c->nsf;
        c->stacks[id].depth = depth;
        c->nsf += depth;
        if (htab_add(&c->stack_index, where_slot, h, id) != 0) {
            tdm__pti_oom(c);
            return UINT32_MAX;
        }
        c->nstacks++;
    }
    c->last_list = list;
    c->last_stack = id;
    return id;
}