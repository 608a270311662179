"""simcuda_torch: what PyTorch must be told on the simulated CUDA platform
(docs/simulate.md).

cuDNN is NVIDIA's library and carries NVIDIA's own runtime, which cannot
run on a simulated driver, so PyTorch must not call it: torch_defaults()
turns it off through PyTorch's documented switches,

    torch.backends.cudnn.enabled = False          (convolutions, RNNs, norms)
    torch.backends.cuda.enable_cudnn_sdp(False)   (attention)

and PyTorch then uses its own kernels (which the platform accepts and does
not run).  Nothing of torch is patched.  `tidemark run --simulate` and the
simcuda launcher put autostart/ first on PYTHONPATH, which calls it right
after the program imports torch; SIMCUDA_TORCH_DEFAULTS=0 leaves it out.
A script run by hand on the platform can call it itself:

    import torch, simcuda_torch; simcuda_torch.torch_defaults(torch)
"""
import importlib.abc
import sys

_after_import = []


def torch_defaults(torch=None):
    """Turns PyTorch's cuDNN paths off (see above); returns True."""
    if torch is None:
        import torch
    import torch.backends.cuda
    import torch.backends.cudnn
    torch.backends.cudnn.enabled = False
    torch.backends.cuda.enable_cudnn_sdp(False)
    return True


class _Loader(importlib.abc.Loader):
    """torch's own loader, then the functions waiting for torch."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        while _after_import:
            _after_import.pop(0)(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch" or not _after_import:
            return None
        sys.meta_path.remove(self)  # found once; the others find torch
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def when_imported(then):
    """Calls then(torch) now if torch is imported, else right after it is."""
    if "torch" in sys.modules:
        return then(sys.modules["torch"])
    _after_import.append(then)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return True
