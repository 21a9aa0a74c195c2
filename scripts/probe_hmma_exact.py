#!/usr/bin/env python3
"""Checks whether the 16-bit-float tensor-core product is exact on MMQ's integers (probes/src/
hmma_exact.rs, built by scripts/build_probes.sh), on a GPU with CuPy:

    python3 scripts/probe_hmma_exact.py PTX [CASES]

For `mma.sync m16n8k16 .f32.f16.f16.f32` and its `.bf16` form, CASES random 16 x 16 x 8 cases
of each regime - small values (|v| <= 3: exact under any accumulation, so a mismatch there is a
fragment-layout error); weights from IQ2_XS / IQ2_S's grid magnitudes {8, 25, 43} with random
signs, or any int8; activations any int8 (q8_1's values); all at the extremes (+-127, -128);
sums that cancel large products down to a few units - each with C = 0, C = 12582912 (MAGIC) and
random integer C in +-2^20. Every D must equal C + A B exactly (all of them are integers below 2^24,
so exact in f32). Prints the mismatches per dtype and regime; exit status 1 if any.
"""
import subprocess, sys
import numpy as np
import cupy as cp

ptx = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
rng = np.random.default_rng(20261208)
mod = cp.RawModule(path=ptx)
print("GPU:", subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip())


def regime(name):
    """A (n, 16 rows, 16 K) and B (n, 8 columns, 16 K) integer operands."""
    shape_a, shape_b = (n, 16, 16), (n, 8, 16)
    if name == "small":  # exact under any accumulation: a mismatch here is a layout error
        a = rng.integers(-3, 4, shape_a)
        b = rng.integers(-3, 4, shape_b)
    elif name == "grid":
        a = rng.choice([8, 25, 43], shape_a) * rng.choice([-1, 1], shape_a)
        b = rng.integers(-127, 128, shape_b)
    elif name == "int8":
        a = rng.integers(-128, 128, shape_a)
        b = rng.integers(-128, 128, shape_b)
    elif name == "extreme":
        a = rng.choice([-128, -127, 127], shape_a)
        b = rng.choice([-128, -127, 127], shape_b)
    elif name == "cancel":
        # pairs of opposite large products, plus a few +-1 products
        a = np.tile(np.array([127, -127] * 8), (n, 16, 1))
        b = np.full(shape_b, 127)
        a[:, :, 14:] = rng.choice([-1, 0, 1], (n, 16, 2))
        b[:, :, 14:] = rng.choice([-1, 1], (n, 8, 2))
        perm = rng.permutation(16)
        a, b = a[:, :, perm], b[:, :, perm]
    else:
        raise ValueError(name)
    return a.astype(np.int64), b.astype(np.int64)


def bits(v, dtype):
    f = v.astype(np.float32)
    if dtype == "f16":
        return f.astype(np.float16).view(np.uint16)
    return (f.view(np.uint32) >> 16).astype(np.uint16)  # bf16: exact for |v| <= 256


bad_total = 0
for dtype in ["f16", "bf16"]:
    k = mod.get_function(f"probe_hmma_{dtype}")
    for name in ["small", "grid", "int8", "extreme", "cancel"]:
        a, b = regime(name)
        exact = np.einsum("trk,tnk->trn", a, b)  # (n, 16, 8)
        for cname in ["zero", "magic", "random"]:
            if cname == "zero":
                c = np.zeros((n, 16, 8), np.int64)
            elif cname == "magic":
                c = np.full((n, 16, 8), 12582912, np.int64)
            else:
                c = rng.integers(-(1 << 20), (1 << 20) + 1, (n, 16, 8))
            want = c + exact
            assert np.all(np.abs(want) < (1 << 24))
            da = cp.asarray(bits(a, dtype).reshape(-1))
            db = cp.asarray(bits(b, dtype).reshape(-1))
            dc = cp.asarray(c.astype(np.float32).reshape(-1))
            dd = cp.full(n * 128, np.nan, np.float32)  # poisoned: an unwritten D shows
            k((n,), (32,), (da, db, dc, dd))
            got = cp.asnumpy(dd).reshape(n, 16, 8).astype(np.float64)
            bad = np.nonzero(got != want)
            nbad = len(bad[0])
            bad_total += nbad
            line = f"{dtype:5} {name:8} C={cname:7} {n * 128:8} outputs  mismatches {nbad}"
            if nbad:
                i = tuple(x[0] for x in bad)
                line += f"  e.g. case {i}: want {want[i]}, got {got[i]!r}"
            print(line)
print("exact" if bad_total == 0 else f"NOT exact: {bad_total} mismatches")
sys.exit(1 if bad_total else 0)
