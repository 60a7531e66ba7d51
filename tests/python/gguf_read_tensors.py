"""Reference reader for GGUF files specd writes: gguf-py's GGUFReader (the
package pinned in requirements.txt) and gguf.quants.dequantize.

Usage:
  python gguf_read_tensors.py GGUF_FILE OUT_FILE

Writes every tensor of GGUF_FILE to OUT_FILE, little-endian: u32 number of
tensors, then per tensor: u16 name length, name, u8 type-name length, type
name (gguf's GGMLQuantizationType name, e.g. "Q4_K"), u32 number of
dimensions, u64 dimensions outermost first, and the tensor dequantized to
f32 (every element, row-major).
"""
import struct
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main():
    reader = GGUFReader(sys.argv[1])
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<I", len(reader.tensors)))
        for t in reader.tensors:
            values = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
            shape = [int(d) for d in reversed(t.shape.tolist())]
            name = t.name.encode()
            type_name = t.tensor_type.name.encode()
            f.write(struct.pack("<H", len(name)) + name)
            f.write(struct.pack("<B", len(type_name)) + type_name)
            f.write(struct.pack("<I", len(shape)))
            f.write(struct.pack("<%dQ" % len(shape), *shape))
            f.write(np.ascontiguousarray(values, dtype="<f4").tobytes())


if __name__ == "__main__":
    main()
