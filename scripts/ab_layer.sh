#!/usr/bin/env bash
# Two builds of the CLI, run alternately on one GPU, as BENCHMARKS.md compares builds: for each
# case, ROUNDS alternations of A then B, each one `prefill` run (`--reps 7 --check false`), and
# the bare layer's median (ms, "layer without the events between stages") of every run.
#
#   scripts/ab_layer.sh A_BIN B_BIN ROUNDS CASE...
#   CASE: "GATE_UP DOWN TOKENS [NAME=VALUE ...] [--FLAG VALUE ...]"  (the variables set for,
#         and the `prefill` flags given to, both builds' runs)
#
#   scripts/ab_layer.sh ./old/moe-prefill ./new/moe-prefill 3 "q2_0 q2_0 512" \
#       "iq3_s iq4_nl 8192" "q2_0 q2_0 512 MOE_MMQ_WEIGHT_L2=first" \
#       "q2_0 q2_0 512 MOE_FUSED_PREFETCH=on --path fused"
#
# Prints one line per case: its name, A's figures, B's figures. A run that fails or prints no
# bare median shows as "fail" (its output is kept in $TMPDIR).
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,15p' "$0"; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
tmp=$(mktemp -d)

bare() { # BIN GATE_UP DOWN TOKENS [NAME=VALUE ...] [--FLAG VALUE ...]
  local bin=$1 g=$2 d=$3 t=$4 out
  shift 4
  local vars=() flags=()
  while [ $# -gt 0 ] && [[ $1 != --* ]]; do vars+=("$1"); shift; done
  flags=("$@")
  out=$(mktemp "$tmp/run.XXXXXX")
  if env "${vars[@]}" "$bin" prefill --gate-up "$g" --down "$d" --tokens "$t" --reps 7 \
      --check false "${flags[@]}" >"$out" 2>&1; then
    awk '/layer without the events/ { print $7; found = 1 } END { if (!found) print "fail" }' "$out"
  else
    echo "fail"
  fi
}

for case in "$@"; do
  read -r -a f <<<"$case"
  ra=() rb=()
  for _ in $(seq "$rounds"); do
    ra+=("$(bare "$a" "${f[@]}")")
    rb+=("$(bare "$b" "${f[@]}")")
  done
  echo "$case | A: ${ra[*]} | B: ${rb[*]}"
done
echo "(run logs: $tmp)"
