#!/usr/bin/env bash
# Builds the issue-rate probes (probes/: the flat kernel's mma.sync group loop and a wgmma form of
# it, sm_90a) into one PTX file with the nightly toolchain, as builder/ builds gpu/:
#
#   bash scripts/build_probes.sh [OUT.ptx]        # default target/probes/probe.ptx
#
# With PTXAS set (a CUDA 12.x ptxas) it also assembles the file for sm_90a and prints each
# kernel's registers and ptxas's notes (a wgmma serialized, a wait injected). Run the result with
# scripts/probe_issue.py on a GPU machine (CuPy there).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/target/probes/probe.ptx}
mkdir -p "$(dirname "$out")"
(cd "$root/probes" && python3 gen.py)
env -u RUSTFLAGS -u CARGO_TARGET_DIR rustup run nightly cargo rustc \
  --manifest-path "$root/probes/Cargo.toml" --lib --release --crate-type cdylib \
  --target nvptx64-nvidia-cuda -Zbuild-std=core --target-dir "$root/target/probes/build" \
  --config 'profile.release.lto="fat"' --config 'profile.release.codegen-units=1' \
  --config 'profile.release.panic="abort"' --config 'profile.release.opt-level=3' \
  -- --emit=asm -C linker=/bin/true -C target-cpu=sm_90a -C target-feature=+ptx80 --cfg gpu_sm80
cp "$root/target/probes/build/nvptx64-nvidia-cuda/release/deps/moe_prefill_probes.s" "$out"
echo "wrote $out"
if [ -n "${PTXAS:-}" ]; then
  "$PTXAS" -arch=sm_90a -O3 -v "$out" -o "${out%.ptx}.cubin" 2>&1 | grep -E "C75|Used|Function|stack"
fi
