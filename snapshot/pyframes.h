/* snapshot/pyframes.h: the calling thread's Python frames, read without
 * the GIL, and the table of code objects they name.
 *
 * When the program runs a CPython interpreter (found at run time through
 * dlsym(RTLD_DEFAULT, "_PyRuntime"); tidemark never links libpython), a
 * capture reads the calling thread's own chain of interpreter frames: it
 * takes no lock, calls nothing in the interpreter, allocates nothing and
 * touches no reference count.  The thread's frames cannot change while it
 * is inside the allocation call, even with the GIL released (ctypes), so
 * the walk is race-free; no other thread's frames are ever read.
 *
 * A Python frame becomes one tagged entry in the captured pcs array:
 *   TDM_PY_TAG | code id << 24 | (instruction index + 1)
 * The code id names an entry of the code table: at the first sight of a
 * code object its file name, qualified name, first line and line table are
 * copied into tidemark's own mapping (under a short lock, like a new
 * stack), keyed by the code object's address plus fields that tell a
 * reused address from the same object (see pycode.c).  Names and lines
 * are therefore resolved from tidemark's copies, at any time: after the
 * code object died, and after the interpreter finalized.
 *
 * Versions: 3.11 and 3.12 through built-in layout tables, 3.13 through the
 * interpreter's own _Py_DebugOffsets table (every offset bound-checked).
 * Any other version, or a layout that fails the checks: no Python frames,
 * one line on stderr, native stacks as before.
 */
#ifndef TDM_SNAPSHOT_PYFRAMES_H
#define TDM_SNAPSHOT_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

/* User-space addresses never have the top bit set: a tagged entry can
 * never be a return address. */
#define TDM_PY_TAG (UINT64_C(1) << 63)
#define TDM_PY_INSTR_BITS 24
#define TDM_PY_INSTR_MASK ((UINT64_C(1) << TDM_PY_INSTR_BITS) - 1)

static inline int tdm__py_is_entry(uintptr_t e) { return (e & TDM_PY_TAG) != 0; }

/* Most Python frames one capture reads (innermost first). */
#define TDM_PY_MAX_FRAMES 64

/* Looks for an interpreter (once; later calls return the first answer).
 * 1 when Python frames can be read, 0 otherwise (no interpreter: silent;
 * an interpreter this build cannot read: one line on stderr). */
int tdm__py_setup(void);

/* The calling thread's Python frames, innermost first, as tagged entries
 * in out[0..n).  group_end[i] is 1 where out[i] is the last (outermost)
 * Python frame run by one native activation of the evaluation loop, so
 * that the merge can put each group in place of its native frame.
 * Returns 0 when the thread runs no Python code, or when the frames
 * cannot be read. */
unsigned tdm__py_capture(uintptr_t *out, unsigned char *group_end,
                         unsigned max);

/* The code range [*lo, *hi) of the interpreter's evaluation loop
 * (_PyEval_EvalFrameDefault), where a native return address stands for a
 * group of Python frames; empty when the loop was not found. */
void tdm__py_eval_range(uintptr_t *lo, uintptr_t *hi);

/* The frame a tagged entry stands for, from tidemark's copies: qualified
 * name, file name and line (0 when the line table says none).  The strings
 * live as long as the process.  0 when the entry is not a known one. */
typedef struct tdm__py_symbol {
    const char *function;
    const char *file;
    unsigned line;
} tdm__py_symbol;
int tdm__py_resolve(uintptr_t entry, tdm__py_symbol *out);

/* ---- the code table (pycode.c) ------------------------------------------ */

/* What identifies a code object at capture time: its address and fields
 * that change when the address is reused by another code object. */
typedef struct tdm__py_code_key {
    uintptr_t code;
    uintptr_t filename, qualname, linetable; /* object addresses */
    int64_t filename_hash, qualname_hash;     /* the strings' cached hashes */
    int64_t linetable_len;
    int64_t code_len;                         /* Py_SIZE(code) */
    int32_t firstlineno;
} tdm__py_code_key;

/* How to read the text of a str/bytes object (filled by pyframes.c). */
typedef struct tdm__py_text_layout {
    size_t str_length, str_state, str_ascii_size, str_compact_size;
    size_t bytes_size, bytes_data;
} tdm__py_text_layout;

/* Maps the table (lazily, once); 0 when it cannot. */
int tdm__py_code_init(const tdm__py_text_layout *layout);
static inline int tdm__py_same_key(const tdm__py_code_key *a,
                                   const tdm__py_code_key *b)
{
    return a->code == b->code && a->filename == b->filename &&
           a->qualname == b->qualname && a->linetable == b->linetable &&
           a->filename_hash == b->filename_hash &&
           a->qualname_hash == b->qualname_hash &&
           a->linetable_len == b->linetable_len &&
           a->code_len == b->code_len && a->firstlineno == b->firstlineno;
}

/* Each thread's memo of the code objects its captures saw last,
 * direct-mapped by address (pycode.c says why).  Take it once per capture
 * with tdm__py_code_memo_this_thread and look each frame up in it first;
 * an entry answers only for the full key. */
#define TDM_PY_MEMO_SLOTS 128u
typedef struct tdm__py_code_memo {
    struct {
        tdm__py_code_key key;
        uint32_t id;
    } slot[TDM_PY_MEMO_SLOTS];
} tdm__py_code_memo;
tdm__py_code_memo *tdm__py_code_memo_this_thread(void);

static inline unsigned tdm__py_memo_index(uintptr_t code)
{
    return (unsigned)((code >> 4 ^ code >> 11) & (TDM_PY_MEMO_SLOTS - 1));
}

/* The id the memo holds for key, or 0. */
static inline uint32_t tdm__py_memo_find(const tdm__py_code_memo *memo,
                                         const tdm__py_code_key *key)
{
    const tdm__py_code_key *m = &memo->slot[tdm__py_memo_index(key->code)].key;
    uint32_t id = memo->slot[tdm__py_memo_index(key->code)].id;
    return id && tdm__py_same_key(m, key) ? id : 0;
}

/* The id of the code object described by key, from the shared table,
 * copying its texts at first sight, and noted in the memo; 0 when the
 * table is full (the frame is then kept as unknown).  The caller has
 * checked the key's objects' types. */
uint64_t tdm__py_code_id(tdm__py_code_memo *memo, const tdm__py_code_key *key);
/* Code objects that could not be copied because the table was full. */
uint64_t tdm__py_code_overflows(void);
/* Resolves (id, instruction index) from the table; see tdm__py_resolve. */
int tdm__py_code_resolve(uint64_t id, int64_t instr, tdm__py_symbol *out);

/* ---- stacks with Python frames (pystack.c) ------------------------------ */

/* Capture + intern like tdm__stack_current, with Python frames:
 * `all` 0 (stacks=python): the Python frames alone, or the native stack
 * on a thread that runs none; `all` 1 (stacks=all): the native stack with
 * each native frame of the evaluation loop replaced by the Python frames
 * it was running, innermost first.  `skip` counts as in
 * tdm__stack_current. */
uint32_t tdm__stack_current_python(unsigned skip, int all);

/* The merge itself, for tests: native pcs[0..n) and Python frames
 * py[0..np) with their group ends into out (at most max entries). */
unsigned tdm__py_merge(const uintptr_t *pcs, unsigned n, const uintptr_t *py,
                       const unsigned char *group_end, unsigned np,
                       uintptr_t *out, unsigned max);

#endif
