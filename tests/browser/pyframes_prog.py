"""tests/browser/pyframes_prog.py: a Python program whose allocations
view_test.js looks at in the page.  Run with /usr/bin/python3 as
pyframes_prog.py OUT.tdm, TIDEMARK_LIB naming libtidemark.so and
TDM_SOURCE_DIR the source tree.  It records with stacks="all" (Python
frames merged with native ones), allocates through ctypes from nested
Python functions (once called from C, by map()) and dumps OUT.tdm.  The test reads the line numbers of
the lines marked '# L:name' from this file."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

lib = tidemark.library()
kept = []


def allocate(size):
    p = ctypes.c_void_p()
    rc = lib.tdm_malloc(ctypes.byref(p), ctypes.c_size_t(size), 0, None)  # L:allocate
    assert rc == 0, rc
    kept.append(p)


def build_layer(size):
    allocate(size)  # L:build_layer


def build_model():
    for k in range(2):
        build_layer((k + 1) << 20)  # L:build_model
    # map() calls build_layer from C: interpreter frames between the two
    list(map(build_layer, [4 << 20]))  # L:build_model_map


tidemark.record_memory_history(stacks="all")
build_model()
tidemark.dump_snapshot(sys.argv[1])
