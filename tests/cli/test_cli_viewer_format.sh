#!/usr/bin/env bash
# The `tidemark view` page writes shares, changes, times and sizes as the
# command line does (model/format_size.h, cmd_diff.c): its formatters
# (viewer-export/view/html/viewer.js, run under node) against a python3
# model of the C rules (python's '%.1f' rounds as glibc's printf does: the
# exact binary value, ties to even) over ties, near-ties and random values.
# Skipped (77) without node.
. "${BASH_SOURCE[0]%/*}/lib.sh" TDM_SOURCE_DIR
need_python
command -v node >/dev/null || { echo "skipped: node is needed to run the page's code"; exit 77; }

js="$TDM_SOURCE_DIR/viewer-export/view/html/viewer.js"
python3 - >"$work/cases.json" <<'EOF'
import json, random, sys
random.seed(7)
shares = [(0, 100), (1, 0), (0, 0), (5, 100000), (4, 100000), (1, 1)]
shares += [(k * 0.125, 100) for k in range(0, 400)]        # exact ties: 0.25, 0.75, ...
shares += [(k * 0.05, 100) for k in range(0, 400)]         # near ties: 0.35 is 0.34999...
shares += [(random.randint(0, 1 << 40), random.randint(1, 1 << 40)) for _ in range(2000)]
shares += [(random.randint(0, 1000), random.randint(1, 3000000)) for _ in range(2000)]
changes = [(100, 100), (0, 5), (100000000, 100000001), (400, 100), (100, 400), (3, 2)]
changes += [(random.randint(0, 1 << 33), random.randint(0, 1 << 33)) for _ in range(2000)]
offsets = [0, 1, 999, 1000, 144000, 999999, 1000000, 1999999999, 59999999999, 60000000000,
           3599999999999, 3600000000000, -144000, -61000000000]
offsets += [random.randint(0, 1 << 44) for _ in range(2000)]
sizes = [0, 1, 1023, 1024, 1152, 1048064, 1048575, 1048576, 1073741823]
sizes += [random.randint(0, 1 << 50) for _ in range(2000)]
sizes += [int(k * 10.24) for k in range(0, 20000, 7)]
json.dump({"shares": shares, "changes": changes, "offsets": offsets, "sizes": sizes}, sys.stdout)
EOF

node - "$js" "$work/cases.json" >"$work/js.json" <<'EOF' || fail "node could not run viewer.js's formatters"
const fs = require('fs');
const src = fs.readFileSync(process.argv[2], 'utf8');
const f = new Function(src + '\nreturn {fmtPct, fmtOffset, fmtBytes, ' +
  'fmtChange: typeof fmtChange === "function" ? fmtChange : () => "(no fmtChange)"};')();
const c = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
process.stdout.write(JSON.stringify({
  shares: c.shares.map(([p, w]) => f.fmtPct(p, w)),
  changes: c.changes.map(([a, b]) => f.fmtChange(a, b)),
  offsets: c.offsets.map(ns => f.fmtOffset(ns)),
  sizes: c.sizes.map(b => f.fmtBytes(b)),
}));
EOF

python3 - "$work/cases.json" "$work/js.json" <<'EOF' || fail "the page writes numbers otherwise than the command line"
import json, sys
c = json.load(open(sys.argv[1])); got = json.load(open(sys.argv[2]))

def share(part, whole):                      # tdm__fmt_share
    if whole == 0:
        return "-"
    pct = 100.0 * part / whole
    if part > 0 and pct < 0.05:
        return "<0.1%"
    return "%.1f%%" % pct

def change(a, b):                             # cmd_diff.c's pct(), without " (...)"
    if a == b:
        return ""
    if a == 0:
        return "new"
    return ("+" if b > a else "-") + share(abs(float(b) - float(a)), abs(float(a)))

def offset(ns):                               # tdm__fmt_offset
    sign = "-" if ns < 0 else "+"
    a = abs(ns); s, frac = divmod(a, 1000000000)
    if s < 1 and a != 0 and a < 1000000:
        return "%s0.%06d s" % (sign, frac // 1000)
    if s < 60:
        return "%s%d.%03d s" % (sign, s, frac // 1000000)
    if s < 3600:
        return "%s%d min %02d.%03d s" % (sign, s // 60, s % 60, frac // 1000000)
    return "%s%d h %02d min %02d s" % (sign, s // 3600, s // 60 % 60, s % 60)

UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
def size(b):                                  # tdm__fmt_bytes
    if b < 1024:
        return "%d B" % b
    v, u = float(b), 0
    while u + 1 < len(UNITS) and v >= 1023.995:
        v /= 1024.0; u += 1
    return "%.2f %s" % (v, UNITS[u])

bad = 0
for name, model, args in (("shares", share, c["shares"]), ("changes", change, c["changes"]),
                          ("offsets", offset, c["offsets"]), ("sizes", size, c["sizes"])):
    for a, js in zip(args, got[name]):
        want = model(*a) if isinstance(a, list) else model(a)
        if js != want:
            bad += 1
            if bad <= 10:
                print("  %s%r: page %r, command line %r" % (name, a, js, want))
    if len(got[name]) != len(args):
        bad += 1; print("  %s: %d results for %d cases" % (name, len(got[name]), len(args)))
sys.exit(1 if bad else 0)
EOF

finish "the page writes numbers as the command line does"
