/* snapshot/pyframes.c: finding the interpreter and reading the calling
 * thread's Python frames (see pyframes.h for what and why).
 *
 * Layouts.  3.11 and 3.12 have no table of their own offsets, so their
 * layouts are written here (3.11 measured from Debian 12's headers; 3.12
 * from the public headers of 3.12; both tested, see tests/python).  3.13
 * starts _PyRuntime with _Py_DebugOffsets: cookie "xdebugpy", the
 * version, then offsets of the fields debuggers read; every offset used is
 * checked against the size the same table gives for its structure, and
 * the structure sizes against sane bounds.  Free-threaded builds, 3.14 and
 * later (whose table has another shape) and versions before 3.11 are not
 * read.
 *
 * This thread's state.  3.11: the gilstate thread-specific key in
 * _PyRuntime, read with pthread_getspecific, as the interpreter itself
 * does.  3.12 and 3.13: PyGILState_GetThisThreadState(), which in those
 * versions is that same pthread_getspecific and takes no lock.  A thread
 * the interpreter never saw has none: native stack only.
 *
 * Checks.  Every frame's code object must have type PyCode_Type, its name
 * and file PyUnicode_Type and its line table PyBytes_Type, or the frame is
 * skipped.  The first chain read in the process is read once more with
 * process_vm_readv (a failed read is a layout we do not know, not a
 * crash) before any plain load follows it; a layout that fails turns
 * Python frames off for good, with one line on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pyframes.h"

#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define OWNED_BY_CSTACK 3 /* 3.12, 3.13: the eval loop's entry frame */

typedef struct py_layout {
    unsigned version;          /* PY_VERSION_HEX >> 16: 0x030b ... */
    /* thread state */
    int tss_in_runtime;        /* 3.11: Py_tss_t at rt_tss */
    size_t rt_tss, rt_finalizing;
    int via_cframe;            /* 3.11, 3.12: tstate->cframe->current_frame */
    size_t ts_cframe, cframe_current, ts_current_frame;
    /* _PyInterpreterFrame */
    size_t fr_code, fr_previous, fr_instr, fr_owner;
    long fr_is_entry;          /* 3.11 only, else -1 */
    /* PyCodeObject */
    size_t co_filename, co_qualname, co_linetable, co_firstlineno, co_code;
    /* objects */
    size_t ob_type, ob_size, str_hash;
    tdm__py_text_layout text;
} py_layout;

static const py_layout layout_311 = {
    .version = 0x030b, .tss_in_runtime = 1, .rt_tss = 592, .rt_finalizing = 24,
    .via_cframe = 1, .ts_cframe = 56, .cframe_current = 8,
    .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69,
    .fr_is_entry = 68,
    .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
    .co_firstlineno = 72, .co_code = 184,
    .ob_type = 8, .ob_size = 16, .str_hash = 24,
    .text = {.str_length = 16, .str_state = 32, .str_ascii_size = 48,
             .str_compact_size = 72, .bytes_size = 16, .bytes_data = 32},
};

/* 3.12: the wstr fields are gone from str (PyASCIIObject 40 bytes,
 * compact 56), _PyCFrame lost use_tracing, the frame starts with f_code
 * and has no is_entry (entry frames are owned by the C stack). */
static const py_layout layout_312 = {
    .version = 0x030c, .tss_in_runtime = 0, .rt_finalizing = 24,
    .via_cframe = 1, .ts_cframe = 56, .cframe_current = 0,
    .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70,
    .fr_is_entry = -1,
    .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
    .co_firstlineno = 68, .co_code = 192,
    .ob_type = 8, .ob_size = 16, .str_hash = 24,
    .text = {.str_length = 16, .str_state = 32, .str_ascii_size = 40,
             .str_compact_size = 56, .bytes_size = 16, .bytes_data = 32},
};

typedef void *(*tstate_getter_fn)(void);

