"""tidemark_torch: phase and step marks for a PyTorch program that has none.

tidemark infers categories (parameters, activations, gradients, optimizer
state) from the phase and step in force when memory is made and freed
(docs/categories.md).  A program that never calls tidemark.phase() gets
those marks from here, set by torch's own global hooks:

- forward: the outermost module call on the training thread
  (torch.nn.modules.module.register_module_forward_pre_hook and
  register_module_forward_hook).  Nested modules do not mark again, and a
  forward run inside backward (activation checkpointing recomputes) does
  not move the phase;
- backward: torch.Tensor.backward and torch.autograd.backward, wrapped,
  from the call until the optimizer's step (autograd's engine threads
  allocate the gradients while the phase is "backward");
- optimizer: each optimizer step (torch.optim.optimizer's global step
  hooks where the torch version has them, else the step method of each
  optimizer class, wrapped when its first instance is made);
- data: when the outermost backward or an optimizer step returns, until
  the next mark: the loop's next batch (or micro-batch) is made there; and
  when an outermost forward run without autograd (torch.no_grad) returns:
  what the loop makes before the next forward is handed to it;
- step: a new step begins with the first forward after an optimizer step
  (one stepped inside backward too, on any thread) and with the first
  forward of the run; in a program no optimizer has stepped in
  (inference), with every outermost forward run without autograd.

Only the thread that made the first outermost forward call moves the
phase.  As soon as the program marks a phase or a step itself (through
tidemark.phase()/tidemark.step()), these marks stop: its own win.

Nothing here may break the program: torch missing, a torch without one of
the hooks, or an error inside a hook prints one line on stderr and the
program runs on (with fewer marks, or none).

Used by tidemark.auto_phases(), by `python -m tidemark script.py`, and at
interpreter start-up by `tidemark run` (python/autostart/sitecustomize.py):
then the hooks go in when the program imports torch.  Off with
TIDEMARK_CONF=torch_phases=off.
"""

import functools
import os
import sys
import threading

_state_lock = threading.Lock()
_installed = False
_disabled = False
_training_thread = None
_depth = threading.local()   # outermost-call depth, per thread
_in_backward = 0             # Tensor.backward calls in progress
_after_optimizer = True      # the next outermost forward starts a step
_optimizer_seen = False      # an optimizer has stepped: a training program
_phase_now = None


def _say(what):
    try:
        sys.stderr.write("tidemark: %s\n" % what)
    except Exception:  # noqa: BLE001 - stderr closed: nothing to say it on
        pass


def _tidemark():
    import tidemark
    return tidemark


def _give_up(where, exc):
    """An error inside a hook: say it once, stop marking, run on."""
    global _disabled
    if not _disabled:
        _disabled = True
        _say("automatic torch phases stopped (%s: %s: %s); the program runs on"
             % (where, type(exc).__name__, exc))


def _mark(name, new_step=False):
    """Marks `name` (and a step before it) unless the program marks its
    own or this thread is not the training thread."""
    global _phase_now
    if _disabled:
        return
    tm = _tidemark()
    if tm._user_marks:
        return
    if new_step:
        tm._auto_step()
    if name != _phase_now or new_step:
        tm._auto_phase(name)
        _phase_now = name


def _guarded(where):
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - never into torch
                _give_up(where, exc)
            return None
        return run
    return wrap


@_guarded("forward pre-hook")
def _forward_pre(module, inputs):
    global _training_thread, _after_optimizer
    depth = getattr(_depth, "n", 0)
    _depth.n = depth + 1
    if depth or _in_backward:
        return None
    me = threading.get_ident()
    if _training_thread is None:
        _training_thread = me
    if me != _training_thread:
        return None
    new_step, _after_optimizer = _after_optimizer, False
    # Inference (no optimizer ever stepped, autograd off): each outermost
    # forward is a step of its own, a generated token.
    new_step = new_step or (not _optimizer_seen and not _grad_enabled())
    _mark("forward", new_step)
    return None


def _grad_enabled():
    grad_on = getattr(sys.modules.get("torch"), "is_grad_enabled", None)
    return grad_on is None or grad_on()


@_guarded("forward hook")
def _forward_post(module, inputs, output):
    _depth.n = max(getattr(_depth, "n", 1) - 1, 0)
    # An outermost forward without autograd (inference, an evaluation
    # pass) has no backward to wait for: what the loop makes before the
    # next forward (the next tokens, a KV cache handed to it) is its input.
    if _depth.n == 0 and not _in_backward and threading.get_ident() == _training_thread \
            and not _grad_enabled():
        _mark("data")
    return None


def _wrap_backward(fn):
    @functools.wraps(fn)
    def backward(*args, **kwargs):
        global _in_backward
        try:
            if threading.get_ident() == _training_thread or _training_thread is None:
                _mark("backward")
        except Exception as exc:  # noqa: BLE001
            _give_up("backward", exc)
        _in_backward += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _in_backward -= 1
            _after_pass()
    backward.__tidemark_wrapped__ = True
    return backward


