#!/usr/bin/env python3
"""The issues' bars against a table that scripts/issue_table.sh took:

    python3 scripts/bars.py OUT_DIR          # reads OUT_DIR/table.log, prints the verdicts

For each of the four main pairs and each T: the bare layer time (the CLI's "layer without the
events between stages" median), issue 8's bar (2.0x faster than our MMQ path when the issue
was filed: for Q2_0 / Q2_0 the issue's own figures, for the IQ pairs half of the MMQ path's
times at 8944841, the first measured beside c930a4c, whose PTX is the same; BENCHMARKS.md,
the last section), the time over or under it, and the pair's time over Q2_0 / Q2_0's at the
same T (issue 10: within 1.25x); then issue 10's two targets for Q2_0 / Q2_0 (0.47 ms at
T = 512, 3.2 ms at 16,384). The bars are the H200's: a table from another GPU prints them for
comparison only.
"""
import os
import re
import sys

TOKENS = [512, 2048, 8192, 16384]
# Issue 8's bars, ms at TOKENS.
BARS = {
    "q2_0 / q2_0": [1.23, 1.38, 4.07, 7.36],
    "iq2_xxs / q2_0": [2.713 / 2, 3.034 / 2, 8.894 / 2, 16.137 / 2],
    "iq3_s / iq4_nl": [2.906 / 2, 3.193 / 2, 9.367 / 2, 17.037 / 2],
    "iq2_s / iq4_nl": [3.289 / 2, 3.619 / 2, 10.578 / 2, 19.221 / 2],
}
# Issue 10's targets for Q2_0 / Q2_0, and its bound on the other pairs' ratio.
TARGETS = {512: 0.47, 16384: 3.2}
RATIO = 1.25


def parse(path):
    """{pair: {T: bare ms}} from issue_table.sh's table.log (uniform routing)."""
    out, pair, t = {}, None, None
    for line in open(path, errors="replace"):
        m = re.match(r"=== (\S+) / (\S+) uniform", line)
        if m:
            pair = f"{m.group(1)} / {m.group(2)}"
            out[pair] = {}
            continue
        m = re.match(r"T = (\d+) ", line)
        if m:
            t = int(m.group(1))
            continue
        m = re.search(r"layer without the events between stages: ([0-9.]+) ms", line)
        if m and pair is not None and t is not None:
            out[pair][t] = float(m.group(1))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    table = parse(f"{d}/table.log")
    gpu = open(f"{d}/gpu.log").read().strip() if os.path.exists(f"{d}/gpu.log") else "?"
    print(f"GPU: {gpu}" + ("" if "H200" in gpu else "  (not an H200: the bars are the H200's)"))
    q = table.get("q2_0 / q2_0", {})
    print("pair | T | bare ms | issue 8 bar | over the bar | / Q2_0 (issue 10: <= 1.25)")
    for pair, bars in BARS.items():
        for t, bar in zip(TOKENS, bars):
            ms = table.get(pair, {}).get(t)
            if ms is None:
                print(f"{pair} | {t} | missing | {bar:.3f} | | ")
                continue
            ratio = f"{ms / q[t]:.2f}" if t in q else "?"
            verdict = "met" if ms <= bar else f"+{(ms / bar - 1) * 100:.1f} %"
            if pair != "q2_0 / q2_0" and t in q:
                ratio += " met" if ms / q[t] <= RATIO else " missed"
            print(f"{pair} | {t} | {ms:.3f} | {bar:.3f} | {verdict} | {ratio}")
    for t, target in TARGETS.items():
        ms = q.get(t)
        if ms is not None:
            state = "met" if ms <= target else f"{ms / target:.2f}x the target"
            print(f"issue 10, Q2_0 / Q2_0 at T = {t}: {ms:.3f} ms against {target} ms: {state}")


if __name__ == "__main__":
    main()