static struct {
    pthread_mutex_t lock;
    _Atomic int state;     /* 0 not looked, 1 readable, -1 not */
    _Atomic int validated; /* 0 not yet, 1 checked, -1 failed */
    py_layout l;
    uintptr_t runtime;
    uintptr_t code_type, str_type, bytes_type;
    tstate_getter_fn this_thread_state; /* 3.12, 3.13 */
    uintptr_t eval_lo, eval_hi;         /* [lo, hi); 0, 0 when unknown */
} py = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void say(const char *what)
{
    char line[256];
    int n = snprintf(line, sizeof line, "tidemark: %s; stacks are native only\n", what);
    if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        return;
}

/* ---- 3.13: the interpreter's own table ---------------------------------- */

/* The table's shape in 3.13 (uint64_t fields throughout): the index of
 * each field we use, counted in 8-byte words from the start. */
enum {
    DO_COOKIE = 0, DO_VERSION = 1, DO_FREE_THREADED = 2,
    DO_RT_SIZE = 3, DO_RT_FINALIZING = 4,
    DO_IS_SIZE = 6,                       /* interpreter_state: 13 words */
    DO_TS_SIZE = 19, DO_TS_CURRENT_FRAME = 23,
    DO_FR_SIZE = 28, DO_FR_PREVIOUS = 29, DO_FR_EXECUTABLE = 30,
    DO_FR_INSTR = 31, DO_FR_OWNER = 33,
    DO_CO_SIZE = 34, DO_CO_FILENAME = 35, DO_CO_QUALNAME = 37,
    DO_CO_LINETABLE = 38, DO_CO_FIRSTLINENO = 39, DO_CO_CODE = 43,
    DO_OB_SIZE = 44, DO_OB_TYPE = 45,
    DO_BYTES_SIZE = 64, DO_BYTES_OB_SIZE = 65, DO_BYTES_SVAL = 66,
    DO_STR_SIZE = 67, DO_STR_STATE = 68, DO_STR_LENGTH = 69,
    DO_STR_ASCII_SIZE = 70,
    DO_WORDS = 73,
};

/* An offset of `width` bytes inside a structure of `size` bytes. */
static int field_ok(uint64_t off, uint64_t width, uint64_t size)
{
    return size >= width && off <= size - width;
}

