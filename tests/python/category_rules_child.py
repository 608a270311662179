"""tests/python/category_rules_child.py: a training loop shaped like a
PyTorch one, with no phase or step marks, that test_category_rules.py
records (stacks=python).  Run as: category_rules_child.py FAKE_TORCH_DIR
OUT.tdm.  Its device memory is made through tdm_malloc (ctypes) from
functions that live in files laid out as torch's are (FAKE_TORCH_DIR/
torch/nn/modules/module.py, torch/optim/adam.py, torch/_tensor.py,
torch/utils/data/dataloader.py), written by the test, so that the
default category rules match their frames as they match torch's."""
import ctypes
import importlib.util
import os
import sys

sys.path.insert(0, os.path.join(os.environ["TDM_SOURCE_DIR"], "python"))
import tidemark  # noqa: E402

fake, out = sys.argv[1], sys.argv[2]
lib = tidemark.library()


def dev_alloc(size):
    p = ctypes.c_void_p()
    assert lib.tdm_malloc(ctypes.byref(p), ctypes.c_size_t(size), 0, None) == 0
    return p.value


def dev_free(p):
    assert lib.tdm_free(ctypes.c_void_p(p), 0) == 0


def model_forward():
    return dev_alloc(50)


def load(rel, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(fake, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.dev_alloc, mod.dev_free = dev_alloc, dev_free
    return mod


module = load("torch/nn/modules/module.py", "fake_module")
adam = load("torch/optim/adam.py", "fake_adam")
tensor = load("torch/_tensor.py", "fake_tensor")
data = load("torch/utils/data/dataloader.py", "fake_dataloader")
scratch = load("my_project/scratch.py", "fake_scratch")

tidemark.record_memory_history(stacks="python")
model = module.Module()
model._apply()                          # parameters: 2 x 1000 B, kept
print("param %#x" % model.params[0])
opt = adam.Adam()
loader = data.DataLoader()
for step in range(3):
    batch = next(loader)                 # input: 300 B, freed after backward
    act = model_forward()                # no rule, no marks: unknown
    loss = tensor.Tensor()
    grads = loss.backward()              # gradients 2 x 700 B; 90 B temporary inside
    dev_free(act)
    dev_free(batch)
    opt.step(grads)                      # state 2 x 400 B once; 80 B temporary inside
    for g in grads:
        dev_free(g)
    scratch.workspace()                  # 11 B kept: a user rule's
tidemark.dump_snapshot(out)