def _optimizer_pre(*_args, **_kwargs):
    global _optimizer_seen
    _optimizer_seen = True
    try:
        if threading.get_ident() == _training_thread or _training_thread is None:
            _mark("optimizer")
    except Exception as exc:  # noqa: BLE001
        _give_up("optimizer step hook", exc)


def _optimizer_post(*_args, **_kwargs):
    global _after_optimizer
    # An optimizer stepped inside backward (a per-parameter optimizer in
    # register_post_accumulate_grad_hook, on autograd's engine thread or
    # this one) ends the step too: the next forward begins the next one.
    if threading.get_ident() == _training_thread or _training_thread is None or _in_backward:
        _after_optimizer = True
        _after_pass()


def _after_pass():
    """The outermost backward or an optimizer step has returned on the
    training thread: what the loop makes now, until the next forward or
    step, is its next batch (the next micro-batch of gradient accumulation,
    the batch loaded after optimizer.step()), so the phase is "data"."""
    try:
        if _in_backward == 0 and (threading.get_ident() == _training_thread or
                                  _training_thread is None):
            _mark("data")
    except Exception as exc:  # noqa: BLE001
        _give_up("end of backward or step", exc)


def _wrap_step(step):
    @functools.wraps(step)
    def wrapped(*args, **kwargs):
        _optimizer_pre()
        try:
            return step(*args, **kwargs)
        finally:
            _optimizer_post()
    wrapped.__tidemark_wrapped__ = True
    return wrapped


def _hook_optimizers(torch):
    """Global step hooks (torch >= 2.0), else each optimizer class's step,
    wrapped when its first instance is made.  Returns what was missing."""
    opt = getattr(torch.optim, "optimizer", None)
    pre = _has(opt, "register_optimizer_step_pre_hook")
    post = _has(opt, "register_optimizer_step_post_hook")
    if pre and post:
        pre(_optimizer_pre)
        post(_optimizer_post)
        return None
    base = _has(torch.optim, "Optimizer")
    if base is None:
        return "torch.optim.Optimizer"
    init = base.__init__

    @functools.wraps(init)
    def init_and_wrap(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            cls = type(self)
            step = cls.__dict__.get("step")
            if step is not None and not getattr(step, "__tidemark_wrapped__", False):
                cls.step = _wrap_step(step)
        except Exception as exc:  # noqa: BLE001
            _give_up("optimizer step wrap", exc)

    base.__init__ = init_and_wrap
    return None


def _has(obj, name):
    """getattr(obj, name, None), except for names a test says this torch
    lacks (TIDEMARK_TEST_TORCH_MISSING=name,name: an older torch,
    simulated)."""
    if name in os.environ.get("TIDEMARK_TEST_TORCH_MISSING", "").split(","):
        return None
    return getattr(obj, name, None)


def install(torch=None):
    """Installs the hooks into an imported torch; True when any went in.
    Safe to call more than once (the second call does nothing)."""
    global _installed
    with _state_lock:
        if _installed:
            return True
        _installed = True
    try:
        if torch is None:
            import torch  # noqa: F811 - the caller may pass the module
        missing = []
        mod = torch.nn.modules.module
        fpre = _has(mod, "register_module_forward_pre_hook")
        fpost = _has(mod, "register_module_forward_hook")
        if fpre and fpost:
            fpre(_forward_pre)
            fpost(_forward_post)
        else:
            missing.append("register_module_forward_pre_hook")
        if not getattr(torch.Tensor.backward, "__tidemark_wrapped__", False):
            torch.Tensor.backward = _wrap_backward(torch.Tensor.backward)
            torch.autograd.backward = _wrap_backward(torch.autograd.backward)
        why = _hook_optimizers(torch)
        if why:
            missing.append(why)
        if missing:
            _say("this torch (%s) has no %s: automatic phases are partial"
                 % (getattr(torch, "__version__", "?"), ", ".join(missing)))
        return bool(fpre and fpost)
    except Exception as exc:  # noqa: BLE001 - never break the program
        _say("automatic torch phases not installed (%s: %s); the program runs on"
             % (type(exc).__name__, exc))
        return False


_after_import = []  # what runs once torch has been imported


class _TorchFinder:
    """A sys.meta_path entry that lets torch import as usual and runs
    _after_import (the phase hooks, tensor events) once its module has
    run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once, and not for the lookup below
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            for then in list(_after_import):
                then(module)

        spec.loader.exec_module = exec_then_install
        return spec


def when_imported(then):
    """Calls then(torch) now if torch is imported, else right after it is
    (before the program's next line runs).  Returns what then() did, or
    True when it waits."""
    if "torch" in sys.modules:
        return then(sys.modules["torch"])
    if then not in _after_import:
        _after_import.append(then)
    if not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchFinder())
    return True


def install_when_imported():
    """Installs the hooks now if torch is imported, else when it is."""
    return when_imported(install)


def enabled_by_conf(conf):
    """Whether TIDEMARK_CONF leaves automatic phases on (torch_phases=on,
    the default, or off).  A key given twice keeps its last value, as the
    C library reads it."""
    on = True
    for item in (conf or "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "torch_phases":
            on = value.strip().lower() not in ("off", "0", "false", "no")
    return on