static int layout_from_debug_offsets(uintptr_t rt, py_layout *l, char *why,
                                     size_t why_len)
{
    const uint64_t *d = (const uint64_t *)rt;
    if (memcmp(d, "xdebugpy", 8) != 0) {
        snprintf(why, why_len, "no _Py_DebugOffsets table in _PyRuntime");
        return -1;
    }
    if (d[DO_FREE_THREADED] != 0) {
        snprintf(why, why_len, "free-threaded Python frames cannot be read");
        return -1;
    }
    uint64_t rt_size = d[DO_RT_SIZE], ts_size = d[DO_TS_SIZE],
             fr_size = d[DO_FR_SIZE], co_size = d[DO_CO_SIZE],
             ob_size = d[DO_OB_SIZE], by_size = d[DO_BYTES_SIZE],
             str_size = d[DO_STR_SIZE], ascii_size = d[DO_STR_ASCII_SIZE];
    const uint64_t big = 1u << 20; /* no structure read here is larger */
    int ok = rt_size < (64u << 20) && ts_size < big && fr_size < big &&
             co_size < big && ob_size == 16 && by_size < big &&
             str_size < big && ascii_size <= str_size &&
             field_ok(d[DO_RT_FINALIZING], 8, rt_size) &&
             field_ok(d[DO_TS_CURRENT_FRAME], 8, ts_size) &&
             field_ok(d[DO_FR_PREVIOUS], 8, fr_size) &&
             field_ok(d[DO_FR_EXECUTABLE], 8, fr_size) &&
             field_ok(d[DO_FR_INSTR], 8, fr_size) &&
             field_ok(d[DO_FR_OWNER], 1, fr_size) &&
             field_ok(d[DO_CO_FILENAME], 8, co_size) &&
             field_ok(d[DO_CO_QUALNAME], 8, co_size) &&
             field_ok(d[DO_CO_LINETABLE], 8, co_size) &&
             field_ok(d[DO_CO_FIRSTLINENO], 4, co_size) &&
             d[DO_CO_CODE] <= co_size && d[DO_CO_CODE] >= 24 &&
             field_ok(d[DO_OB_TYPE], 8, ob_size) &&
             field_ok(d[DO_BYTES_OB_SIZE], 8, by_size) &&
             d[DO_BYTES_SVAL] < by_size &&
             field_ok(d[DO_STR_STATE], 4, ascii_size) &&
             field_ok(d[DO_STR_LENGTH], 8, ascii_size) &&
             field_ok(d[DO_STR_LENGTH] + 8, 8, ascii_size);
    if (!ok) {
        snprintf(why, why_len, "Python's _Py_DebugOffsets table fails tidemark's bounds checks");
        return -1;
    }
    memset(l, 0, sizeof *l);
    l->version = (unsigned)(d[DO_VERSION] >> 16);
    l->rt_finalizing = d[DO_RT_FINALIZING];
    l->ts_current_frame = d[DO_TS_CURRENT_FRAME];
    l->fr_code = d[DO_FR_EXECUTABLE];
    l->fr_previous = d[DO_FR_PREVIOUS];
    l->fr_instr = d[DO_FR_INSTR];
    l->fr_owner = d[DO_FR_OWNER];
    l->fr_is_entry = -1;
    l->co_filename = d[DO_CO_FILENAME];
    l->co_qualname = d[DO_CO_QUALNAME];
    l->co_linetable = d[DO_CO_LINETABLE];
    l->co_firstlineno = d[DO_CO_FIRSTLINENO];
    l->co_code = d[DO_CO_CODE];
    l->ob_type = d[DO_OB_TYPE];
    l->ob_size = ob_size;
    l->str_hash = d[DO_STR_LENGTH] + 8; /* hash follows length in str */
    l->text.str_length = d[DO_STR_LENGTH];
    l->text.str_state = d[DO_STR_STATE];
    l->text.str_ascii_size = ascii_size;
    l->text.str_compact_size = ascii_size + 16; /* utf8_length, utf8 */
    l->text.bytes_size = d[DO_BYTES_OB_SIZE];
    l->text.bytes_data = d[DO_BYTES_SVAL];
    return 0;
}

/* ---- setup -------------------------------------------------------------- */

static unsigned python_version(uintptr_t rt)
{
    /* Tests stand in for an interpreter this build cannot read. */
    const char *fake = getenv("TIDEMARK_TEST_PYTHON_VERSION");
    if (fake && *fake)
        return (unsigned)strtoul(fake, NULL, 16);
    const unsigned long *v = dlsym(RTLD_DEFAULT, "Py_Version");
    if (v)
        return (unsigned)(*v >> 16);
    const char *(*get)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    if (get) {
        const char *s = get(); /* a static string, "3.10.12 (main, ..." */
        unsigned major = 0, minor = 0;
        if (s && sscanf(s, "%u.%u", &major, &minor) == 2)
            return major << 8 | minor;
    }
    (void)rt;
    return 0;
}

static void find_eval_loop(void)
{
    void *f = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (f && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
        sym->st_size > 0) {
        py.eval_lo = (uintptr_t)f;
        py.eval_hi = (uintptr_t)f + sym->st_size;
    }
}

static int setup_locked(void)
{
    void *rt = dlsym(RTLD_DEFAULT, "_PyRuntime");
    if (!rt)
        return -1; /* no interpreter in this program: nothing to say */
    char why[160];
    unsigned v = python_version((uintptr_t)rt);
    py.runtime = (uintptr_t)rt;
    py.code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
    py.str_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    py.bytes_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyBytes_Type");
    py.this_thread_state =
        (tstate_getter_fn)dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    if (!py.code_type || !py.str_type || !py.bytes_type) {
        say("the Python interpreter's type objects were not found");
        return -1;
    }
    if (v == 0x030b) {
        py.l = layout_311;
    } else if (v == 0x030c) {
        py.l = layout_312;
    } else if (v == 0x030d) {
        if (layout_from_debug_offsets((uintptr_t)rt, &py.l, why, sizeof why) != 0) {
            say(why);
            return -1;
        }
        if (py.l.version != 0x030d) {
            say("Python's _Py_DebugOffsets table names another version");
            return -1;
        }
    } else {
        snprintf(why, sizeof why,
                 "Python %u.%u frames cannot be read (tidemark reads 3.11 to 3.13)",
                 v >> 8, v & 0xff);
        say(why);
        return -1;
    }
    if (!py.l.tss_in_runtime && !py.this_thread_state) {
        say("PyGILState_GetThisThreadState was not found");
        return -1;
    }
    if (!tdm__py_code_init(&py.l.text)) {
        say("no memory for the table of Python code objects");
        return -1;
    }
    find_eval_loop();
    return 1;
}

