"""tests/cli/openmetrics_check.py: checks a file against the OpenMetrics
text format's rules that `tidemark top --openmetrics` must keep (metadata
lines before their family's samples, each family once, names and label
syntax, escapes in label values, gauges in units named by the suffix,
no sample twice, "# EOF" last), and prints its samples as
"name{k=v,...} value" lines, sorted labels, for the shell test to check.
Run as: openmetrics_check.py FILE...; exit 1 naming the file and its first
broken rule.  One process checks many files (a test's readings taken in a
loop: a Python start each costs more than the reading); a test may also
import it and call samples(PATH).  Not named test_*: the shell tests run
it."""
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
VALUE = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
SAMPLE = re.compile(r"^(%s)(?:\{((?:%s=%s)(?:,%s=%s)*)\})? (\S+)$" % (NAME, LABEL, VALUE, LABEL, VALUE))
PAIR = re.compile(r"(%s)=(%s)" % (LABEL, VALUE))
TYPES = {"gauge", "counter", "stateset", "info", "histogram", "gaugehistogram", "summary",
         "unknown"}


def fail(n, why, line):
    sys.exit("line %d: %s: %r" % (n, why, line))


def samples(path):
    """The file's samples as "name{k=v,...} value" lines; SystemExit
    naming the first rule it breaks."""
    text = open(path, encoding="utf-8").read()
    if not text.endswith("# EOF\n"):
        sys.exit("does not end with '# EOF' and a newline")
    lines = text.split("\n")[:-1]
    families, current, seen, out = {}, None, set(), []
    for n, line in enumerate(lines, 1):
        if line == "# EOF":
            if n != len(lines):
                fail(n, "text after # EOF", line)
            break
        if line.startswith("#"):
            m = re.match(r"^# (TYPE|UNIT|HELP) (%s) (.*)$" % NAME, line)
            if not m:
                fail(n, "a comment that is no TYPE, UNIT or HELP line", line)
            kind, name, rest = m.groups()
            if name != current and name in families:
                fail(n, "family %s given twice" % name, line)
            fam = families.setdefault(name, {"samples": 0, "meta": set()})
            if fam["samples"]:
                fail(n, "metadata after the family's samples", line)
            if kind in fam["meta"]:
                fail(n, "%s twice for %s" % (kind, name), line)
            fam["meta"].add(kind)
            if kind == "TYPE" and rest not in TYPES:
                fail(n, "unknown type", line)
            if kind == "TYPE":
                fam["type"] = rest
            if kind == "UNIT" and not name.endswith("_" + rest):
                fail(n, "a unit the name does not end with", line)
            current = name
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(n, "not a sample line", line)
        name, labels, value = m.groups()
        if name != current or name not in families:
            fail(n, "a sample outside its family (or before its metadata)", line)
        if families[name].get("type") != "gauge":
            fail(n, "a sample of a family whose type is not gauge", line)
        try:
            float(value)
        except ValueError:
            fail(n, "a value that is no number", line)
        pairs = PAIR.findall(labels or "")
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            fail(n, "a label given twice", line)
        key = (name, tuple(sorted(pairs)))
        if key in seen:
            fail(n, "the same sample twice", line)
        seen.add(key)
        families[name]["samples"] += 1
        out.append("%s{%s} %s" % (name, ",".join("%s=%s" % (k, v[1:-1]) for k, v in sorted(pairs)),
                                  value))
    else:
        sys.exit("no # EOF line")
    for name, fam in families.items():
        if "TYPE" not in fam["meta"]:
            sys.exit("family %s has no TYPE line" % name)
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        try:
            print("\n".join(samples(arg)))
        except SystemExit as e:
            sys.exit("%s: %s" % (arg, e.code) if len(sys.argv) > 2 else e.code)
