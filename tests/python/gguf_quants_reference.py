"""Reference for specd's GGUF block types: gguf-py's `gguf.quants.dequantize`
and, for the types it quantizes as ggml does, `gguf.quants.quantize`
(llama.cpp's Python package, pinned in requirements.txt), independent of
specd.

Usage:
  python gguf_quants_reference.py OUT_FILE [SEED]

Makes blocks of every type below (random bytes with finite fp16 fields, and
edge cases: zero and negative-zero scales, the largest and smallest fp16
scales and mins, every byte value in the quants, all-zero and all-one 6-bit
scales, every qh / hmask bit pattern of a counter) and writes them with
gguf-py's f32 dequantization to OUT_FILE, little-endian:
  u32 number of types, then per type:
    u8 name length, name (gguf's GGMLQuantizationType name, e.g. "Q4_K"),
    u32 block elements, u32 block bytes, u32 number of blocks,
    the blocks (n * block bytes), the f32 values (n * block elements);
  then the quantization records: u32 number of types, then per type the
  same header, the f32 inputs (n * block elements) and gguf-py's blocks
  (n * block bytes).
Quantized: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (gguf-py matches ggml's
quantize_row_*_ref for these) from random rows at several scales, constant
blocks, zero blocks, one-sided blocks and blocks with one outlier.
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Per type: byte offsets of the fp16 fields, and byte ranges [begin, end) of
# the packed sub-block scales (ggml-common.h).
LAYOUTS = {
    "Q4_0": ([0], []),
    "Q8_0": ([0], []),
    "Q4_1": ([0, 2], []),
    "Q5_0": ([0], []),
    "Q5_1": ([0, 2], []),
    "Q2_K": ([80, 82], [(0, 16)]),
    "Q3_K": ([108], [(96, 108)]),
    "Q4_K": ([0, 2], [(4, 16)]),
    "Q5_K": ([0, 2], [(4, 16)]),
    "Q6_K": ([208], [(192, 208)]),
    "IQ4_NL": ([0], []),
    "IQ4_XS": ([0], [(2, 8)]),
}

# fp16 values at the edges: zeros, the largest finite, the smallest
# subnormal and normal, negative ones, and plain values.
EDGE_HALVES = np.array([0.0, -0.0, 65504.0, -65504.0, 2.0**-24, -(2.0**-24), 2.0**-14, 1.0,
                        -1.0, 0.5, 3.0e-3, -7.5], dtype=np.float16)


def finite_halves(rng, n):
    """n random fp16 bit patterns, none Inf or NaN."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp = (bits >> 10) & 0x1F
    return np.where(exp == 0x1F, bits & np.uint16(0xBFFF), bits).astype(np.uint16)


def set_half(blocks, off, halves):
    """Writes fp16 values (float16, or their uint16 bits) at byte `off`."""
    blocks[:, off:off + 2] = np.ascontiguousarray(halves).view(np.uint8).reshape(-1, 2)


