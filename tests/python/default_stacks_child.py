"""tests/python/default_stacks_child.py: a Python program that records
only through TIDEMARK_CONF (the preload, or `tidemark run`), for
test_python_default_stacks.py.  Its device memory is made through
tdm_malloc (ctypes) in functions of its own, one of them called through
tidemark_torch's wrapper of Tensor.backward, as a torch program's
backward pass is once tidemark marks phases."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402
import tidemark_torch  # noqa: E402

lib = tidemark.library()
kept = []


def alloc(size):
    p = ctypes.c_void_p()
    assert lib.tdm_malloc(ctypes.byref(p), ctypes.c_size_t(size), 0, None) == 0
    kept.append(p.value)


def make_weights():
    alloc(3 << 20)


def make_activations():
    alloc(2 << 20)


def real_backward():
    alloc(5 << 20)


backward = tidemark_torch._wrap_backward(real_backward)


def train():
    backward()


make_weights()
make_activations()
train()
