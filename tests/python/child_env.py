"""tests/python/child_env.py: what the Python-frames tests share: the
marked line numbers of pystacks_child.py ('# L:name'), and the sanitizer
runtime a sanitizer build's libtidemark.so needs preloaded into
/usr/bin/python3."""
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "pystacks_child.py")


def marked_lines():
    """{name: line} of the lines of pystacks_child.py marked '# L:name'."""
    lines = {}
    for n, text in enumerate(open(CHILD), 1):
        m = re.search(r"# L:(\w+)", text)
        if m:
            lines[m.group(1)] = n
    return lines


def frame_pointers_only():
    """A ThreadSanitizer build captures native stacks by frame pointers only
    (docs/stacks.md), and the walk stops at the first frame built without
    them (libffi's, the interpreter's): the native frames around Python
    ones are then not there to check."""
    san = sanitizer_runtime()
    return san is not None and "libtsan" in san


def sanitizer_runtime():
    """The ASan/TSan runtime LIBTIDEMARK links, or None."""
    out = subprocess.run(["ldd", os.environ["LIBTIDEMARK"]], capture_output=True,
                         text=True).stdout
    m = re.search(r"=>\s*(\S*lib[at]san\.so\S*)", out)
    return m.group(1) if m else None
