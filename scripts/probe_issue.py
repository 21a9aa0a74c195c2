#!/usr/bin/env python3
"""Runs the issue-rate probes (probes/, built by scripts/build_probes.sh) on a GPU with CuPy:

    python3 scripts/probe_issue.py PTX [ITERS] [KERNEL,KERNEL...]

`probe_mma` is the flat kernels' group loop (tiles.rs `product_nt`, 8 warps as 2 x 4, each a
32 x 32 tile: `ldmatrix`, `mma.sync` m16n8k32 with the MAGIC addend, two `FFMA`s a scale step),
`probe_mma_bar` the same with a CTA barrier after each K step (as the flat kernels have),
`probe_mma_prefetch` with the next group's fragments and scales loaded between this group's
`mma`s and its `FFMA`s, `probe_mma_unrolled` with a step's 4 groups in straight-line code,
`probe_mma_ahead` with the next group's `mma`s before this group's `FFMA`s in the source (ptxas
put them after), `probe_mma_ahead2` the same with the fragments loaded two groups ahead (the
`mma`s at the top of the body), `probe_mma_half` pipelined by half a group (the `mma`s of the
next two 8-column tiles before the `FFMA`s of these two),
`probe_ffma` its scale loads and `FFMA`s alone (no `ldmatrix`, no `mma` in the loop),
`probe_imma` its loads and `mma`s alone (each sum folded by one `LOP3` instead of the `FFMA`s),
`probe_wgmma` the same 64 x 128 CTA tile as two warpgroups of `wgmma` m64n64k32 (D = A * B) into
two accumulator sets, each group's epilogue (an integer add of MAGIC, the two `FFMA`s) running
while the next group's `wgmma` does. All loop over ITERS K steps of 4 groups on operands that
stay in shared memory: no copies, no decode, no barrier - what each product form issues on its
own. Each runs at 2, 3 and 1 CTAs an SM asked (by its dynamic shared memory; the occupancy the
driver reports is printed beside), 5 timed launches of one wave, the median printed with its
spread, as scale steps (one output, 32 K values; for the two split probes the loop's nominal
steps) a millisecond, the time 25.2 G steps (the
reference layer's products at T = 16,384) would take, and warp instructions a second (from the
SASS counts in LOOP: ptxas 12.9 on the committed source).
"""
import subprocess, sys
import cupy as cp

# SASS instructions a 4-group step (ptxas 12.9 on the committed source: the rolled group loop
# 98 x 4 and the step's own 12; prefetching 108 x 4 + 8; unrolled 351; FFMAs alone 76 x 4 + 10;
# mma alone 55 x 4 + 10; wgmma 451; a group ahead 109 x 4 + 8, fragments two ahead 131 x 4 + 11
# (36 MOVs a group: the rotated sums), half a group ahead 92 x 4 + 14)
LOOP = {
    "probe_mma": 404,
    "probe_mma_bar": 404,
    "probe_mma_prefetch": 440,
    "probe_mma_unrolled": 351,
    "probe_mma_ahead": 444,
    "probe_mma_ahead2": 535,
    "probe_mma_half": 382,
    "probe_ffma": 314,
    "probe_imma": 230,
    "probe_wgmma": 451,
}
mod = cp.RawModule(path=sys.argv[1])
dev = cp.cuda.Device()
nsm = dev.attributes["MultiProcessorCount"]
print("GPU:", subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip(), "SMs", nsm)
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
for name in sys.argv[3].split(",") if len(sys.argv) > 3 else LOOP:
    k = mod.get_function(name)
    for smem, per_sm in [(113696, 2), (75000, 3), (150000, 1)]:
        k.max_dynamic_shared_size_bytes = smem
        grid = nsm * per_sm
        try:
            occ = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, 256, smem)
        except Exception as ex:  # noqa
            occ = f"? ({type(ex).__name__})"
        out = cp.zeros(grid * 256, dtype=cp.float32)
        try:
            k((grid,), (256,), (out, cp.uint32(iters)), shared_mem=smem)  # warm-up
            cp.cuda.Device().synchronize()
        except Exception as ex:
            print(name, per_sm, "failed:", ex, flush=True)
            continue
        times = []
        for _ in range(5):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            k((grid,), (256,), (out, cp.uint32(iters)), shared_mem=smem)
            e.record(); e.synchronize()
            times.append(cp.cuda.get_elapsed_time(s, e))
        times.sort()
        ms = times[2]
        steps = grid * 8192 * 4 * iters  # output-steps (one output, 32 K values)
        warp_instr = grid * 8 * LOOP[name] * iters
        print(f"{name} ctas/SM asked {per_sm} (smem {smem}, occupancy {occ}): {ms:.3f} ms (min {times[0]:.3f} max {times[-1]:.3f}), "
              f"{steps / ms / 1e9:.2f} G steps/ms, 25.2 G steps in {25.2e9 / (steps / ms):.2f} ms, "
              f"{warp_instr / (ms * 1e-3) / 1e9:.0f} G warp-instr/s", flush=True)
