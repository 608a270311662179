/* viewer-export/model/sites.c: allocation sites named by their frames
 * (sites.h).  No state, no locks. */
#include "sites.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *str_or(const char *s, const char *fallback)
{
    return s && s[0] ? s : fallback;
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "";
}

/* tidemark's own Python modules (python/): their frames pass a request
 * on (the torch hooks' wrapped backward and optimizer step, the API's
 * calls), so a user's stack never shows them. */
static int tidemark_python_file(const char *file)
{
    static const char *const own[] = {"tidemark.py", "tidemark_torch.py",
                                      "tidemark_tensors.py"};
    const char *b = base_name(file);
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strcmp(b, own[i]) == 0)
            return 1;
    return file && strstr(file, "/autostart/sitecustomize.py") != NULL;
}

int tdm__site_frame_is_tidemark(const tdm_snap_frame *f)
{
    if (f->kind == TDM_FRAME_PYTHON)
        return tidemark_python_file(f->file);
    if (f->function && strncmp(f->function, "tdm_", 4) == 0)
        return 1;
    return f->module && strncmp(base_name(f->module), "libtidemark", 11) == 0;
}

int tdm__site_frame_is_python(const tdm_snap_frame *f)
{
    return f->kind == TDM_FRAME_PYTHON;
}

/* --native-frames: sites with Python frames shown by every frame. */
static int native_frames;

void tdm__site_show_native_frames(int on)
{
    native_frames = on;
}

/* A Python frame of the program rather than of an installed package or
 * the standard library. */
static int user_python_frame(const tdm_snap_frame *f)
{
    const char *file = f->file ? f->file : "";
    return !strstr(file, "/site-packages/") && !strstr(file, "/dist-packages/") &&
           !strstr(file, "/lib/python3") && !strstr(file, "/lib64/python3");
}

/* The innermost user Python frame of stack `st` (else its innermost
 * Python frame), or st->depth when it has none. */
static uint32_t python_start(const tdm_snap *s, const tdm_snap_stack *st)
{
    uint32_t first = st->depth;
    for (uint32_t i = 0; i < st->depth && !native_frames; i++) {
        if (st->frames[i] >= s->frame_count)
            continue;
        const tdm_snap_frame *f = &s->frames[st->frames[i]];
        if (!tdm__site_frame_is_python(f) || tdm__site_frame_is_tidemark(f))
            continue;
        if (user_python_frame(f))
            return i;
        if (first == st->depth)
            first = i;
    }
    return first;
}

uint32_t tdm__site_first_frame(const tdm_snap *s, uint32_t stack_id)
{
    if (stack_id == 0 || stack_id >= s->stack_count)
        return 0;
    const tdm_snap_stack *st = &s->stacks[stack_id];
    uint32_t py = python_start(s, st);
    if (py < st->depth)
        return py;
    uint32_t i = 0;
    while (i < st->depth && st->frames[i] < s->frame_count &&
           tdm__site_frame_is_tidemark(&s->frames[st->frames[i]]))
        i++;
    return i == st->depth ? 0 : i; /* nothing but tidemark: show it all */
}

int tdm__site_frame_is_python_start(const tdm_snap *s, uint32_t stack_id)
{
    if (stack_id == 0 || stack_id >= s->stack_count)
        return 0;
    const tdm_snap_stack *st = &s->stacks[stack_id];
    return python_start(s, st) < st->depth;
}

uint32_t tdm__site_next_frame(const tdm_snap *s, uint32_t stack_id, uint32_t i)
{
    if (stack_id == 0 || stack_id >= s->stack_count)
        return i + 1;
    const tdm_snap_stack *st = &s->stacks[stack_id];
    if (i >= st->depth)
        return st->depth;
    int python = st->frames[i] < s->frame_count &&
                 tdm__site_frame_is_python(&s->frames[st->frames[i]]);
    for (i++; python && i < st->depth; i++)
        if (st->frames[i] < s->frame_count &&
            tdm__site_frame_is_python(&s->frames[st->frames[i]]) &&
            !tdm__site_frame_is_tidemark(&s->frames[st->frames[i]]))
            break;
    return i;
}

