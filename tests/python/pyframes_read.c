/* tests/python/pyframes_read.c: prints the stacks of a .tdm snapshot's
 * events with each frame's kind, so that test_python_stacks.py can check
 * Python frames (name, file, line) and their place among native frames.
 * It reads the file with the real reader (format/format_read.c).
 *
 *   pyframes_read FILE
 *
 * One line per event, frames innermost first, joined by " | ":
 *   ACTION SIZE py:QUALNAME:FILE:LINE | c:FUNCTION | ...
 * FILE is the path's last component.  Exit 1 when the file cannot be read. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "event.h"
#include "snap_model.h"

static const char *base(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "";
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pyframes_read FILE\n");
        return 2;
    }
    tdm_snap *s = NULL;
    tdm_read_error err;
    if (tdm__snap_read_file(argv[1], 0, &s, &err) != TDM_OK) {
        fprintf(stderr, "pyframes_read: %s: %s\n", argv[1], err.message);
        return 1;
    }
    for (size_t i = 0; i < s->event_count; i++) {
        const tdm_event *e = &s->events[i];
        const char *name = tdm__action_name(e->action);
        printf("%s %" PRIu64, name ? name : "?", e->size);
        if (e->stack_id && e->stack_id < s->stack_count) {
            const tdm_snap_stack *st = &s->stacks[e->stack_id];
            for (uint32_t k = 0; k < st->depth; k++) {
                const tdm_snap_frame *f = &s->frames[st->frames[k]];
                const char *fn = f->function && *f->function ? f->function : "??";
                if (f->kind == TDM_FRAME_PYTHON)
                    printf("%s py:%s:%s:%u", k ? " |" : "", fn, base(f->file), f->line);
                else
                    printf("%s c:%s", k ? " |" : "", fn);
            }
        }
        printf("\n");
    }
    tdm__snap_free(s);
    return 0;
}
