"""tests/hooks/infra/tidemark_py_check.py: python/tidemark.py against the
built libtidemark.so (TIDEMARK_LIB), the way a PyTorch program uses it but
without torch: the pluggable-allocator entry points are called with ctypes
as torch would call them; phase() as a call and as a context manager; and
tdm_conf_check reached through the loaded library.

    python3 tidemark_py_check.py OUT.tdm

Exit status 0, or an AssertionError / exception."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

out = sys.argv[1]
lib_env = os.environ["TIDEMARK_LIB"]

# The library found is the one asked for, and it is the real file.
assert tidemark.library_path() == os.path.realpath(lib_env), tidemark.library_path()
path, alloc_name, free_name = tidemark.pluggable_allocator()
assert (alloc_name, free_name) == ("tdm_torch_alloc", "tdm_torch_free")
hooks = tidemark.torch_hooks()
assert sorted(hooks) == ["base_alloc", "init", "memory_fraction", "record_stream", "reset"]
assert all(isinstance(v, int) and v for v in hooks.values())

# What torch.cuda.memory.CUDAPluggableAllocator does with the triple.
torch_lib = ctypes.CDLL(path)
alloc = ctypes.cast(getattr(torch_lib, alloc_name),
                    ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_void_p))
free = ctypes.cast(getattr(torch_lib, free_name),
                   ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_void_p))
init = ctypes.CFUNCTYPE(None, ctypes.c_int)(hooks["init"])
reset = ctypes.CFUNCTYPE(None)(hooks["reset"])

assert not tidemark.is_recording()
tidemark.record_memory_history(max_entries=5000)
assert tidemark.is_recording()
tidemark.set_metadata("python check")
init(0)

tidemark.step()
tidemark.phase("forward")
with tidemark.tag("activation"):
    a = alloc(3 << 20, 0, None)
    with tidemark.tag("input"):
        b = alloc(5000, 0, ctypes.c_void_p(0x42))
c = alloc(1000, 0, None)
assert a and b and c
tidemark.tag_pointer(c, "gradient")

# getBaseAllocation: the segment each block lies in (a large 20 MiB one for
# a, small 2 MiB ones for b and c: one per stream); anything else is its
# own base, of no size.
base_alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.POINTER(ctypes.c_size_t))(hooks["base_alloc"])
bases = {}
for name, ptr, seg in (("a", a, 20 << 20), ("b", b, 2 << 20), ("c", c, 2 << 20)):
    n = ctypes.c_size_t(7)
    base = base_alloc(ptr, ctypes.byref(n))
    assert n.value == seg and base <= ptr < base + seg, (name, hex(ptr), hex(base or 0), n.value)
    bases[name] = base
assert len(set(bases.values())) == 3, bases
n = ctypes.c_size_t(7)
assert base_alloc(0x1000, ctypes.byref(n)) == 0x1000 and n.value == 0, n.value
assert base_alloc(c, None) == bases["c"]

s = tidemark.memory_stats(0)
assert s["allocation.all.current"] == 3, s["allocation.all.current"]
assert s["requested_bytes.all.current"] == (3 << 20) + 5000 + 1000
assert s["allocated_bytes.large_pool.current"] == 3 << 20
assert s["allocated_bytes.small_pool.current"] == 5120 + 1024
assert s["num_ooms"] == 0

tidemark.phase("backward")
free(a, 3 << 20, 0, None)
s = tidemark.memory_stats(0)
assert s["allocation.all.current"] == 2
assert s["allocated_bytes.all.peak"] == (3 << 20) + 5120 + 1024
tidemark.reset_peak_memory_stats(0)
assert tidemark.memory_stats(0)["allocated_bytes.all.peak"] == 5120 + 1024
reset()  # torch.cuda.empty_cache()
assert tidemark.memory_stats(0)["reserved_bytes.large_pool.current"] == 0
tidemark.empty_cache()

# phase() as a context manager, like torch's record_function: on exit the
# phase in force before it comes back, so blocks nest; an exception leaves
# the block and its phase all the same.  test_torch.sh reads the phases of
# these allocations back from the snapshot.
with tidemark.phase("optimizer") as p:
    assert p.name == "optimizer", p
    d = alloc(2048, 0, None)
    with tidemark.phase("zero_grad"):
        e = alloc(4096, 0, None)
    f = alloc(8192, 0, None)  # optimizer again
g = alloc(16384, 0, None)  # backward again
try:
    with tidemark.phase("eval"):
        raise KeyError("leaves the block")
except KeyError:
    pass
h = alloc(32768, 0, None)  # backward again
for ptr, size in ((d, 2048), (e, 4096), (f, 8192), (g, 16384), (h, 32768)):
    assert ptr
    free(ptr, size, 0, None)

# tdm_conf_check is exported, and says what loading would say.
conf_check = torch_lib.tdm_conf_check
conf_check.restype = ctypes.c_int
conf_check.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
status_name = torch_lib.tdm_status_name
status_name.restype = ctypes.c_char_p
status_name.argtypes = [ctypes.c_int]
msg = ctypes.create_string_buffer(5120)
assert conf_check(b"record=all,dump=out/%h-r%r.tdm,max_split_size=64MiB", msg, 5120) == 0, msg.value
assert msg.value == b""
st = conf_check(b"DUMP=x.tdm", msg, 5120)
assert status_name(st) == b"TDM_BAD_CONFIG", status_name(st)
assert msg.value.startswith(b"tidemark: TIDEMARK_CONF: unknown key 'DUMP' (did you mean 'dump'?"), msg.value
assert conf_check(b"record=al", None, 0) != 0

# Errors: bad names are ValueError, failing calls TidemarkError.
for bad in (lambda: tidemark.tag("weights").__enter__(),
            lambda: tidemark.record_memory_history(context="everything"),
            lambda: tidemark.record_memory_history(max_entries=0)):
    try:
        bad()
    except ValueError:
        pass
    else:
        raise AssertionError("ValueError expected")
try:
    tidemark.tag_pointer(0x1234, "gradient")
except tidemark.TidemarkError as e:
    assert e.name == "TDM_UNKNOWN_POINTER", e.name
else:
    raise AssertionError("TidemarkError expected")
try:
    tidemark.memory_stats(7)
except tidemark.TidemarkError as e:
    assert e.name == "TDM_NO_SUCH_DEVICE"
else:
    raise AssertionError("TidemarkError expected")

tidemark.dump_snapshot(out)
tidemark.record_memory_history(enabled=None)
assert not tidemark.is_recording()
print("python check ok")