int tdm__py_setup(void)
{
    int s = atomic_load_explicit(&py.state, memory_order_acquire);
    if (s)
        return s > 0;
    pthread_mutex_lock(&py.lock);
    if (!atomic_load_explicit(&py.state, memory_order_relaxed))
        atomic_store_explicit(&py.state, setup_locked(), memory_order_release);
    pthread_mutex_unlock(&py.lock);
    return atomic_load_explicit(&py.state, memory_order_acquire) > 0;
}

void tdm__py_eval_range(uintptr_t *lo, uintptr_t *hi)
{
    *lo = py.eval_lo;
    *hi = py.eval_hi;
}

/* ---- reading ------------------------------------------------------------ */

static inline uintptr_t ld(uintptr_t a) { return *(const uintptr_t *)a; }
static inline int64_t ld64(uintptr_t a) { return *(const int64_t *)a; }

/* The calling thread's PyThreadState, or 0. */
static inline uintptr_t this_thread_state(void)
{
    const py_layout *l = &py.l;
    if (l->tss_in_runtime) {
        const int *tss = (const int *)(py.runtime + l->rt_tss);
        if (!tss[0]) /* _is_initialized */
            return 0;
        return (uintptr_t)pthread_getspecific((pthread_key_t)tss[1]);
    }
    return (uintptr_t)py.this_thread_state();
}

static inline uintptr_t current_frame(uintptr_t ts)
{
    const py_layout *l = &py.l;
    if (l->via_cframe) {
        uintptr_t cf = ld(ts + l->ts_cframe);
        return cf ? ld(cf + l->cframe_current) : 0;
    }
    return ld(ts + l->ts_current_frame);
}

/* One word read through the kernel: 0 when the address is not readable. */
static int safe_ld(uintptr_t addr, uintptr_t *out)
{
    struct iovec local = {out, sizeof *out}, remote = {(void *)addr, sizeof *out};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof *out;
}

/* The first chain of the process, read with checked loads before any
 * plain one: every pointer followed must be readable and every code
 * object and its texts of the right type.  1 good, 0 bad, -1 the kernel
 * refused the reads (then the type checks of every capture stand alone). */
static int validate_chain(uintptr_t ts)
{
    const py_layout *l = &py.l;
    uintptr_t fr = 0, w;
    if (l->via_cframe) {
        if (!safe_ld(ts + l->ts_cframe, &w))
            return errno == EFAULT ? 0 : -1;
        if (!w || !safe_ld(w + l->cframe_current, &fr))
            return 0;
    } else if (!safe_ld(ts + l->ts_current_frame, &fr)) {
        return errno == EFAULT ? 0 : -1;
    }
    int seen = 0;
    for (int i = 0; fr && i < 16; i++) {
        uintptr_t code, type;
        if (!safe_ld(fr + l->fr_code, &code))
            return 0;
        if (code && safe_ld(code + l->ob_type, &type) && type == py.code_type) {
            uintptr_t fn, qn, lt, t1, t2, t3;
            if (!safe_ld(code + l->co_filename, &fn) ||
                !safe_ld(code + l->co_qualname, &qn) ||
                !safe_ld(code + l->co_linetable, &lt) ||
                !safe_ld(fn + l->ob_type, &t1) || !safe_ld(qn + l->ob_type, &t2) ||
                !safe_ld(lt + l->ob_type, &t3) || t1 != py.str_type ||
                t2 != py.str_type || t3 != py.bytes_type)
                return 0;
            seen++;
        } else if (l->fr_is_entry >= 0) {
            return 0; /* 3.11 has no frames without a code object */
        }
        if (!safe_ld(fr + l->fr_previous, &fr))
            return 0;
    }
    return seen > 0;
}

