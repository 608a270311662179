"""tests/python/phase_block_child.py: phases as with-blocks, recorded for
test_phase_block.py.  Run as: phase_block_child.py OUT.tdm.  Prints the
address of each buffer it keeps ("NAME 0x..."), made through tdm_malloc
(ctypes) on the sim device."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

lib = tidemark.library()


def alloc(size):
    p = ctypes.c_void_p()
    assert lib.tdm_malloc(ctypes.byref(p), ctypes.c_size_t(size), 0, None) == 0
    return p.value


def free(p):
    assert lib.tdm_free(ctypes.c_void_p(p), 0) == 0


tidemark.record_memory_history()
with tidemark.phase("init"):
    params = alloc(1 << 20)
for step in range(2):
    tidemark.step()
    with tidemark.phase("forward"):
        act = alloc(1 << 16)
    with tidemark.phase("backward"):
        free(act)
# Made after every block ended: in no phase, not "init".
buf = alloc(3 << 20)
# A plain call's phase lasts; a block inside it goes back to it.
tidemark.phase("train")
with tidemark.phase("eval"):
    pass
kept = alloc(5 << 20)
print("params %#x" % params)
print("buf %#x" % buf)
print("kept %#x" % kept)
# The marks a merged PyTorch history gets (tidemark_tensors._with_marks),
# for the test to import: the init block's end is one of them.
import tidemark_tensors  # noqa: E402
marks = tidemark_tensors._with_marks({})["external_annotations"]
print("marks " + ";".join("%s:%s:%d" % (m["stage"], m["name"], m["time_us"]) for m in marks))
tidemark.dump_snapshot(sys.argv[1])
