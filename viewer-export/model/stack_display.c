/* viewer-export/model/stack_display.c: stacks prepared for display
 * (stack_display.h).  State: the configured options and regexes, and the
 * snapshots prepared (their new names, focus marks); single threaded. */
#include "stack_display.h"
#include "hash.h"
#include "names.h"
#include "sites.h"
#include "format_rules.h"
#include "snap_build.h" /* tdm__grow_array */
#include "vendor.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls that only pass a request for device memory on: a site starts
 * below them.  Matched against demangled names.  PyTorch's own capture
 * of a stack (stacks="all" in its memory snapshot) starts every stack
 * with torch::unwind::unwind, CapturedTraceback::gather and
 * gather_with_cpp above its caching allocator's frames: the site is the
 * frame below them that asked for memory (at::cuda::getNewWorkspace, a
 * tensor's empty, ...).  Each vendor adds its API's calls and its c10
 * allocators (known_patterns). */
static const char *const framework_wrappers[] = {
    "^torch::unwind::",
    "^torch::CapturedTraceback::",
    "(^|::)gather_with_cpp($|\\()",
    "^c10::CachingDeviceAllocator::",
};
#define FRAMEWORK_COUNT (sizeof framework_wrappers / sizeof framework_wrappers[0])
/* Room for one vendor's C10_ALLOCATORS pattern. */
#define C10_PATTERN_MAX 96
/* A vendor's c10 allocators (c10::cuda::CUDACachingAllocator::, and the
 * others of the namespace). */
#define C10_ALLOCATORS "^c10::%s::[A-Za-z]*Allocator::"

typedef struct regex_list {
    regex_t *re;
    size_t n;
} regex_list;

static struct {
    int raw_names, keep_wrappers;
    regex_list hide, focus, known;
    int known_ready;
} opts;

typedef struct prepared {
    const tdm_snap *snap;
    char **names;       /* names made for display, freed with it */
    size_t name_count;
    uint8_t *unfocused; /* per stack id; NULL without --focus */
    uint32_t *site_of;  /* per stack id: the stack its site is named by;
                         * NULL when the file has no Python frames */
    size_t stack_count;
} prepared;

static struct {
    prepared *items;
    size_t n, cap;
    size_t with_sites; /* items whose site_of is set */
} registry;

static void regex_list_free(regex_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        regfree(&l->re[i]);
    free(l->re);
    l->re = NULL;
    l->n = 0;
}

/* Compiles `n` patterns into *l; -1 with `err` set on a bad one. */
static int regex_list_compile(regex_list *l, const char *opt, const char *const *pat,
                              size_t n, char *err, size_t err_len)
{
    l->re = n ? calloc(n, sizeof *l->re) : NULL;
    l->n = 0;
    if (n && !l->re) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char why[128];
        if (tdm__regex_compile(&l->re[i], pat[i], why, sizeof why) != 0) {
            snprintf(err, err_len, "%s '%s': %s", opt, pat[i], why);
            regex_list_free(l);
            return -1;
        }
        l->n++;
    }
    return 0;
}

static int regex_list_match(const regex_list *l, const char *a, const char *b)
{
    for (size_t i = 0; i < l->n; i++)
        if ((a && regexec(&l->re[i], a, 0, NULL, 0) == 0) ||
            (b && b != a && regexec(&l->re[i], b, 0, NULL, 0) == 0))
            return 1;
    return 0;
}

int tdm__stack_display_configure(const tdm_stack_display_options *o, char *err,
                                 size_t err_len)
{
    regex_list_free(&opts.hide);
    regex_list_free(&opts.focus);
    opts.raw_names = o->raw_names;
    opts.keep_wrappers = o->keep_wrappers;
    tdm__site_show_native_frames(o->native_frames);
    if (regex_list_compile(&opts.hide, "--hide", o->hide, o->hide_count, err, err_len) != 0)
        return -1;
    if (regex_list_compile(&opts.focus, "--focus", o->focus, o->focus_count, err, err_len) !=
        0) {
        regex_list_free(&opts.hide);
        return -1;
    }
    return 0;
}

