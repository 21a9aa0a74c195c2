#!/usr/bin/env bash
# The table of the four main pairs that BENCHMARKS.md records for the layer's targets: the CLI's
# default path at T = 512 / 2,048 / 8,192 / 16,384, uniform routing, with the floors of the
# H200's ceilings (MOE_CEILINGS=h200 where the GPU is an H200, else the ceilings measured on the
# GPU itself), then Q2_0 / Q2_0 and IQ2_S / IQ4_NL under skewed routing at 512 and 16,384.
#
#   scripts/issue_table.sh BIN OUT_DIR [EXTRA_PREFILL_FLAGS...]
#
# Writes OUT_DIR/gpu.log (name, driver, clocks), OUT_DIR/table.log and OUT_DIR/skewed.log (the
# CLI's whole output for each pair), and OUT_DIR/bars.txt: the issues' bars against the table
# (scripts/bars.py, where python3 is there).
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,10p' "$0"; exit 2; }
bin=$1 out=$2
shift 2
extra=("$@")
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$out/gpu.log"
if grep -q H200 "$out/gpu.log"; then export MOE_CEILINGS=h200; fi
for p in "q2_0 q2_0" "iq2_xxs q2_0" "iq3_s iq4_nl" "iq2_s iq4_nl"; do
  read -r g d <<< "$p"
  echo "=== $g / $d uniform" >> "$out/table.log"
  timeout 90 "$bin" prefill --gate-up "$g" --down "$d" --tokens 512 2048 8192 16384 --reps 5 \
    --check false "${extra[@]}" >> "$out/table.log" 2>&1 || echo "=== exit $?" >> "$out/table.log"
done
for p in "q2_0 q2_0" "iq2_s iq4_nl"; do
  read -r g d <<< "$p"
  echo "=== $g / $d skewed" >> "$out/skewed.log"
  timeout 60 "$bin" prefill --routing skewed --gate-up "$g" --down "$d" --tokens 512 16384 \
    --reps 10 --check false "${extra[@]}" >> "$out/skewed.log" 2>&1 || echo "=== exit $?" >> "$out/skewed.log"
done
if command -v python3 > /dev/null; then
  python3 "$(dirname "$0")/bars.py" "$out" > "$out/bars.txt" 2>&1
fi
