// Reference memory model and storage decoders. The op evaluators are in
// reference_ops.cpp.
#include "conformance/reference.h"

#include <cmath>
#include <limits>
#include <string>

#include "weft/core/error.h"

namespace weft::conformance {

double decode_f16(uint16_t h) {
  const bool neg = (h & 0x8000) != 0;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);  // subnormal: mant * 2^-24
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  }
  return neg ? -v : v;
}

double decode_bf16(uint16_t h) {
  // bfloat16 is the top half of an IEEE binary32: 8 exponent bits, 7 mantissa bits.
  const bool neg = (h & 0x8000) != 0;
  const int exp = (h >> 7) & 0xFF;
  const int mant = h & 0x7F;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -133);  // mant * 2^-126 / 2^7
  } else if (exp == 255) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1.0 + mant / 128.0, exp - 127);
  }
  return neg ? -v : v;
}

namespace {

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

double decode_f32(uint32_t bits) {
  const bool neg = (bits >> 31) != 0;
  const int exp = static_cast<int>((bits >> 23) & 0xFF);
  const uint32_t mant = bits & 0x7FFFFF;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -149);
  } else if (exp == 255) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1.0 + mant / 8388608.0, exp - 127);
  }
  return neg ? -v : v;
}

[[noreturn]] void internal(const std::string& what) {
  fail(ErrorKind::internal, "reference", what);
}

// Bytes spanned by t from its first element (as a backend lays it out).
size_t span_bytes(const Tensor& t) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (t.ne[i] == 0) return 0;
  }
  const int64_t block = ref_block_size(t.type);
  const size_t unit = ref_unit_bytes(t.type);
  size_t bytes = unit;
  if (block > 1) {
    bytes += static_cast<size_t>(t.ne[0] / block - 1) * unit;
  } else {
    bytes += static_cast<size_t>(t.ne[0] - 1) * t.nb[0];
  }
  for (int i = 1; i < kMaxDims; ++i) bytes += static_cast<size_t>(t.ne[i] - 1) * t.nb[i];
  return bytes;
}

// Byte offset of the storage unit holding element (i0..i3), relative to t's
// data; block and unit are ref_block_size(t.type) and ref_unit_bytes(t.type).
size_t unit_offset(const Tensor& t, int64_t block, size_t unit, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  size_t offs =
      static_cast<size_t>(i1) * t.nb[1] + static_cast<size_t>(i2) * t.nb[2] + static_cast<size_t>(i3) * t.nb[3];
  if (block > 1) return offs + static_cast<size_t>(i0 / block) * unit;
  return offs + static_cast<size_t>(i0) * t.nb[0];
}

const Tensor& base_of(const Tensor& t, size_t* offs) {
  const Tensor* b = &t;
  size_t o = 0;
  // Walks the chain so both a root view_src (weft's convention) and an
  // immediate one would resolve.
  while (b->view_src != nullptr) {
    o += b->view_offs;
    b = b->view_src;
  }
  *offs = o;
  return *b;
}

}  // namespace

void decode_q8_0(const uint8_t* block, double out[32]) {
  const double d = decode_f16(load_u16(block));
  for (int i = 0; i < 32; ++i) out[i] = static_cast<int8_t>(block[2 + i]) * d;
}

void decode_q4_0(const uint8_t* block, double out[32]) {
  const double d = decode_f16(load_u16(block));
  for (int j = 0; j < 16; ++j) {
    const uint8_t q = block[2 + j];
    out[j] = ((q & 0x0F) - 8) * d;
    out[j + 16] = ((q >> 4) - 8) * d;
  }
}

int64_t ref_block_size(DType t) {
  const RefQuantFormat* q = ref_quant_format(t);
  return q != nullptr ? q->block_values : 1;
}

size_t ref_unit_bytes(DType t) {
  if (const RefQuantFormat* q = ref_quant_format(t)) return q->block_bytes;
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    default: break;
  }
  internal("unknown dtype " + std::to_string(static_cast<int>(t)));
}

