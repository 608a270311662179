"""tests/hooks/infra/torch_hooks_check.py: tidemark.use_with_torch() hands
every optional hook of libtidemark.so to torch's pluggable allocator,
getBaseAllocation's (set_base_alloc_fn) included, so that torch shares a
CUDA tensor by the allocation that holds it.

    python3 torch_hooks_check.py          a torch.cuda.memory stand-in
    python3 torch_hooks_check.py torch    the real torch's allocator
                                          object (a CUDA build; no GPU
                                          needed), its setters called

Environment: TIDEMARK_LIB, TDM_SOURCE_DIR.  Exit status 0; 77 when the
real torch is asked for and lacks CUDAPluggableAllocator."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

SETTERS = {"init": "set_init_fn", "reset": "set_reset_fn",
           "memory_fraction": "set_memory_fraction_fn",
           "base_alloc": "set_base_alloc_fn", "record_stream": "set_record_stream_fn"}


class Recorder:
    """Stands for the allocator object torch keeps (alloc._allocator):
    notes each set_*_fn call, and passes it on to the real one if any."""

    def __init__(self, real=None):
        self.real, self.calls = real, {}

    def __getattr__(self, name):
        if not name.startswith("set_"):
            raise AttributeError(name)
        forward = getattr(self.real, name) if self.real is not None else None

        def setter(addr):
            self.calls[name] = addr
            if forward is not None:
                forward(addr)  # the real binding takes the address
        return setter


def memory_module(base_class):
    swapped = []

    class Allocator(base_class):
        def __init__(self, path, alloc_name, free_name):
            if base_class is not object:
                super().__init__(path, alloc_name, free_name)
            self.args = (path, alloc_name, free_name)
            self._allocator = Recorder(getattr(self, "_allocator", None))

    return types.SimpleNamespace(CUDAPluggableAllocator=Allocator,
                                 change_current_allocator=swapped.append), swapped


if len(sys.argv) > 1 and sys.argv[1] == "torch":
    try:
        import torch
        base = torch.cuda.memory.CUDAPluggableAllocator
    except (ImportError, AttributeError) as exc:
        print("no torch with CUDAPluggableAllocator (%s): skipped" % exc)
        sys.exit(77)
    what = "torch %s" % torch.__version__
else:
    base, what = object, "a stand-in"

memory, swapped = memory_module(base)
alloc = tidemark.use_with_torch(memory)
hooks = tidemark.torch_hooks()
assert swapped == [alloc], swapped
assert alloc.args == tidemark.pluggable_allocator(), alloc.args
calls = alloc._allocator.calls
for key, setter in SETTERS.items():
    if base is object or hasattr(alloc._allocator.real, setter):
        assert calls.get(setter) == hooks[key], (setter, calls.get(setter), hooks[key])
assert "set_base_alloc_fn" in calls, "%s: no set_base_alloc_fn call: %s" % (what, calls)
print("%s: %s" % (what, ", ".join(sorted(calls))))
