"""tidemark's start-up hook for Python programs (see docs/categories.md,
"Unmodified PyTorch programs").

`tidemark run` puts this folder first on PYTHONPATH, so every Python
interpreter it starts (the program, torchrun's ranks, DataLoader workers,
python -m ...) runs this file at start-up: when the program imports torch,
tidemark installs torch's own global hooks to mark phases and steps
(python/tidemark_torch.py), and arranges one event per tensor when it
uses torch.cuda (python/tidemark_tensors.py).  For a bare LD_PRELOAD run,
put this folder on PYTHONPATH yourself.  TIDEMARK_CONF=torch_phases=off
and torch_tensors=off leave them out.

Then the program's own sitecustomize, if it has one further along the
path, runs as it would have without tidemark.  Nothing here may stop the
program: any error is one line on stderr.
"""
import os
import sys


def _start():
    here = os.path.dirname(os.path.abspath(__file__))
    python_dir = os.path.dirname(here)
    if python_dir not in sys.path:
        sys.path.append(python_dir)  # tidemark.py and tidemark_torch.py
    import tidemark_torch
    import tidemark_tensors
    if tidemark_torch.enabled_by_conf(os.environ.get("TIDEMARK_CONF")):
        tidemark_torch.install_when_imported()
    # One event per tensor for a program using torch.cuda (torch_tensors).
    tidemark_tensors.start_when_imported()


def _chain():
    """Runs the next sitecustomize on the path: the one this file hides."""
    here = os.path.dirname(os.path.abspath(__file__))
    mine = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path
                       if os.path.abspath(p or os.curdir) != here]
        import importlib
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        if getattr(exc, "name", None) != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved
        if "sitecustomize" not in sys.modules and mine is not None:
            sys.modules["sitecustomize"] = mine


try:
    _start()
except Exception as exc:  # noqa: BLE001 - never stop the program
    sys.stderr.write("tidemark: automatic torch phases not set up (%s: %s)\n"
                     % (type(exc).__name__, exc))
try:
    _chain()
except Exception as exc:  # noqa: BLE001
    sys.stderr.write("tidemark: the program's own sitecustomize failed: %s: %s\n"
                     % (type(exc).__name__, exc))
