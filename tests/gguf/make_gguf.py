#!/usr/bin/env python3
"""Writes a small GGUF v3 file from the format in FACTS.md ("GGUF v3"),
independently of weft's C++ writer, for test_gguf.cpp to read back.

Usage: make_gguf.py OUT.gguf

Contents (test_gguf.cpp hard-codes the same values):
  metadata, in this order:
    general.architecture  string  "llama"
    general.alignment     u32     64
    test.u8 u8 200, test.i8 i8 -5, test.u16 u16 60000, test.i16 i16 -1234,
    test.u32 u32 4000000000, test.i32 i32 -123456, test.f32 f32 1.5,
    test.bool bool true, test.u64 u64 2**40 + 3, test.i64 i64 -(2**40),
    test.f64 f64 2.25,
    tokenizer.ggml.tokens array<string> ["<s>", "hello", "w\u00f6rld"]
    test.scores           array<f32> [0.0, -1.5, 2.25, 3.0]
    test.ids              array<i32> [-1, 0, 7]
  tensors:
    a.f32   f32  dims [4, 3]  value i = i * 0.5
    b.f16   f16  dims [8]     value i = i * 0.25 - 1
    c.q8_0  q8_0 dims [64, 1] block 0: d = 0.5, q[j] = j - 16;
                              block 1: d = 0.25, q[j] = 15 - j
    d.i32   i32  dims [5]     value i = i * 7 - 10
"""
import struct
import sys

ALIGN = 64

# GGUF value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
              F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# GGUF tensor dtype ids.
T_F32, T_F16, T_Q8_0, T_I32 = 0, 1, 8, 26


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return gguf_string(v)
    if vtype == ARRAY:
        elem_type, items = v
        return struct.pack("<IQ", elem_type, len(items)) + b"".join(value(elem_type, x) for x in items)
    return struct.pack(SCALAR_FMT[vtype], v)


METADATA = [
    ("general.architecture", STRING, "llama"),
    ("general.alignment", U32, ALIGN),
    ("test.u8", U8, 200),
    ("test.i8", I8, -5),
    ("test.u16", U16, 60000),
    ("test.i16", I16, -1234),
    ("test.u32", U32, 4000000000),
    ("test.i32", I32, -123456),
    ("test.f32", F32, 1.5),
    ("test.bool", BOOL, True),
    ("test.u64", U64, 2**40 + 3),
    ("test.i64", I64, -(2**40)),
    ("test.f64", F64, 2.25),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "hello", "w\u00f6rld"])),
    ("test.scores", ARRAY, (F32, [0.0, -1.5, 2.25, 3.0])),
    ("test.ids", ARRAY, (I32, [-1, 0, 7])),
]


def q8_0_block(d, qs):
    return struct.pack("<e", d) + struct.pack("<32b", *qs)


TENSORS = [
    ("a.f32", [4, 3], T_F32, struct.pack("<12f", *[i * 0.5 for i in range(12)])),
    ("b.f16", [8], T_F16, struct.pack("<8e", *[i * 0.25 - 1 for i in range(8)])),
    ("c.q8_0", [64, 1], T_Q8_0,
     q8_0_block(0.5, [j - 16 for j in range(32)]) + q8_0_block(0.25, [15 - j for j in range(32)])),
    ("d.i32", [5], T_I32, struct.pack("<5i", *[i * 7 - 10 for i in range(5)])),
]


def pad_to(n):
    return (ALIGN - n % ALIGN) % ALIGN


def main():
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(TENSORS), len(METADATA))
    for key, vtype, v in METADATA:
        out += gguf_string(key) + struct.pack("<I", vtype) + value(vtype, v)
    data = bytearray()
    for name, dims, dtype, raw in TENSORS:
        data += b"\0" * pad_to(len(data))
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", dtype, len(data))
        data += raw
    out += b"\0" * pad_to(len(out))
    out += data
    with open(sys.argv[1], "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
