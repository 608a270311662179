"""tests/python/pystacks_child.py: the programs test_python_stacks.py
records.  Run as: pystacks_child.py SCENARIO OUT.tdm [STACKS].  The line
numbers of the marked lines are what the test expects in the snapshot;
the test reads them from this file (the '# L:name' markers)."""
import ctypes
import gc
import os
import sys

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

scenario, out = sys.argv[1], sys.argv[2]
stacks = sys.argv[3] if len(sys.argv) > 3 else "all"
lib = None


def alloc(size):
    p = ctypes.c_void_p()
    rc = lib.tdm_malloc(ctypes.byref(p), ctypes.c_size_t(size), 0, None)  # L:alloc
    assert rc == 0, rc
    return p


def inner(size):
    return alloc(size)  # L:inner


def middle(size):
    return inner(size)  # L:middle


def outer(size):
    return middle(size)  # L:outer


def gen(n):
    for i in range(n):
        yield alloc(2000 + i)  # L:gen


async def coro():
    return alloc(3000)  # L:coro


def code_churn(rounds):
    """Functions compiled, run and dropped in a loop, so that new code
    objects land where dead ones were; each must keep its own name."""
    addresses = set()
    reused = 0
    for i in range(rounds):
        body = "\n" * (i % 7) + "def f_%d(alloc):\n    return alloc(%d)\n" % (i, 10000 + i)
        ns = {}
        exec(compile(body, "dyn_%d.py" % (i % 3), "exec"), ns)
        fn = ns["f_%d" % i]
        if id(fn.__code__) in addresses:
            reused += 1
        addresses.add(id(fn.__code__))
        fn(alloc)
        del fn, ns
        gc.collect()  # ns and fn form a cycle; free the code object now
    print("reused %d" % reused)


def main():
    global lib
    if scenario == "exit":
        lib = tidemark.library()  # TIDEMARK_CONF records and dumps at exit
        outer(1000)
        return
    if scenario == "cuda":
        rt = ctypes.CDLL("libcudart.so.13")
        p = ctypes.c_void_p()

        def cuda_alloc():
            return rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(5000))  # L:cuda

        assert cuda_alloc() == 0  # L:cuda_call
        return  # TIDEMARK_CONF dumps at exit
    lib = tidemark.library()
    tidemark.record_memory_history(stacks=stacks)
    if scenario == "nested":
        outer(1000)
    elif scenario == "gen":
        for _ in gen(2):
            pass
        c = coro()
        try:
            c.send(None)
        except StopIteration:
            pass
    elif scenario == "churn":
        code_churn(300)
    elif scenario == "cthread":
        c = ctypes.CDLL(os.environ["CTHREAD_LIB"])
        assert c.pyframes_run_c_thread(ctypes.c_size_t(4000)) == 0
        outer(1000)
    tidemark.dump_snapshot(out)


main()
