/* snapshot/pystack.c: stacks that carry Python frames (stacks=python and
 * stacks=all), built from the native capture (stack.c) and the calling
 * thread's Python frames (pyframes.c), then interned like any stack: a
 * Python frame is a tagged entry among the return addresses (pyframes.h),
 * so the intern table and everything after it are unchanged.
 *
 * The merge follows the evaluation loop's own structure: one native
 * activation of _PyEval_EvalFrameDefault runs a group of Python frames
 * (3.11: up to the frame marked is_entry; 3.12, 3.13: up to the entry
 * frame owned by the C stack).  Walking the native stack innermost first,
 * each return address inside the loop is replaced by the next group.
 * Groups left over (the native stack was cut at its deepest, or a return
 * address lay in a part of the loop outside its symbol, such as a .cold
 * clone) are appended outermost, so Python frames are never lost or
 * reordered among themselves.
 */
#include "pyframes.h"
#include "stack.h"

unsigned tdm__py_merge(const uintptr_t *pcs, unsigned n, const uintptr_t *py,
                       const unsigned char *group_end, unsigned np,
                       uintptr_t *out, unsigned max)
{
    unsigned k = 0, j = 0;
    uintptr_t lo, hi;
    tdm__py_eval_range(&lo, &hi);
    for (unsigned i = 0; i < n && k < max; i++) {
        if (j < np && pcs[i] - lo < hi - lo) {
            do {
                out[k++] = py[j];
            } while (!group_end[j++] && j < np && k < max);
            continue;
        }
        out[k++] = pcs[i];
    }
    while (j < np && k < max)
        out[k++] = py[j++];
    return k;
}

__attribute__((noinline)) uint32_t tdm__stack_current_python(unsigned skip, int all)
{
    uintptr_t py[TDM_PY_MAX_FRAMES];
    unsigned char ends[TDM_PY_MAX_FRAMES];
    unsigned np = tdm__py_capture(py, ends, TDM_PY_MAX_FRAMES);
    uint32_t id;
    if (np && !all) {
        id = tdm__stack_intern(py, np < TDM_STACK_MAX_DEPTH ? np : TDM_STACK_MAX_DEPTH);
    } else {
        uintptr_t pcs[TDM_STACK_MAX_DEPTH];
        unsigned n = tdm__stack_capture(pcs, TDM_STACK_MAX_DEPTH, skip + 1);
        if (np) {
            uintptr_t merged[TDM_STACK_MAX_DEPTH];
            n = tdm__py_merge(pcs, n, py, ends, np, merged, TDM_STACK_MAX_DEPTH);
            id = tdm__stack_intern(merged, n);
        } else {
            id = tdm__stack_intern(pcs, n);
        }
    }
    __asm__ volatile("" ::: "memory");
    return id;
}