int tdm__stack_display_conf_hides(const char *conf, char ***out)
{
    *out = NULL;
    int n = 0;
    for (const char *p = conf ? conf : ""; *p;) {
        const char *e = p;
        for (int depth = 0; *e && (*e != ',' || depth > 0); e++)
            depth += *e == '[' ? 1 : *e == ']' && depth > 0 ? -1 : 0;
        const char *b = p, *end = e; /* trimmed as the recorder trims */
        while (b < end && (*b == ' ' || *b == '\t'))
            b++;
        while (end > b && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (end - b > 5 && strncmp(b, "hide", 4) == 0) {
            const char *v = b + 4;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            if (v < end && *v == '=') {
                for (v++; v < end && (*v == ' ' || *v == '\t'); v++)
                    ;
                char **grown = realloc(*out, (size_t)(n + 1) * sizeof *grown);
                if (!grown)
                    goto oom;
                *out = grown;
                if (!((*out)[n] = strndup(v, (size_t)(end - v))))
                    goto oom;
                n++;
            }
        }
        p = *e ? e + 1 : e;
    }
    return n;
oom:
    for (int i = 0; i < n; i++)
        free((*out)[i]);
    free(*out);
    *out = NULL;
    return -1;
}

/* ---- preparing one snapshot ---------------------------------------------- */

typedef struct work {
    tdm_snap *snap;
    const char **clean; /* per frame: the name without clone suffixes,
                         * demangled (what wrappers are found by) */
    uint8_t *hidden;    /* per frame: a wrapper when at a stack's top */
    uint8_t *own;       /* per frame: tidemark's own */
    prepared *p;
} work;

static int keep_name(prepared *p, char *name)
{
    char **grown = realloc(p->names, (p->name_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    p->names = grown;
    p->names[p->name_count++] = name;
    return 0;
}

static tdm_status rename_frames(work *w)
{
    tdm_snap *s = w->snap;
    for (size_t i = 0; i < s->frame_count; i++) {
        tdm_snap_frame *f = &s->frames[i];
        int oom = 0;
        /* Python names are qualified names, never mangled: "Cache.part" is
         * a method, not a clone. */
        char *shown = f->kind == TDM_FRAME_PYTHON ? NULL : tdm__name_for_display(f->function, &oom);
        if (oom)
            return TDM_HOST_OUT_OF_MEMORY;
        w->clean[i] = shown ? shown : f->function;
        if (!shown)
            continue;
        if (keep_name(w->p, shown) != 0) {
            free(shown);
            return TDM_HOST_OUT_OF_MEMORY;
        }
        if (!opts.raw_names)
            f->function = shown;
    }
    return TDM_OK;
}

/* The built-in wrapper patterns: PyTorch's, then each vendor's API calls
 * and c10 allocators (base/vendors.def); *n gets how many.  Made once,
 * by the first known_wrapper(). */
static const char *const *known_patterns(size_t *n)
{
    static const char *list[FRAMEWORK_COUNT + 2 * TDM_VENDOR_COUNT];
    static char c10[TDM_VENDOR_COUNT][C10_PATTERN_MAX];
    size_t k = 0;
    for (size_t i = 0; i < FRAMEWORK_COUNT; i++)
        list[k++] = framework_wrappers[i];
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        const tdm_vendor_info *row = tdm__vendor_info((tdm_vendor)v);
        if (row->api_frames)
            list[k++] = row->api_frames;
        if (row->c10_namespace) {
            snprintf(c10[v], sizeof c10[v], C10_ALLOCATORS, row->c10_namespace);
            list[k++] = c10[v];
        }
    }
    *n = k;
    return list;
}

static int known_wrapper(const char *name)
{
    if (!opts.known_ready) {
        char err[160];
        size_t n;
        const char *const *patterns = known_patterns(&n);
        opts.known_ready = 1;
        if (regex_list_compile(&opts.known, "built-in", patterns, n, err, sizeof err) != 0)
            fprintf(stderr, "tidemark: %s\n", err); /* a bug: the list is ours */
    }
    return regex_list_match(&opts.known, name, NULL);
}

/* The leading frames of stack `st` that `w` hides; the tidemark ones only
 * when every frame would go. */
static uint32_t hidden_prefix(const work *w, const tdm_snap_stack *st)
{
    uint32_t k = 0, own = 0;
    while (k < st->depth && st->frames[k] < w->snap->frame_count && w->hidden[st->frames[k]])
        k++;
    if (k < st->depth)
        return k;
    while (own < st->depth && st->frames[own] < w->snap->frame_count &&
           w->own[st->frames[own]])
        own++;
    return own < st->depth ? own : 0;
}

/* The program's own allocation wrapper: if every stack of `ids` starts,
 * once hidden frames are left out, with the same function, and below it
 * the callers differ, that function only passes requests on; its frames
 * are marked hidden.  Repeated for wrappers of wrappers. */
static void hide_common_wrapper(work *w, const uint8_t *in_group)
{
    const tdm_snap *s = w->snap;
    for (int round = 0; round < 8; round++) {
        const char *top = NULL, *caller = NULL;
        int stacks = 0, callers_differ = 0, common = 1;
        for (size_t id = 1; id < s->stack_count && common; id++) {
            const tdm_snap_stack *st = &s->stacks[id];
            if (!in_group[id] || st->depth == 0)
                continue;
            uint32_t k = hidden_prefix(w, st);
            if (k + 1 >= st->depth || st->frames[k] >= s->frame_count ||
                st->frames[k + 1] >= s->frame_count) {
                common = 0; /* a stack with nothing below it: keep its name */
                break;
            }
            const char *fn = w->clean[st->frames[k]];
            const char *up = w->clean[st->frames[k + 1]];
            if (!fn || !fn[0] || strcmp(fn, "??") == 0 || (top && strcmp(top, fn) != 0))
                common = 0;
            top = top ? top : fn;
            if (caller && up && strcmp(caller, up) != 0)
                callers_differ = 1;
            caller = caller ? caller : up;
            stacks++;
        }
        if (!common || stacks < 2 || !callers_differ || !top)
            return;
        for (size_t i = 0; i < s->frame_count; i++)
            if (w->clean[i] && strcmp(w->clean[i], top) == 0)
                w->hidden[i] = 1;
    }
}

static void mark_group(const tdm_snap *s, uint8_t *group, uint32_t id)
{
    if (id && id < s->stack_count)
        group[id] = 1;
}

static tdm_status find_wrappers(work *w)
{
    tdm_snap *s = w->snap;
    for (size_t i = 0; i < s->frame_count; i++) {
        const tdm_snap_frame *f = &s->frames[i];
        tdm_snap_frame probe = *f;
        probe.function = w->clean[i];
        w->own[i] = (uint8_t)tdm__site_frame_is_tidemark(&probe);
        w->hidden[i] = w->own[i] ||
                       (!opts.keep_wrappers && w->clean[i] && known_wrapper(w->clean[i])) ||
                       regex_list_match(&opts.hide, w->clean[i], f->function);
    }
    if (opts.keep_wrappers)
        return TDM_OK;
    /* Allocation stacks and the others (frees) are looked at apart: a
     * program's free wrapper is not its allocation wrapper. */
    uint8_t *alloc_group = calloc(s->stack_count + 1, 1);
    uint8_t *free_group = calloc(s->stack_count + 1, 1);
    if (!alloc_group || !free_group) {
        free(alloc_group);
        free(free_group);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        int alloc = e->action == TDM_ACTION_ALLOC || e->action == TDM_ACTION_SEGMENT_ALLOC ||
                    e->action == TDM_ACTION_SEGMENT_MAP;
        mark_group(s, alloc ? alloc_group : free_group, e->stack_id);
    }
    for (size_t i = 0; i < s->block_count; i++)
        mark_group(s, alloc_group, s->blocks[i].stack_id);
    for (size_t id = 0; id < s->stack_count; id++)
        free_group[id] &= (uint8_t)!alloc_group[id];
    hide_common_wrapper(w, alloc_group);
    hide_common_wrapper(w, free_group);
    free(alloc_group);
    free(free_group);
    return TDM_OK;
}

/* Two frames read the same: shown name, file and line; unnamed frames
 * by module and address. */
static int same_frame(const tdm_snap *s, uint32_t a, uint32_t b)
{
    if (a == b)
        return 1;
    if (a >= s->frame_count || b >= s->frame_count)
        return 0;
    const tdm_snap_frame *x = &s->frames[a], *y = &s->frames[b];
    const char *fx = x->function ? x->function : "", *fy = y->function ? y->function : "";
    if (strcmp(fx, fy) != 0 || x->line != y->line ||
        strcmp(x->file ? x->file : "", y->file ? y->file : "") != 0)
        return 0;
    if (!fx[0] || strcmp(fx, "??") == 0)
        return x->pc == y->pc && strcmp(x->module ? x->module : "", y->module ? y->module : "") == 0;
    return 1;
}

static uint64_t frame_hash(const tdm_snap *s, uint32_t fi)
{
    if (fi >= s->frame_count)
        return fi;
    const tdm_snap_frame *f = &s->frames[fi];
    const char *fn = f->function ? f->function : "";
    uint64_t h = tdm__fnv1a(fn, strlen(fn));
    if (f->file)
        h = tdm__fnv1a_from(h, f->file, strlen(f->file));
    return tdm__fnv1a_from(h, &f->line, sizeof f->line);
}

/* Renumbers the stacks that read the same to the first of them. */
static tdm_status merge_stacks(tdm_snap *s)
{
    size_t slots = 16;
    while (slots < 2 * s->stack_count)
        slots *= 2;
    uint32_t *table = calloc(slots, sizeof *table);
    uint32_t *canon = malloc((s->stack_count + 1) * sizeof *canon);
    if (!table || !canon) {
        free(table);
        free(canon);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    int renumbered = 0;
    canon[0] = 0;
    for (uint32_t id = 1; id < s->stack_count; id++) {
        const tdm_snap_stack *st = &s->stacks[id];
        uint64_t h = tdm__fnv1a(&st->depth, sizeof st->depth);
        for (uint32_t k = 0; k < st->depth; k++) {
            uint64_t fh = frame_hash(s, st->frames[k]);
            h = tdm__fnv1a_from(h, &fh, sizeof fh);
        }
        size_t at = (size_t)h & (slots - 1);
        canon[id] = id;
        for (; table[at]; at = (at + 1) & (slots - 1)) {
            const tdm_snap_stack *o = &s->stacks[table[at]];
            uint32_t k = 0;
            if (o->depth != st->depth)
                continue;
            while (k < st->depth && same_frame(s, o->frames[k], st->frames[k]))
                k++;
            if (k == st->depth) {
                canon[id] = table[at];
                renumbered = 1;
                break;
            }
        }
        if (canon[id] == id)
            table[at] = id;
    }
    if (renumbered) {
        for (size_t i = 0; i < s->event_count; i++)
            if (s->events[i].stack_id < s->stack_count)
                s->events[i].stack_id = canon[s->events[i].stack_id];
        for (size_t i = 0; i < s->block_count; i++)
            if (s->blocks[i].stack_id < s->stack_count)
                s->blocks[i].stack_id = canon[s->blocks[i].stack_id];
        for (size_t i = 0; i < s->segment_count; i++)
            if (s->segments[i].stack_id < s->stack_count)
                s->segments[i].stack_id = canon[s->segments[i].stack_id];
    }
    free(table);
    free(canon);
    return TDM_OK;
}

/* Sites shown by their Python frames (sites.h) group by those frames:
 * stacks that differ only below the innermost user Python frame, or in
 * the interpreter's frames between Python ones, are one site. */
/* Nonzero when sites of stacks a and b show the same frames. */
static int same_site(const tdm_snap *s, uint32_t a, uint32_t b)
{
    const tdm_snap_stack *x = &s->stacks[a], *y = &s->stacks[b];
    uint32_t i = tdm__site_first_frame(s, a), j = tdm__site_first_frame(s, b);
    while (i < x->depth && j < y->depth && same_frame(s, x->frames[i], y->frames[j])) {
        i = tdm__site_next_frame(s, a, i);
        j = tdm__site_next_frame(s, b, j);
    }
    return i >= x->depth && j >= y->depth;
}

static tdm_status group_python_sites(prepared *p, const tdm_snap *s)
{
    int python = 0;
    for (size_t i = 0; i < s->frame_count && !python; i++)
        python = s->frames[i].kind == TDM_FRAME_PYTHON;
    if (!python)
        return TDM_OK;
    size_t slots = 16;
    while (slots < 2 * s->stack_count)
        slots *= 2;
    uint32_t *table = calloc(slots, sizeof *table);
    p->site_of = malloc((s->stack_count + 1) * sizeof *p->site_of);
    if (!p->site_of || !table) {
        free(table);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    p->stack_count = s->stack_count;
    registry.with_sites++;
    p->site_of[0] = 0;
    for (uint32_t id = 1; id < s->stack_count; id++) {
        const tdm_snap_stack *st = &s->stacks[id];
        p->site_of[id] = id;
        if (!tdm__site_frame_is_python_start(s, id))
            continue;
        uint64_t h = TDM__FNV_BASIS;
        for (uint32_t k = tdm__site_first_frame(s, id); k < st->depth;
             k = tdm__site_next_frame(s, id, k)) {
            uint64_t fh = frame_hash(s, st->frames[k]);
            h = tdm__fnv1a_from(h, &fh, sizeof fh);
        }
        size_t at = (size_t)h & (slots - 1);
        for (; table[at]; at = (at + 1) & (slots - 1))
            if (same_site(s, table[at], id)) {
                p->site_of[id] = table[at];
                break;
            }
        if (p->site_of[id] == id)
            table[at] = id;
    }
    free(table);
    return TDM_OK;
}

static tdm_status mark_focus(work *w)
{
    tdm_snap *s = w->snap;
    if (!opts.focus.n)
        return TDM_OK;
    w->p->unfocused = calloc(s->stack_count + 1, 1);
    if (!w->p->unfocused)
        return TDM_HOST_OUT_OF_MEMORY;
    w->p->stack_count = s->stack_count;
    for (size_t id = 0; id < s->stack_count; id++) {
        const tdm_snap_stack *st = &s->stacks[id];
        int hit = 0;
        for (uint32_t k = 0; k < st->depth && !hit; k++)
            if (st->frames[k] < s->frame_count)
                hit = regex_list_match(&opts.focus, w->clean[st->frames[k]],
                                       s->frames[st->frames[k]].function);
        w->p->unfocused[id] = (uint8_t)!hit;
    }
    return TDM_OK;
}

static prepared *registry_add(const tdm_snap *snap)
{
    if (tdm__grow_array(&registry.items, &registry.cap, registry.n + 1,
                        sizeof *registry.items) != 0)
        return NULL;
    prepared *p = &registry.items[registry.n++];
    memset(p, 0, sizeof *p);
    p->snap = snap;
    return p;
}

static tdm_status add_conf_hides(const tdm_snap *snap, regex_list *saved)
{
    char **pats;
    int n = tdm__stack_display_conf_hides(snap->header.config, &pats);
    if (n < 0)
        return TDM_HOST_OUT_OF_MEMORY;
    *saved = opts.hide;
    regex_list merged = {calloc(saved->n + (size_t)n + 1, sizeof(regex_t)), 0};
    if (!merged.re) {
        for (int i = 0; i < n; i++)
            free(pats[i]);
        free(pats);
        return TDM_HOST_OUT_OF_MEMORY;
    }
    if (saved->n)
        memcpy(merged.re, saved->re, saved->n * sizeof(regex_t));
    merged.n = saved->n;
    for (int i = 0; i < n; i++) {
        /* A pattern the recorder accepted but this reader cannot compile
         * hides nothing: said once, the stacks stay readable. */
        char why[128];
        if (tdm__regex_compile(&merged.re[merged.n], pats[i], why, sizeof why) == 0)
            merged.n++;
        else
            fprintf(stderr, "tidemark: warning: hide='%s' of the recording's config is no "
                            "regular expression; ignored\n", pats[i]);
        free(pats[i]);
    }
    free(pats);
    opts.hide = merged;
    return TDM_OK;
}

static void drop_conf_hides(regex_list *saved)
{
    for (size_t i = saved->n; i < opts.hide.n; i++)
        regfree(&opts.hide.re[i]);
    free(opts.hide.re);
    opts.hide = *saved;
}

tdm_status tdm__stack_display_apply(tdm_snap *snap)
{
    prepared *p = registry_add(snap);
    if (!p)
        return TDM_HOST_OUT_OF_MEMORY;
    work w = {snap, calloc(snap->frame_count + 1, sizeof *w.clean),
              calloc(snap->frame_count + 1, 1), calloc(snap->frame_count + 1, 1), p};
    regex_list saved;
    tdm_status st = w.clean && w.hidden && w.own ? add_conf_hides(snap, &saved)
                                                 : TDM_HOST_OUT_OF_MEMORY;
    if (st != TDM_OK)
        goto done;
    st = rename_frames(&w);
    if (st == TDM_OK)
        st = find_wrappers(&w);
    if (st == TDM_OK) {
        for (size_t id = 1; id < snap->stack_count; id++) {
            tdm_snap_stack *sk = &snap->stacks[id];
            uint32_t k = hidden_prefix(&w, sk);
            sk->frames += k;
            sk->depth -= k;
        }
        st = mark_focus(&w);
    }
    if (st == TDM_OK)
        st = merge_stacks(snap);
    if (st == TDM_OK)
        st = group_python_sites(p, snap);
    drop_conf_hides(&saved);
done:
    free(w.clean);
    free(w.hidden);
    free(w.own);
    return st;
}

void tdm__stack_display_forget(const tdm_snap *snap)
{
    for (size_t i = 0; i < registry.n; i++) {
        prepared *p = &registry.items[i];
        if (p->snap != snap)
            continue;
        for (size_t k = 0; k < p->name_count; k++)
            free(p->names[k]);
        free(p->names);
        free(p->unfocused);
        if (p->site_of)
            registry.with_sites--;
        free(p->site_of);
        registry.items[i] = registry.items[--registry.n];
        if (registry.n == 0) {
            free(registry.items);
            registry.items = NULL;
            registry.cap = 0;
        }
        return;
    }
}

int tdm__stack_display_focused(const tdm_snap *snap, uint32_t stack_id)
{
    if (!opts.focus.n)
        return 1; /* the common case, asked once per allocation */
    for (size_t i = 0; i < registry.n; i++) {
        const prepared *p = &registry.items[i];
        if (p->snap == snap)
            return !p->unfocused || stack_id >= p->stack_count || !p->unfocused[stack_id];
    }
    return 1;
}

uint32_t tdm__stack_display_site(const tdm_snap *snap, uint32_t stack_id)
{
    if (!registry.with_sites)
        return stack_id; /* no Python frames anywhere: every stack its own */
    for (size_t i = 0; i < registry.n; i++) {
        const prepared *p = &registry.items[i];
        if (p->snap == snap)
            return p->site_of && stack_id < p->stack_count ? p->site_of[stack_id] : stack_id;
    }
    return stack_id;
}
