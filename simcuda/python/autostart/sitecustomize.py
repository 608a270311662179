"""The simulated CUDA platform's start-up hook for Python programs
(docs/simulate.md): first on PYTHONPATH (`tidemark run --simulate` puts it
there), it has simcuda_torch.torch_defaults() run right after the program
imports torch (SIMCUDA_TORCH_DEFAULTS=0: not), then runs the next
sitecustomize on the path (tidemark's own, the program's) as it would have
run without this one.  Nothing here may stop the program: an error is one
line on stderr.
"""
import os
import sys


def _start():
    here = os.path.dirname(os.path.abspath(__file__))
    python_dir = os.path.dirname(here)
    if python_dir not in sys.path:
        sys.path.append(python_dir)
    import simcuda_torch
    if os.environ.get("SIMCUDA_TORCH_DEFAULTS", "1") != "0":
        simcuda_torch.when_imported(simcuda_torch.torch_defaults)


def _chain():
    """Runs the next sitecustomize on the path: the one this file hides."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    hidden = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        sys.path[:] = hidden
        import importlib
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":
            raise
    finally:
        # What the next one put on the path (tidemark's adds its python/)
        # stays there.
        sys.path[:] = saved + [p for p in sys.path if p not in hidden and p not in saved]
        if "sitecustomize" not in sys.modules and mine is not None:
            sys.modules["sitecustomize"] = mine


try:
    _start()
except Exception as exc:  # noqa: BLE001 - never stop the program
    sys.stderr.write("simcuda: torch defaults not set up (%s: %s)\n" % (type(exc).__name__, exc))
try:
    _chain()
except Exception as exc:  # noqa: BLE001
    sys.stderr.write("simcuda: the next sitecustomize failed: %s: %s\n" % (type(exc).__name__, exc))