static __attribute__((noinline)) int validate(uintptr_t ts)
{
    int v = validate_chain(ts);
    if (v == 0) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&py.validated, &expected, -1))
            say("this Python's frames do not have the layout tidemark expects");
        return 0;
    }
    atomic_store_explicit(&py.validated, 1, memory_order_release);
    return 1;
}

unsigned tdm__py_capture(uintptr_t *out, unsigned char *group_end, unsigned max)
{
    if (atomic_load_explicit(&py.state, memory_order_acquire) <= 0)
        return 0;
    const py_layout *l = &py.l;
    uintptr_t ts = this_thread_state();
    if (!ts || ld(py.runtime + l->rt_finalizing))
        return 0;
    uintptr_t fr = current_frame(ts);
    if (!fr)
        return 0;
    int checked = atomic_load_explicit(&py.validated, memory_order_acquire);
    if (UNLIKELY(checked <= 0) && (checked < 0 || !validate(ts)))
        return 0;
    tdm__py_code_memo *memo = tdm__py_code_memo_this_thread();
    unsigned n = 0;
    for (unsigned guard = 0; fr && n < max && guard < 100000; guard++) {
        uintptr_t code = ld(fr + l->fr_code);
        int ends = l->fr_is_entry >= 0 &&
                   *(const unsigned char *)(fr + (size_t)l->fr_is_entry);
        if (l->fr_is_entry < 0 &&
            *(const unsigned char *)(fr + l->fr_owner) == OWNED_BY_CSTACK) {
            if (n)
                group_end[n - 1] = 1;
            fr = ld(fr + l->fr_previous);
            continue;
        }
        if (code && ld(code + l->ob_type) == py.code_type) {
            tdm__py_code_key k;
            k.code = code;
            k.filename = ld(code + l->co_filename);
            k.qualname = ld(code + l->co_qualname);
            k.linetable = ld(code + l->co_linetable);
            k.filename_hash = ld64(k.filename + l->str_hash);
            k.qualname_hash = ld64(k.qualname + l->str_hash);
            k.linetable_len = ld64(k.linetable + l->text.bytes_size);
            k.code_len = ld64(code + l->ob_size);
            k.firstlineno = *(const int32_t *)(code + l->co_firstlineno);
            uint64_t id = tdm__py_memo_find(memo, &k);
            if (!id && ld(k.filename + l->ob_type) == py.str_type &&
                ld(k.qualname + l->ob_type) == py.str_type &&
                ld(k.linetable + l->ob_type) == py.bytes_type)
                id = tdm__py_code_id(memo, &k);
            int64_t instr = ((int64_t)ld(fr + l->fr_instr) -
                             (int64_t)(code + l->co_code)) / 2;
            uint64_t slot = instr >= -1 && instr + 1 <= (int64_t)TDM_PY_INSTR_MASK
                                ? (uint64_t)(instr + 1) : 0;
            if (id) {
                out[n] = (uintptr_t)(TDM_PY_TAG | id << TDM_PY_INSTR_BITS | slot);
                group_end[n] = (unsigned char)ends;
                n++;
            } else if (ends && n) {
                group_end[n - 1] = 1;
            }
        } else if (ends && n) {
            group_end[n - 1] = 1;
        }
        fr = ld(fr + l->fr_previous);
    }
    if (n)
        group_end[n - 1] = 1;
    return n;
}

int tdm__py_resolve(uintptr_t entry, tdm__py_symbol *out)
{
    if (!tdm__py_is_entry(entry))
        return 0;
    uint64_t id = ((uint64_t)entry & ~TDM_PY_TAG) >> TDM_PY_INSTR_BITS;
    int64_t instr = (int64_t)(entry & TDM_PY_INSTR_MASK) - 1;
    return tdm__py_code_resolve(id, instr, out);
}
