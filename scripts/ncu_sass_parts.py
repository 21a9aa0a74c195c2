#!/usr/bin/env python3
"""A kernel's SASS from ncu's source page, grouped by execution count, with its stall samples.

    ncu --kernel-name regex:NAME --launch-count 1 --section SourceCounters \\
        --page source --print-source sass --csv BIN ARGS > sass.csv
    python3 scripts/ncu_sass_parts.py sass.csv [--top N]

Instructions that run the same number of times belong to one part of the kernel: the K step's
inner loop (4 trips a step), the step's body (decode, waits, copies), the prologue and epilogue
(once a warp). For each execution count (rounded to 0.1 M) it prints how many instructions
run that often, their share of the instructions executed and of the warp-stall samples, and
their most frequent opcodes; then the whole kernel's stall reasons, and the N instructions
with the most stall samples with their three main reasons. (The fortieth session's profile of
`moe_mmq_flat_q2_0` in BENCHMARKS.md was read so.)
"""

import argparse
import collections
import csv


def load(path):
    lines = open(path, errors="replace").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"Address"'))
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    return head, [r for r in rows[1:] if len(r) == len(head)]


def opcode(sass):
    words = sass.split()
    if not words:
        return ""
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    head, rows = load(a.csv)
    ix = {k: i for i, k in enumerate(head)}

    def num(r, k):
        v = r[ix[k]].replace(",", "") if k in ix else ""
        return float(v) if v not in ("", "-") else 0.0

    execd, samp = "Instructions Executed", "Warp Stall Sampling (All Samples)"
    reasons = [k for k in head if k.startswith("stall_") and "Not Issued" not in k]
    total_e = sum(num(r, execd) for r in rows) or 1.0
    total_s = sum(num(r, samp) for r in rows) or 1.0
    parts = collections.defaultdict(lambda: [0, 0.0, 0.0, collections.Counter()])
    for r in rows:
        e = num(r, execd)
        if e == 0:
            continue
        p = parts[round(e / 1e5) / 10]
        p[0] += 1
        p[1] += e
        p[2] += num(r, samp)
        p[3][opcode(r[ix["Source"]])] += 1
    print("executions | instructions | executed | stall samples | opcodes")
    for k, (n, e, s, ops) in sorted(parts.items(), key=lambda kv: -kv[1][1]):
        if e / total_e < 0.002:
            continue
        top = ", ".join(f"{o} {c}" for o, c in ops.most_common(8))
        print(f"{k:.1f} M | {n} | {e / total_e:.1%} | {s / total_s:.1%} | {top}")
    by = {k[6:]: sum(num(r, k) for r in rows) for k in reasons}
    print("stalls:", ", ".join(f"{k} {v / total_s:.1%}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v))
    print(f"top {a.top} instructions by stall samples:")
    for r in sorted(rows, key=lambda r: -num(r, samp))[: a.top]:
        main3 = sorted(((num(r, k), k[6:]) for k in reasons), reverse=True)[:3]
        why = ", ".join(f"{k} {int(v)}" for v, k in main3 if v)
        print(f"  {r[ix['Address']][-5:]} {int(num(r, execd)):>10} {num(r, samp) / total_s:6.2%}  {r[ix['Source']].strip()[:60]:60}  {why}")


if __name__ == "__main__":
    main()
