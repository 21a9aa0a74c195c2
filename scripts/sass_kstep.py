#!/usr/bin/env python3
"""Static instruction counts of the MMQ kernels' K loop, from a PTX module, with no GPU.

    python3 scripts/sass_kstep.py PTX [PTX2] [--kernels REGEX] [--arch sm_90] [--ops]

Assembles each PTX file with ptxas, disassembles the cubin with cuobjdump (both from NVIDIA's
CUDA wheels: nvidia-cuda-nvcc-cu12 has ptxas; nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm
the other two, whose 13.x binaries read ptxas 12.9's sm_90 cubins; cuobjdump runs the nvdisasm
that sits beside it, so unpack both wheels' bin/ into one folder; set PTXAS / CUOBJDUMP or put
them on PATH) and prints, for every kernel whose name matches REGEX (default: the pipelined,
flat, narrow and resident MMQ kernels):

- `sass`: the kernel's SASS instructions;
- `kstep`: the instructions one thread issues in one trip of the K loop where every 8-column
  tile is live: the loop is the innermost one holding the most `IMMA`s; where the tile count is
  a `BRX` jump table the last case (all tiles live) is counted and the others left out; an inner
  loop holding `IMMA`s is counted 4 times (the K step's four 32-value groups);
- the `IMMA`s and FP32 instructions (`FFMA`, `FMUL`, `FADD`) of that trip, and its local loads
  (`LDL`: spills inside the loop).

With `--ops` each kernel's trip is also printed as opcode counts, most frequent first (the
opcode without its modifiers: `IMAD.MOV.U32` counts as `IMAD`), to see what a K step spends
besides its `IMMA`s and FP32 instructions.

With PTX2 each figure is printed for both files, first -> second. The trip is the
straight-line path through the loop's body, every conditional block counted (copies issued,
stage starts): an upper bound of a typical K step, good for comparing two builds of one kernel,
not for timing. The narrow kernels' tile counts are branches, not a jump table: their `kstep`
counts both the 1-tile and the 2-tile code.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_KERNELS = r"^moe_mmq_(pipe|flat|narrow|resident)"


def tool(env, name):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        sys.exit(f"{name} not found: set {env} or put it on PATH (see this script's doc)")
    return path


def sass_of(ptx, arch):
    """Kernel name -> [(address, instruction text)] of the assembled module."""
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "m.cubin")
        subprocess.run([tool("PTXAS", "ptxas"), f"-arch={arch}", ptx, "-o", cubin], check=True)
        out = subprocess.run(
            [tool("CUOBJDUMP", "cuobjdump"), "-sass", cubin],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    kernels, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            cur = kernels.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,6})\*/\s+(.*?);", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2).strip()))
    return kernels


def opcode(text):
    text = re.sub(r"^@!?U?P[T0-9]+\s+", "", text)
    return text.split()[0].split(".")[0]


def target(text):
    m = re.search(r"0x([0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def k_trip(ins):
    """The opcode counts of one all-tiles trip of the K loop, or None without one."""
    loops = []
    for a, t in ins:
        if opcode(t) == "BRA":
            tgt = target(t)
            if tgt is not None and tgt <= a:
                loops.append((tgt, a))

    def count(s, e, op):
        return sum(1 for x, t in ins if s <= x <= e and opcode(t) == op)

    cands = [(count(s, e, "IMMA"), -(e - s), s, e) for s, e in loops if count(s, e, "IMMA")]
    if not cands:
        return None
    most = max(c[0] for c in cands)
    _, _, s, e = max(c for c in cands if c[0] == most)
    body = [(x, t) for x, t in ins if s <= x <= e]
    brx = [x for x, t in body if opcode(t) == "BRX"]
    keep = lambda x: True  # noqa: E731
    if brx:
        joins = [target(t) for x, t in body if re.match(r"^BRA\s", t)]
        joins = [j for j in joins if j is not None and j > brx[0]]
        if joins:
            join = collections.Counter(joins).most_common(1)[0][0]
            last = max(
                x for x, t in body if re.match(r"^BRA\s", t) and target(t) == join and x < join
            )
            keep = lambda x: x <= brx[0] or x > last  # noqa: E731
    inner = [(a, b) for a, b in loops if s < a and b < e and count(a, b, "IMMA")]
    trip = collections.Counter()
    for x, t in body:
        if keep(x):
            trip[opcode(t)] += 4 if any(a <= x <= b for a, b in inner) else 1
    return trip


def figures(ins):
    trip = k_trip(ins)
    if trip is None:
        return (len(ins), None, None, None, None)
    fp32 = trip["FFMA"] + trip["FMUL"] + trip["FADD"]
    return (len(ins), sum(trip.values()), trip["IMMA"], fp32, trip["LDL"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptx", nargs="+", help="one PTX file, or two to compare")
    ap.add_argument("--kernels", default=DEFAULT_KERNELS, help="kernel name regex")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ops", action="store_true", help="also print each trip's opcode counts")
    args = ap.parse_args()
    if len(args.ptx) > 2:
        sys.exit("one or two PTX files")
    mods = [sass_of(p, args.arch) for p in args.ptx]
    names = sorted(k for k in mods[0] if re.search(args.kernels, k))
    print("kernel | sass | kstep | IMMA | FP32 | LDL in loop")
    for name in names:
        cols = [figures(m[name]) if name in m else None for m in mods]
        cells = []
        for i in range(5):
            vals = ["-" if c is None or c[i] is None else str(c[i]) for c in cols]
            cells.append(" -> ".join(vals))
        print(f"{name} | " + " | ".join(cells))
        if args.ops:
            for path, m in zip(args.ptx, mods):
                trip = k_trip(m[name]) if name in m else None
                if trip:
                    ops = ", ".join(f"{op} {n}" for op, n in trip.most_common())
                    print(f"  {os.path.basename(path)}: {ops}")


if __name__ == "__main__":
    main()
