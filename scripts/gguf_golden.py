#!/usr/bin/env python3
"""Golden dequantization hashes from the `gguf` Python package (PyPI `gguf`, 0.19.0 used here).

For each format gguf-py can dequantize (all of ours but Q2_0), generates N random valid blocks
from a splitmix64 stream (the same stream tests/tests/formats.rs regenerates in Rust), dequantizes
them with `gguf.quants.dequantize`, and stores one FNV-1a 64 hash of each block's little-endian
f32 output. The Rust test decodes the same blocks with our decoders and compares hashes block by
block, so any differing value in any block is caught and located.

    pip install gguf==0.19.0 numpy
    python3 scripts/gguf_golden.py > tests/data/dequant_golden.txt
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

N_BLOCKS = 2048
SEED = 0x5EED_601D
# (type id, gguf-py enum, block bytes)
TYPES = [(8, T.Q8_0, 34), (20, T.IQ4_NL, 18), (16, T.IQ2_XXS, 66), (17, T.IQ2_XS, 74),
         (22, T.IQ2_S, 82), (18, T.IQ3_XXS, 98), (21, T.IQ3_S, 110)]
M64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def blocks(type_id, block_bytes):
    """Block bytes: splitmix64 words, little-endian; then d = a positive normal f16 with
    exponent field 5..20 taken from the first word of the block."""
    state = SEED ^ (type_id * 0x1000193)
    out = bytearray()
    words = (block_bytes + 7) // 8
    for _ in range(N_BLOCKS):
        raw = bytearray()
        first = None
        for _ in range(words):
            state, w = splitmix64(state)
            if first is None:
                first = w
            raw += w.to_bytes(8, "little")
        raw = raw[:block_bytes]
        exp = 5 + (first >> 20) % 16
        d = (exp << 10) | ((first >> 40) & 0x3FF)
        raw[0:2] = d.to_bytes(2, "little")
        out += raw
    return bytes(out)


def fnv1a64(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & M64
    return h


def main():
    print("# golden dequantization hashes, made by scripts/gguf_golden.py with gguf-py")
    print("# seed %#x, %d blocks per type; line: type_id n_blocks hash hash ..." % (SEED, N_BLOCKS))
    for type_id, qt, bb in TYPES:
        data = np.frombuffer(blocks(type_id, bb), dtype=np.uint8)
        vals = quants.dequantize(data, qt).astype("<f4").reshape(N_BLOCKS, -1)
        hashes = ["%016x" % fnv1a64(row.tobytes()) for row in vals]
        print(type_id, N_BLOCKS, " ".join(hashes))


if __name__ == "__main__":
    sys.exit(main())
