#!/usr/bin/env python3
"""Writes make_gguf.py's metadata and tensors as a split model the way
llama-gguf-split lays one out, independently of weft's C++ writer, for
test_gguf_split.cpp to read back.

Usage: make_split_gguf.py PREFIX

Writes PREFIX-00001-of-00003.gguf, PREFIX-00002-of-00003.gguf and
PREFIX-00003-of-00003.gguf:
  part 1: all of make_gguf.py's metadata (general.alignment 64 included),
          then split.no u16 0, split.count u16 3, split.tensors.count i32 4;
          tensors a.f32 and b.f16, data aligned to 64
  part 2: split.no u16 1, split.count u16 3, split.tensors.count i32 4;
          tensor c.q8_0, data aligned to the default 32
  part 3: split.no u16 2, ...; tensor d.i32
Names: PREFIX-%05d-of-%05d.gguf with the 1-based part number
(llama_split_path); keys and types as gguf-split.cpp sets them.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_gguf as g  # noqa: E402

PARTS = [["a.f32", "b.f16"], ["c.q8_0"], ["d.i32"]]


def pad(n, align):
    return (align - n % align) % align


def write_part(path, metadata, tensors, align):
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, v in metadata:
        out += g.gguf_string(key) + struct.pack("<I", vtype) + g.value(vtype, v)
    data = bytearray()
    for name, dims, dtype, raw in tensors:
        data += b"\0" * pad(len(data), align)
        out += g.gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", dtype, len(data))
        data += raw
    out += b"\0" * pad(len(out), align)
    out += data
    with open(path, "wb") as f:
        f.write(out)


def main():
    prefix = sys.argv[1]
    by_name = {t[0]: t for t in g.TENSORS}
    count = len(PARTS)
    for no, names in enumerate(PARTS):
        split_keys = [("split.no", g.U16, no), ("split.count", g.U16, count),
                      ("split.tensors.count", g.I32, len(g.TENSORS))]
        metadata = (g.METADATA if no == 0 else []) + split_keys
        align = g.ALIGN if no == 0 else 32
        path = "%s-%05d-of-%05d.gguf" % (prefix, no + 1, count)
        write_part(path, metadata, [by_name[n] for n in names], align)


if __name__ == "__main__":
    main()