void tdm__site_format_frame(char *buf, size_t len, const tdm_snap_frame *f)
{
    const char *name = str_or(f->function, "??");
    /* Long C++ names would push the stack off the screen. */
    int w = (int)strlen(name) > 70 ? 67 : 70;
    const char *dots = w == 67 ? "..." : "";
    if (f->file && f->file[0] && f->line)
        snprintf(buf, len, "%.*s%s (%s:%u)", w, name, dots, base_name(f->file), f->line);
    else if (f->file && f->file[0])
        snprintf(buf, len, "%.*s%s (%s)", w, name, dots, base_name(f->file));
    else if (strcmp(name, "??") == 0)
        snprintf(buf, len, "0x%" PRIx64 " (%s)", f->pc,
                 str_or(base_name(f->module), "unknown module"));
    else
        snprintf(buf, len, "%.*s%s (%s)", w, name, dots,
                 str_or(base_name(f->module), "unknown module"));
}

void tdm__site_format_stack_frame(char *buf, size_t len, const tdm_snap *s, uint32_t stack_id,
                                  uint32_t i)
{
    uint32_t fi = s->stacks[stack_id].frames[i];
    if (fi < s->frame_count)
        tdm__site_format_frame(buf, len, &s->frames[fi]);
    else
        snprintf(buf, len, "(frame %u missing)", fi);
}

void tdm__site_print_frames(FILE *out, const tdm_snap *s, uint32_t stack_id,
                            unsigned frames, int indent)
{
    if (stack_id == 0 || stack_id >= s->stack_count || s->stacks[stack_id].depth == 0) {
        fputs("(no stack recorded)\n", out);
        return;
    }
    const tdm_snap_stack *st = &s->stacks[stack_id];
    unsigned shown = 0;
    for (uint32_t i = tdm__site_first_frame(s, stack_id); i < st->depth && shown < frames;
         i = tdm__site_next_frame(s, stack_id, i), shown++) {
        char line[256];
        tdm__site_format_stack_frame(line, sizeof line, s, stack_id, i);
        fprintf(out, "%*s%s\n", shown ? indent : 0, "", line);
    }
}

char *tdm__site_key(const tdm_snap *s, uint32_t stack_id)
{
    char *key = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&key, &len);
    if (!m)
        return NULL;
    if (stack_id && stack_id < s->stack_count) {
        const tdm_snap_stack *st = &s->stacks[stack_id];
        for (uint32_t i = tdm__site_first_frame(s, stack_id); i < st->depth;
             i = tdm__site_next_frame(s, stack_id, i)) {
            if (st->frames[i] >= s->frame_count) {
                fputs("?;", m);
                continue;
            }
            const tdm_snap_frame *f = &s->frames[st->frames[i]];
            /* Load addresses move between runs (ASLR): only names count. */
            if (f->function && f->function[0] && strcmp(f->function, "??") != 0)
                fprintf(m, "%s@%s:%u;", f->function, base_name(f->file), f->line);
            else
                fprintf(m, "?@%s;", base_name(f->module));
        }
    }
    if (fclose(m) != 0) {
        free(key);
        return NULL;
    }
    return key;
}

char *tdm__site_chain(const tdm_snap *s, uint32_t stack_id)
{
    char *chain = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&chain, &len);
    if (!m)
        return NULL;
    const char *last = NULL;
    if (stack_id && stack_id < s->stack_count) {
        const tdm_snap_stack *st = &s->stacks[stack_id];
        for (uint32_t i = tdm__site_first_frame(s, stack_id); i < st->depth;
             i = tdm__site_next_frame(s, stack_id, i)) {
            const tdm_snap_frame *f =
                st->frames[i] < s->frame_count ? &s->frames[st->frames[i]] : NULL;
            const char *fn = f && f->function && f->function[0] ? f->function : "??";
            if (last && strcmp(last, fn) == 0)
                continue;
            fprintf(m, "%s;", fn);
            last = fn;
        }
    }
    if (fclose(m) != 0) {
        free(chain);
        return NULL;
    }
    return chain;
}

/* Nonzero when every ';'-ended name of `part` is found in `whole`, in order. */
static int chain_within(const char *part, const char *whole)
{
    while (*part) {
        const char *end = strchr(part, ';');
        size_t n = end ? (size_t)(end - part) + 1 : strlen(part);
        int found = 0;
        while (*whole && !found) {
            const char *we = strchr(whole, ';');
            size_t wn = we ? (size_t)(we - whole) + 1 : strlen(whole);
            found = wn == n && memcmp(whole, part, n) == 0;
            whole += wn;
        }
        if (!found)
            return 0;
        part += n;
    }
    return 1;
}

int tdm__site_chains_match(const char *a, const char *b, int loose)
{
    if (strcmp(a, b) == 0)
        return 1;
    if (!loose || !a[0] || !b[0])
        return 0;
    return strlen(a) < strlen(b) ? chain_within(a, b) : chain_within(b, a);
}
