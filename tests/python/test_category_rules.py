"""tests/python/test_category_rules.py: categories from rules over stack
frames (docs/categories.md, "Rules over stacks"), end to end, without
torch: category_rules_child.py runs a training loop with no phase or step
marks whose device memory is made from files laid out as torch's are
(written here), recorded with stacks=python.

- the default rules: parameters (module _apply), input (DataLoader),
  gradients (Tensor.backward), optimizer state (Adam.step), each call's
  own scratch temporary, and what no rule names unknown; the JSON export
  and the flame graph --by-category say the same;
- `--rules FILE` goes before the defaults (a rule naming Adam.step
  overrides the default for torch/optim/, one names the user's file);
- TIDEMARK_CONF=category_rules=FILE: the snapshot carries it and the
  commands apply it; a bad file stops recording with one line naming
  file:line, and `--rules` with a bad file exits 2 naming file:line;
- `--explain SITE` and `--explain ADDR` say which rule decided.

Environment: LIBTIDEMARK, TIDEMARK, TDM_SOURCE_DIR."""
import json
import os
import re
import subprocess
import sys
import tempfile

from child_env import HERE, sanitizer_runtime  # noqa: E402

TIDEMARK = os.environ["TIDEMARK"]
CHILD = os.path.join(HERE, "category_rules_child.py")
failures = []

FAKE = {
    "torch/nn/modules/module.py": '''
class Module:
    def __init__(self):
        self.params = []

    def _apply(self):
        tmp = dev_alloc(60)
        self.params = [dev_alloc(1000), dev_alloc(1000)]
        dev_free(tmp)
        return self
''',
    "torch/optim/adam.py": '''
class Adam:
    def __init__(self):
        self.state = None

    def step(self, grads):
        if self.state is None:
            self.state = [dev_alloc(400), dev_alloc(400)]
        t = dev_alloc(80)
        dev_free(t)
''',
    "torch/_tensor.py": '''
class Tensor:
    def backward(self):
        t = dev_alloc(90)
        grads = [dev_alloc(700), dev_alloc(700)]
        dev_free(t)
        return grads
''',
    "torch/utils/data/dataloader.py": '''
class DataLoader:
    def __iter__(self):
        return self

    def __next__(self):
        return dev_alloc(300)
''',
    "my_project/scratch.py": '''
keep = []


def workspace():
    keep.append(dev_alloc(11))
''',
}

# size -> (count, category) with the default rules
DEFAULT = {1000: (2, "parameter"), 60: (1, "temporary"), 300: (3, "input"),
           50: (3, "unknown"), 90: (3, "temporary"), 700: (6, "gradient"),
           400: (2, "optimizer_state"), 80: (3, "temporary"), 11: (3, "unknown")}
USER_RULES = """# ours, before tidemark's
parameter  file=my_project/scratch[.]py$      # kept for good: ours
temporary  function="^Adam[.]step$"  file=/torch/optim/adam\\.py$
"""
WITH_USER = dict(DEFAULT)
WITH_USER.update({11: (3, "parameter"), 400: (2, "temporary")})


def fail(what):
    failures.append(what)
    print("FAIL: " + what)


def child_env(conf=""):
    env = dict(os.environ, TIDEMARK_LIB=os.environ["LIBTIDEMARK"], TIDEMARK_CONF=conf)
    san = sanitizer_runtime()
    if san:
        env["LD_PRELOAD"] = san
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def record(fake, out, conf=""):
    r = subprocess.run([sys.executable, CHILD, fake, out], capture_output=True, text=True,
                       env=child_env(conf), timeout=120)
    if r.returncode != 0 or not os.path.exists(out):
        fail("recording failed (exit %d): %s" % (r.returncode, r.stderr[-2000:]))
        sys.exit(1)
    return int(re.search(r"param (0x[0-9a-f]+)", r.stdout).group(1), 16)


def tidemark(*args, want_rc=0):
    r = subprocess.run([TIDEMARK] + list(args), capture_output=True, text=True, timeout=120)
    if r.returncode != want_rc:
        fail("tidemark %s: exit %d (want %d): %s" % (" ".join(args), r.returncode, want_rc,
                                                     r.stderr[-2000:]))
    return r


def categories_by_size(tdm, *extra):
    """{size: (count, category)} from the JSON export, and the whole document."""
    doc = json.loads(tidemark("export", "--format", "json", *extra, tdm, "-o", "-").stdout)
    al = doc["allocations"]
    got = {}
    for size, cat in zip(al["size"], al["category"]):
        n, c = got.get(size, (0, cat))
        if c != cat:
            fail("allocations of %d B have categories %s and %s" % (size, c, cat))
        got[size] = (n + 1, cat)
    return got, doc


def peak_table(out):
    """{category: bytes} of `tidemark categories --samples 0` output."""
    rows = {}
    unit = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
    for line in out.splitlines():
        m = re.match(r"\s+([a-z_]+)\s+([\d.]+) (B|KiB|MiB)\s", line)
        if m:
            rows[m.group(1)] = round(float(m.group(2)) * unit[m.group(3)])
    return rows


