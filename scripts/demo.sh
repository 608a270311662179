#!/usr/bin/env bash
# scripts/demo.sh TIDEMARK TRAIN_SIM OUT: the demo that `scripts/dev.sh demo`
# runs once the build is done — examples/train_sim on the sim device,
# recorded through TIDEMARK_CONF into OUT/train.tdm, exported for
# PyTorch's memory_viz, for Perfetto and as the offline HTML viewer, then
# summarized.  The previous run's files in OUT are replaced.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: scripts/demo.sh TIDEMARK TRAIN_SIM OUT" >&2; exit 2; }
tidemark=$1 train_sim=$2 out=$3
mkdir -p "$out"
rm -f "$out/train.tdm" "$out/train.pickle" "$out/train.perfetto.json" "$out/train.html"

echo "== running examples/train_sim on the sim device, recorded through TIDEMARK_CONF"
TIDEMARK_CONF="dump=$out/train.tdm" "$train_sim" --steps 5
echo
echo "== exporting: memory_viz pickle, Perfetto trace, offline HTML viewer"
"$tidemark" export --format pytorch "$out/train.tdm" -o "$out/train.pickle"
"$tidemark" export --format perfetto "$out/train.tdm" -o "$out/train.perfetto.json"
"$tidemark" view "$out/train.tdm" -o "$out/train.html"
echo
echo "== tidemark categories $out/train.tdm"
"$tidemark" categories "$out/train.tdm" | sed -n 1,20p # sed reads it all: no SIGPIPE
echo
echo "== tidemark summary $out/train.tdm"
"$tidemark" summary "$out/train.tdm"
echo
echo "demo: open $out/train.html in a browser, drop $out/train.pickle on"
echo "      pytorch.org/memory_viz, or $out/train.perfetto.json on ui.perfetto.dev"
