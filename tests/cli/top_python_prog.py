"""tests/cli/top_python_prog.py: a Python program that records through
python/tidemark.py on the sim device, for cli.test_top_python: it holds
3 blocks of 1 MiB and one of 512 KiB, prints "ready", and frees them and
ends once the file named by its argument exists (at most 60 s)."""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

lib = tidemark.library()


def hold(size):
    p = ctypes.c_void_p()
    rc = lib.tdm_malloc(ctypes.byref(p), ctypes.c_size_t(size), 0, None)
    assert rc == 0, rc
    return p


with tidemark.phase("init"):
    blocks = [hold(1 << 20) for _ in range(3)] + [hold(512 << 10)]
print("ready", flush=True)
deadline = time.time() + 60
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.05)
for p in blocks:
    lib.tdm_free(p, 0, None)