def make_blocks(rng, name, type_size):
    halves, scale_ranges = LAYOUTS[name]
    parts = []

    def with_finite_halves(b):
        for off in halves:
            set_half(b, off, finite_halves(rng, b.shape[0]))
        return b

    # Random blocks: random bytes, random finite fp16 fields.
    parts.append(with_finite_halves(rng.integers(0, 256, size=(64, type_size), dtype=np.uint8)))
    # Random blocks with realistic scales (small positive d, signed mins).
    b = rng.integers(0, 256, size=(32, type_size), dtype=np.uint8)
    for i, off in enumerate(halves):
        v = rng.uniform(1e-4, 0.05, size=b.shape[0]) * (1 if i == 0 else rng.choice([-1, 1], size=b.shape[0]))
        set_half(b, off, v.astype(np.float16))
    parts.append(b)
    # Every byte value in every position of the quants: counters with
    # shifts, and all-zero / all-one bytes.
    n = 8
    b = (np.arange(type_size, dtype=np.int64)[None, :] * np.array([1, 3, 5, 7, 11, 13, 17, 1])[:, None]
         + np.arange(n)[:, None] * 37) % 256
    b = b.astype(np.uint8)
    b = np.concatenate([b, np.zeros((1, type_size), np.uint8), np.full((1, type_size), 0xFF, np.uint8)])
    parts.append(with_finite_halves(b))
    # Edge scales: every edge value in every fp16 field, over random quants.
    for off in halves:
        b = with_finite_halves(rng.integers(0, 256, size=(len(EDGE_HALVES), type_size), dtype=np.uint8))
        set_half(b, off, EDGE_HALVES)
        parts.append(b)
    # All fp16 fields zero, and all at the extremes together.
    for v in (0.0, -0.0, 65504.0, -65504.0, 2.0**-24):
        b = rng.integers(0, 256, size=(2, type_size), dtype=np.uint8)
        for off in halves:
            set_half(b, off, np.full(2, v, dtype=np.float16))
        parts.append(b)
    # Packed 6-bit / 8-bit scales at their extremes: all zero bits, all one
    # bits, alternating bits, int8 -128 and 127 (Q6_K).
    for lo, hi in scale_ranges:
        for fill in (0x00, 0xFF, 0xAA, 0x55, 0x3F, 0xC0, 0x80, 0x7F):
            b = with_finite_halves(rng.integers(0, 256, size=(2, type_size), dtype=np.uint8))
            b[:, lo:hi] = fill
            parts.append(b)
    return np.concatenate(parts)


QUANTIZED = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]


def make_inputs(rng, block_elems):
    """f32 rows of whole blocks: (n_blocks, block_elems)."""
    parts = [rng.standard_normal((64, block_elems)) * rng.choice([1e-3, 0.02, 1.0, 300.0], size=(64, 1))]
    parts.append(np.full((2, block_elems), 0.37))
    parts.append(np.zeros((2, block_elems)))
    parts.append(np.abs(rng.standard_normal((4, block_elems))))
    parts.append(-np.abs(rng.standard_normal((4, block_elems))))
    spiky = rng.standard_normal((4, block_elems)) * 0.01
    spiky[:, 5] = [40.0, -40.0, 3.0, -1e-3]
    parts.append(spiky)
    return np.concatenate(parts).astype(np.float32)


def write_header(f, name, block_elems, type_size, n_blocks):
    f.write(struct.pack("<B", len(name)) + name.encode())
    f.write(struct.pack("<III", block_elems, type_size, n_blocks))


def main():
    out_path = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1234
    rng = np.random.default_rng(seed)
    records = []
    for name in LAYOUTS:
        qtype = GGMLQuantizationType[name]
        block_elems, type_size = GGML_QUANT_SIZES[qtype]
        blocks = make_blocks(rng, name, type_size)
        values = dequantize(blocks.reshape(-1), qtype).astype(np.float32, copy=False)
        assert values.size == blocks.shape[0] * block_elems, name
        records.append((name, block_elems, type_size, blocks, values))
    quantized = []
    for name in QUANTIZED:
        qtype = GGMLQuantizationType[name]
        block_elems, type_size = GGML_QUANT_SIZES[qtype]
        x = make_inputs(rng, block_elems)
        blocks = quantize(x, qtype).reshape(x.shape[0], type_size)
        quantized.append((name, block_elems, type_size, x, blocks))
    with open(out_path, "wb") as f:
        f.write(struct.pack("<I", len(records)))
        for name, block_elems, type_size, blocks, values in records:
            write_header(f, name, block_elems, type_size, blocks.shape[0])
            f.write(np.ascontiguousarray(blocks).tobytes())
            f.write(np.ascontiguousarray(values, dtype="<f4").tobytes())
        f.write(struct.pack("<I", len(quantized)))
        for name, block_elems, type_size, x, blocks in quantized:
            write_header(f, name, block_elems, type_size, x.shape[0])
            f.write(np.ascontiguousarray(x, dtype="<f4").tobytes())
            f.write(np.ascontiguousarray(blocks).tobytes())


if __name__ == "__main__":
    main()