with tempfile.TemporaryDirectory() as tmp:
    fake = os.path.join(tmp, "site")
    for rel, text in FAKE.items():
        path = os.path.join(fake, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    rules = os.path.join(tmp, "rules.txt")
    with open(rules, "w") as f:
        f.write(USER_RULES)

    # the default rules, no marks anywhere
    a = os.path.join(tmp, "a.tdm")
    param = record(fake, a)
    got, doc = categories_by_size(a)
    if got != DEFAULT:
        fail("default rules: %s, want %s" % (sorted(got.items()), sorted(DEFAULT.items())))
    if doc.get("phases") not in ([], [""], None):
        fail("the child marked phases: %s" % doc.get("phases"))
    cats = tidemark("categories", "--samples", "0", a).stdout
    table = peak_table(cats)
    # the peak: inside the second backward? whatever it is, the static
    # kinds are all there and nothing the rules name is unknown
    for c in ("parameter", "gradient", "input"):
        if c not in table:
            fail("`tidemark categories` shows no %s at the peak:\n%s" % (c, cats))
    if abs(table.get("parameter", 0) - 2000) > 10:  # 1.95 KiB
        fail("parameters at the peak %s, want 2000 B:\n%s" % (table.get("parameter"), cats))
    folded = tidemark("export", "--format", "flamegraph", "--by-category", a, "-o", "-").stdout
    if not re.search(r";optimizer_state;.*Adam\.step.* 800$", folded, re.M):
        fail("flame graph --by-category: no optimizer_state 800 B under Adam.step:\n%s" % folded)

    # --rules FILE before the defaults
    got, _ = categories_by_size(a)  # unchanged without it
    out = tidemark("categories", "--rules", rules, "--explain", "Adam.step", a).stdout
    if not re.search(r"^\s+2 allocs\s+800 B\s+temporary: rule %s:3 `temporary  "
                     r"function=\"\^Adam\[\.\]step\$\"" % re.escape(rules), out, re.M):
        fail("--rules: Adam.step's state not temporary by rules.txt:3:\n%s" % out)
    out = tidemark("categories", "--rules", rules, "--samples", "0", a).stdout
    if peak_table(out).get("optimizer_state"):
        fail("--rules: optimizer_state left at the peak:\n%s" % out)
    out = tidemark("categories", "--rules", rules, "--explain", "scratch.py", a).stdout
    if not re.search(r"^\s+3 allocs\s+33 B\s+parameter: rule %s:2 " % re.escape(rules), out,
                     re.M):
        fail("--rules: scratch.py's workspace not parameter by rules.txt:2:\n%s" % out)

    # --explain with the defaults: by site and by address
    out = tidemark("categories", "--explain", "Adam.step", a).stdout
    for want in (r"^\s+2 allocs\s+800 B\s+optimizer_state: rule default rules:12 "
                 r"`optimizer_state  file=/torch/optim/` matched frame Adam\.step "
                 r"\(adam\.py:\d+\); never freed$",
                 r"^\s+3 allocs\s+240 B\s+temporary: rule default rules:12 .*; freed inside "
                 r"that call, so temporary$"):
        if not re.search(want, out, re.M):
            fail("--explain Adam.step lacks /%s/:\n%s" % (want, out))
    out = tidemark("categories", "--explain", "%#x" % param, a).stdout
    if not re.search(r"0x%x 1000 B, .*\n\s+parameter: rule default rules:\d+ `parameter .*"
                     r"matched frame Module\._apply \(module\.py:\d+\); never freed" % param, out):
        fail("--explain ADDR:\n%s" % out)
    out = tidemark("categories", "--explain", "model_forward", a).stdout
    if not re.search(r"^\s+3 allocs\s+150 B\s+unknown: phase rule: no stack rule matched and "
                     r"the snapshot has no phase or step marks", out, re.M):
        fail("--explain of what no rule names:\n%s" % out)
    r = tidemark("categories", "--explain", "no_such_function", a, want_rc=2)
    if "has no allocation with a frame matching 'no_such_function'" not in r.stderr:
        fail("--explain of nothing: %s" % r.stderr)

    # TIDEMARK_CONF=category_rules=FILE travels with the snapshot
    b = os.path.join(tmp, "b.tdm")
    record(fake, b, "category_rules=%s,dump_on=none" % rules)
    got, _ = categories_by_size(b)
    if got != WITH_USER:
        fail("category_rules=: %s, want %s" % (sorted(got.items()), sorted(WITH_USER.items())))
    # ... and is read again when the commands run: gone, said once, defaults used
    os.rename(rules, rules + ".moved")
    r = tidemark("categories", "--samples", "0", b)
    if r.stderr.count("category_rules=%s of the recording's config" % rules) != 1:
        fail("a moved rules file is not said once: %s" % r.stderr)
    if peak_table(r.stdout) != peak_table(tidemark("categories", "--samples", "0", a).stdout):
        fail("a moved rules file: not the defaults' categories:\n%s" % r.stdout)
    os.rename(rules + ".moved", rules)

    # a bad rules file: file:line, from the command line and from TIDEMARK_CONF
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w") as f:
        f.write("# fine\nparameter file=/torch/nn/\n\nparamter function=x\n")
    r = tidemark("categories", "--rules", bad, a, want_rc=2)
    if "%s:4: 'paramter' is not a category" % bad not in r.stderr:
        fail("--rules with a bad file: %s" % r.stderr)
    with open(bad, "w") as f:
        f.write("gradient function=(back\n")
    r = tidemark("categories", "--rules", bad, a, want_rc=2)
    if not re.search(r"%s:1: function='\(back' is not a regular expression" % re.escape(bad),
                     r.stderr):
        fail("--rules with a bad regex: %s" % r.stderr)
    c = os.path.join(tmp, "c.tdm")
    r = subprocess.run([sys.executable, CHILD, fake, c], capture_output=True, text=True,
                       env=child_env("category_rules=%s" % bad), timeout=120)
    lines = [l for l in r.stderr.splitlines() if "tidemark" in l]
    if r.returncode != 0 or len(lines) != 1 or "%s:1:" % bad not in lines[0] or \
            "category_rules" not in lines[0]:
        fail("TIDEMARK_CONF with a bad rules file: exit %d, %s" % (r.returncode, r.stderr))

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("ok")
