#!/usr/bin/env bash
# "Did you mean": an unknown command or option is named with the closest
# known one (within 2 edits, format/common.h's tdm__did_you_mean) in the
# one line that refuses it, exit 1; an abbreviation of several options is
# called ambiguous and they are listed; a word far from all is refused as
# before, without a guess.
. "${BASH_SOURCE[0]%/*}/lib.sh" TIDEMARK

# first line of stderr is exactly $1
first() {
  [ "$(head -n 1 "$work/err")" = "$1" ] || fail "stderr does not start '$1': $(head -c 400 "$work/err")"
}

# ---- commands ---------------------------------------------------------------------------
expect 1 "a misspelt command" -- "$TIDEMARK" summry x.tdm
first "tidemark: unknown command 'summry' (did you mean 'summary'?)"
expect 1 "another" -- "$TIDEMARK" veiw x.tdm
first "tidemark: unknown command 'veiw' (did you mean 'view'?)"
expect 1 "help of a misspelt command" -- "$TIDEMARK" help categores
first "tidemark: unknown command 'categores' (did you mean 'categories'?)"
# The start of one command's name: that command (options take unique
# prefixes, so users try them for commands too); of several: none.
expect 1 "an abbreviated command" -- "$TIDEMARK" sum x.tdm
first "tidemark: unknown command 'sum' (did you mean 'summary'?)"
expect 1 "an abbreviation of one command" -- "$TIDEMARK" cat x.tdm
first "tidemark: unknown command 'cat' (did you mean 'categories'?)"
expect 1 "a short option with '='" -- "$TIDEMARK" summary -v=1 x.tdm
first "tidemark summary: unknown option '-=' in '-v=1'"
expect 1 "an unknown short option among others" -- "$TIDEMARK" summary -vx x.tdm
first "tidemark summary: unknown option '-x' in '-vx'"
expect 1 "an unknown short option alone" -- "$TIDEMARK" summary -x x.tdm
first "tidemark summary: unknown option '-x'"
expect 1 "a command far from all" -- "$TIDEMARK" frobnicate
first "tidemark: unknown command 'frobnicate'"
expect 1 "a misspelt global option" -- "$TIDEMARK" --verison
first "tidemark: unknown option '--verison' (did you mean '--version'?)"

# ---- options of the other commands --------------------------------------------------------------
expect 1 "diff --topp" -- "$TIDEMARK" diff --topp 3 a.tdm b.tdm
first "tidemark diff: unknown option '--topp' (did you mean '--top'?)"
expect 1 "diff --frmaes=2" -- "$TIDEMARK" diff --frmaes=2 a.tdm b.tdm
first "tidemark diff: unknown option '--frmaes' (did you mean '--frames'?)"
expect 1 "summary --topp" -- "$TIDEMARK" summary --topp 3 x.tdm
first "tidemark summary: unknown option '--topp' (did you mean '--top'?)"
expect 1 "gate --max-peek" -- "$TIDEMARK" gate --max-peek 1GiB x.tdm
first "tidemark gate: unknown option '--max-peek' (did you mean '--max-peak'?)"
expect 1 "run --max-peek" -- "$TIDEMARK" run --max-peek 1GiB -- true
first "tidemark run: unknown option '--max-peek' (did you mean '--max-peak'?)"
expect 1 "run --allow-emtpy" -- "$TIDEMARK" run --allow-emtpy -- true
first "tidemark run: unknown option '--allow-emtpy' (did you mean '--allow-empty'?)"
expect 1 "view --rnaks" -- "$TIDEMARK" view --rnaks x.tdm
first "tidemark view: unknown option '--rnaks' (did you mean '--ranks'?)"
expect 1 "view --forse" -- "$TIDEMARK" view --forse x.tdm
first "tidemark view: unknown option '--forse' (did you mean '--force'?)"
expect 1 "categories --sampels" -- "$TIDEMARK" categories --sampels 3 x.tdm
first "tidemark categories: unknown option '--sampels' (did you mean '--samples'?)"
expect 1 "categories --frobnicate" -- "$TIDEMARK" categories --frobnicate x.tdm
first "tidemark categories: unknown option '--frobnicate'"
expect 1 "categories --s, ambiguous" -- "$TIDEMARK" categories --s 3 x.tdm
first "tidemark categories: option '--s' is ambiguous (--score, --samples)"

# ---- options of export and import (export's formats add their own) ------------------------------
expect 1 "export --fromat" -- "$TIDEMARK" export --fromat json x.tdm
first "tidemark export: unknown option '--fromat' (did you mean '--format'?)"
expect 1 "export --outptu=x" -- "$TIDEMARK" export --format json --outptu=x x.tdm
first "tidemark export: unknown option '--outptu' (did you mean '--output'?)"
expect 1 "export, a format's option misspelt" -- "$TIDEMARK" export --format perfetto --megre t.json x.tdm
first "tidemark export: unknown option '--megre' (did you mean '--merge'?)"
# The start of one option's name is that option, in export as in every
# command (getopt_long's abbreviations): the missing snapshot is the news.
expect 2 "export, a format's option abbreviated" -- "$TIDEMARK" export --format perfetto --merg t.json x.tdm
first "tidemark export: x.tdm: No such file or directory"
expect 1 "import --outpt" -- "$TIDEMARK" import --outpt x.tdm y.pickle
first "tidemark import: unknown option '--outpt' (did you mean '--output'?)"
expect 1 "import --foo" -- "$TIDEMARK" import --frobnicate y.pickle
first "tidemark import: unknown option '--frobnicate'"

finish "did you mean"
