"""tests/simcuda/cuda_torch.py: whether this interpreter's torch is a CUDA
build, without importing torch:

    python cuda_torch.py [MODULE...]

exits 0 when torch is there and built with CUDA, and each MODULE
(e.g. torchvision) is installed; 1 otherwise.  The torch tests ask this
before anything else, a score of times a suite: importing torch to read
torch.version.cuda takes 2.9 s of CPU (torchvision 5 s), reading
torch/version.py alone a few milliseconds."""
import importlib.util
import os
import sys


def cuda_build():
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    version_spec = importlib.util.spec_from_file_location("torch_version_only", path)
    if version_spec is None:
        return False
    version = importlib.util.module_from_spec(version_spec)
    try:
        version_spec.loader.exec_module(version)
    except (OSError, SyntaxError):
        return False
    return bool(getattr(version, "cuda", None))


if __name__ == "__main__":
    ok = cuda_build() and all(importlib.util.find_spec(m) is not None for m in sys.argv[1:])
    sys.exit(0 if ok else 1)