std::vector<double> decode_tensor(const Tensor& t, const void* bytes, size_t size) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  const RefQuantFormat* quant = ref_quant_format(t.type);
  const int64_t bv = ref_block_size(t.type);
  const size_t unit = ref_unit_bytes(t.type);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.nelements()));
  std::vector<double> block(static_cast<size_t>(bv));
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) {
          const size_t offs = unit_offset(t, bv, unit, i0, i1, i2, i3);
          if (offs > size || unit > size - offs) {
            internal("element at byte " + std::to_string(offs) + " is outside " + std::to_string(size) + " bytes");
          }
          const uint8_t* u = p + offs;
          if (quant != nullptr) {
            if (i0 % bv == 0) quant->decode(u, block.data());
            out.push_back(block[static_cast<size_t>(i0 % bv)]);
            continue;
          }
          switch (t.type) {
            case DType::f32: out.push_back(decode_f32(load_u32(u))); break;
            case DType::f16: out.push_back(decode_f16(load_u16(u))); break;
            case DType::bf16: out.push_back(decode_bf16(load_u16(u))); break;
            case DType::i32: out.push_back(static_cast<int32_t>(load_u32(u))); break;
            default: internal("cannot decode dtype " + std::to_string(static_cast<int>(t.type)));
          }
        }
      }
    }
  }
  return out;
}

double& Reference::Accessor::at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
  const size_t o = offs + unit_offset(*t, block, unit, i0, i1, i2, i3);
  if (o % unit != 0) internal("element offset " + std::to_string(o) + " is not a whole storage unit");
  const size_t slot = quantized ? (o / unit) * static_cast<size_t>(block) + static_cast<size_t>(i0 % block) : o / unit;
  if (slot >= mem->size()) {
    internal("element slot " + std::to_string(slot) + " is outside its base (" + std::to_string(mem->size()) +
             " slots) in " + shape_string(*t));
  }
  return (*mem)[slot];
}

std::vector<double>& Reference::memory_of(const Tensor& base) {
  auto it = mem_.find(&base);
  if (it != mem_.end()) return it->second;
  const size_t slots = span_bytes(base) / ref_unit_bytes(base.type) * static_cast<size_t>(ref_block_size(base.type));
  return mem_.emplace(&base, std::vector<double>(slots, 0.0)).first->second;
}

Reference::Accessor Reference::access(const Tensor& t) {
  Accessor a;
  const Tensor& base = base_of(t, &a.offs);
  if (base.type != t.type) internal("view " + shape_string(t) + " changes the dtype of " + shape_string(base));
  a.mem = &memory_of(base);
  a.t = &t;
  a.block = ref_block_size(t.type);
  a.quantized = a.block > 1;
  a.unit = ref_unit_bytes(t.type);
  return a;
}

void Reference::load_leaf(const Tensor& t, const void* bytes, size_t size) {
  if (t.view_src != nullptr) internal("load_leaf of a view " + shape_string(t));
  const std::vector<double> v = decode_tensor(t, bytes, size);
  store(t, v);
}

std::vector<double> Reference::values(const Tensor& t) {
  Accessor a = access(t);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.nelements()));
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) out.push_back(a.at(i0, i1, i2, i3));
      }
    }
  }
  return out;
}

void Reference::store(const Tensor& node, const std::vector<double>& values) {
  if (values.size() != static_cast<size_t>(node.nelements())) {
    internal("stored " + std::to_string(values.size()) + " values into " + shape_string(node));
  }
  Accessor a = access(node);
  size_t k = 0;
  for (int64_t i3 = 0; i3 < node.ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < node.ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < node.ne[1]; ++i1) {
        for (int64_t i0 = 0; i0 < node.ne[0]; ++i0) a.at(i0, i1, i2, i3) = values[k++];
      }
    }
  }
}

void Reference::run(const Graph& g) {
  for (Tensor* leaf : g.leafs()) memory_of(*leaf);
  for (Tensor* node : g.nodes()) {
    if (op_is_view(node->op)) continue;  // aliases: nothing to compute
    eval(*node);
  }
}

}  // namespace weft::conformance
