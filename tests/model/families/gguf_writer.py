"""A small GGUF v3 writer for tests, written from shared/FACTS.md ("GGUF v3"),
independently of weft's C++ GGUF code.

    w = GGUFWriter()
    w.add_string("general.architecture", "llama")
    w.add_u32("llama.block_count", 2)
    w.add_array("tokenizer.ggml.tokens", STRING, ["<unk>", "<s>"])
    w.add_tensor("token_embd.weight", emb)     # numpy (vocab, n_embd): ne = [n_embd, vocab]
    w.write("model.gguf")

Contract:
  * Everything little-endian. Header: "GGUF", u32 version 3, u64 tensor count,
    u64 key/value count; then the key/values in the order added; then the tensor
    infos in the order added; then zero padding to the alignment; then the data.
  * Alignment: general.alignment (u32) when it was added, else 32. Every tensor's
    offset (relative to the data section) is a multiple of it, and so is the
    start of the data section.
  * A numpy array of shape (d_k, ..., d_1, d_0) is written with GGUF dims
    ne = [d_0, d_1, ..., d_k] (ne0 fastest), its bytes in C order. So a matrix
    W with y = W @ x is given as numpy shape (out, in) and stored as [in, out].
  * Tensor types: f32 (0) and f16 (1); values are rounded to that type. And
    mxfp4 (39) from given codes and scales (add_tensor_mxfp4): blocks of 32
    values along ne0, 17 bytes each: the E8M0 scale byte e, then 16 bytes, byte
    j holding value j's 4-bit code in its low nibble and value j + 16's in its
    high one; value = E2M1(code) * 2^(e - 127), E2M1 = 0, 0.5, 1, 1.5, 2, 3, 4,
    6 and their negatives for codes 8-15 (the OCP MX specification; ggml's
    block_mxfp4).
  * Keys and tensor names must be unique (ValueError otherwise).
  * `kv()` and `tensors()` return what a reader of the file will see: values
    rounded to their stored type (f32 keys to float32, tensors to f32/f16), as
    Python / float64 numpy values. The reference forward pass runs on those.
"""
import struct

import numpy as np

# GGUF metadata value types (FACTS.md).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
               F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# GGUF tensor types handled here.
GGML_F32, GGML_F16, GGML_MXFP4 = 0, 1, 39
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
_TENSOR_NP = {GGML_F32: np.dtype("<f4"), GGML_F16: np.dtype("<f2")}

DEFAULT_ALIGNMENT = 32


def _gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _encode_value(vtype, value):
    if vtype == STRING:
        return _gguf_string(value)
    if vtype == ARRAY:
        elem_type, items = value
        if elem_type == ARRAY:
            raise ValueError("nested arrays are not supported")
        return struct.pack("<IQ", elem_type, len(items)) + b"".join(_encode_value(elem_type, x) for x in items)
    return struct.pack(_SCALAR_FMT[vtype], value)


def _as_read(vtype, value):
    """The Python value a reader gets back for value stored as vtype."""
    if vtype == F32:
        return float(np.float32(value))
    if vtype == ARRAY:
        elem_type, items = value
        return [_as_read(elem_type, x) for x in items]
    if vtype == BOOL:
        return bool(value)
    return value


class GGUFWriter:
    def __init__(self):
        self._kv = {}        # key -> (vtype, value); dicts keep insertion order
        self._tensors = {}   # name -> (ggml type, numpy array of that type)

    # ---- metadata ----
    def _add(self, key, vtype, value):
        if key in self._kv:
            raise ValueError(f"duplicate key {key}")
        self._kv[key] = (vtype, value)

    def add_u32(self, key, v): self._add(key, U32, int(v))
    def add_i32(self, key, v): self._add(key, I32, int(v))
    def add_u64(self, key, v): self._add(key, U64, int(v))
    def add_f32(self, key, v): self._add(key, F32, float(v))
    def add_bool(self, key, v): self._add(key, BOOL, bool(v))
    def add_string(self, key, v): self._add(key, STRING, str(v))

    def add_array(self, key, elem_type, items):
        conv = {STRING: str, F32: float, I32: int, U32: int, U64: int, BOOL: bool}[elem_type]
        self._add(key, ARRAY, (elem_type, [conv(x) for x in items]))

    # ---- tensors ----
    def add_tensor(self, name, array, ggml_type=GGML_F32):
        if name in self._tensors:
            raise ValueError(f"duplicate tensor {name}")
        a = np.ascontiguousarray(np.asarray(array), dtype=_TENSOR_NP[ggml_type])
        if a.ndim < 1 or a.ndim > 4:
            raise ValueError(f"{name}: {a.ndim} dims")
        self._tensors[name] = (ggml_type, a)

    def add_tensor_mxfp4(self, name, scales, codes):
        """scales: uint8 (..., n_blocks); codes: integers in [0, 16), (..., n_blocks, 32).
        The tensor's numpy shape is (..., n_blocks * 32)."""
        if name in self._tensors:
            raise ValueError(f"duplicate tensor {name}")
        scales = np.asarray(scales, dtype=np.uint8)
        codes = np.asarray(codes, dtype=np.uint8)
        if codes.shape != scales.shape + (32,) or codes.max(initial=0) > 15:
            raise ValueError(f"{name}: codes {codes.shape} must be scales {scales.shape} + (32,), each < 16")
        values = E2M1[codes] * np.exp2(scales.astype(np.float64) - 127.0)[..., None]
        values = values.reshape(scales.shape[:-1] + (scales.shape[-1] * 32,))
        packed = codes[..., :16] | (codes[..., 16:] << 4)
        raw = np.concatenate([scales[..., None], packed], axis=-1).tobytes(order="C")
        self._tensors[name] = (GGML_MXFP4, (values, raw))

    # ---- removal (for files missing something on purpose) ----
    def remove_key(self, key):
        if key not in self._kv:
            raise KeyError(f"no key {key} to drop")
        del self._kv[key]

    def remove_tensor(self, name):
        if name not in self._tensors:
            raise KeyError(f"no tensor {name} to drop")
        del self._tensors[name]

    # ---- what a reader sees ----
    def kv(self):
        return {k: _as_read(t, v) for k, (t, v) in self._kv.items()}

    def kv_types(self):
        return {k: t for k, (t, _) in self._kv.items()}

    def tensors(self):
        return {n: (a[0] if t == GGML_MXFP4 else a.astype(np.float64)) for n, (t, a) in self._tensors.items()}

    def alignment(self):
        if "general.alignment" in self._kv:
            t, v = self._kv["general.alignment"]
            if t != U32 or v <= 0:
                raise ValueError("general.alignment must be a positive u32")
            return v
        return DEFAULT_ALIGNMENT

    # ---- output ----
    def to_bytes(self):
        align = self.alignment()

        def pad(n):
            return b"\0" * ((align - n % align) % align)

        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", 3, len(self._tensors), len(self._kv))
        for key, (vtype, value) in self._kv.items():
            out += _gguf_string(key) + struct.pack("<I", vtype) + _encode_value(vtype, value)
        data = bytearray()
        for name, (ggml_type, a) in self._tensors.items():
            data += pad(len(data))
            values, raw = a if ggml_type == GGML_MXFP4 else (a, a.tobytes(order="C"))
            ne = values.shape[::-1]
            out += _gguf_string(name) + struct.pack("<I", len(ne))
            out += b"".join(struct.pack("<Q", d) for d in ne)
            out += struct.pack("<IQ", ggml_type, len(data))
            data += raw
        out += pad(len(out))
        out += data
        return bytes(out)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())
