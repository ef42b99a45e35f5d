// Copies: cpy (converting, between shapes of equal element count) and cont
// (a packed copy).
#include <algorithm>
#include <cstring>

#include "kernels.h"
#include "row_f32.h"
#include "scratch.h"

namespace weft::cpu {
namespace {

float load_f32(DType t, const uint8_t* p) {
  switch (t) {
    case DType::f32: return *reinterpret_cast<const float*>(p);
    case DType::f16: return f16_to_f32(*reinterpret_cast<const uint16_t*>(p));
    case DType::bf16: return bf16_to_f32(*reinterpret_cast<const uint16_t*>(p));
    case DType::i32: return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
    default: break;  // quantized elements are not addressable
  }
  return 0.0f;
}

void store_f32(DType t, uint8_t* p, float v) {
  switch (t) {
    case DType::f32: *reinterpret_cast<float*>(p) = v; return;
    case DType::f16: *reinterpret_cast<uint16_t*>(p) = f32_to_f16(v); return;
    case DType::bf16: *reinterpret_cast<uint16_t*>(p) = f32_to_bf16(v); return;
    case DType::i32: from_f32(DType::i32, &v, p, 1); return;  // saturating, as a packed row
    default: return;                                          // quantized: cpy into these is by whole rows
  }
}

// n elements from s (spaced ss bytes) to d (spaced ds bytes), converting st
// to dt. Neither may be quantized. Same dtypes copy bits unchanged; packed
// runs from or to f32 convert directly (row_f32.h: the vector kernels for
// f16 and bf16); other conversions go through f32 in chunks, gathered and
// scattered element by element where a side is strided.
void copy_run(DType st, const uint8_t* s, size_t ss, DType dt, uint8_t* d, size_t ds, int64_t n) {
  const size_t su = traits(st).unit_bytes, du = traits(dt).unit_bytes;
  const bool s_packed = ss == su, d_packed = ds == du;
  if (st == dt) {
    if (s_packed && d_packed) {
      std::memmove(d, s, static_cast<size_t>(n) * su);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memmove(d + i * ds, s + i * ss, su);
    }
  } else if (s_packed && d_packed && st == DType::f32) {
    from_f32_row(dt, reinterpret_cast<const float*>(s), d, n);
  } else if (s_packed && d_packed && dt == DType::f32) {
    to_f32_row(st, s, reinterpret_cast<float*>(d), n);
  } else {
    constexpr int64_t kChunk = 256;
    float buf[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      const uint8_t* sp = s + i * ss;
      uint8_t* dp = d + i * ds;
      if (s_packed) {
        to_f32_row(st, sp, buf, m);
      } else {
        for (int64_t j = 0; j < m; ++j) buf[j] = load_f32(st, sp + j * ss);
      }
      if (d_packed) {
        from_f32_row(dt, buf, dp, m);
      } else {
        for (int64_t j = 0; j < m; ++j) store_f32(dt, dp + j * ds, buf[j]);
      }
    }
  }
}

// Row i1, i2, i3 of t, with row = (i3 * ne2 + i2) * ne1 + i1.
uint8_t* nth_row(const Tensor& t, int64_t row) {
  const int64_t i1 = row % t.ne[1];
  const int64_t i2 = (row / t.ne[1]) % t.ne[2];
  const int64_t i3 = row / (t.ne[1] * t.ne[2]);
  return row_ptr(t, i1, i2, i3);
}

// Quantizes whole rows of a (same shape as dst) into dst.
void copy_quantize(const KernelContext& kc, const Tensor& a, Tensor& dst) {
  const int64_t k = a.ne[0];
  AlignedScratch scratch(kc, dst);
  const bool direct = a.type == DType::f32 && a.nb[0] == sizeof(float);
  float* buf = direct ? nullptr : scratch.take<float>(k);
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  for (int64_t row = r.begin; row < r.end; ++row) {
    const uint8_t* s = nth_row(a, row);
    const float* x = reinterpret_cast<const float*>(s);
    if (!direct) {
      copy_run(a.type, s, a.nb[0], DType::f32, reinterpret_cast<uint8_t*>(buf), sizeof(float), k);
      x = buf;
    }
    from_f32_row(dst.type, x, nth_row(dst, row), k);
  }
}

// Element e of a (flattened in ne order) goes to element e of dst. Each thread
// takes whole rows of a; a row lands in dst as runs along dst's rows.
void copy_elements(const KernelContext& kc, const Tensor& a, Tensor& dst) {
  const int64_t k = a.ne[0];
  const int64_t dk = dst.ne[0];
  if (k == 0 || dk == 0) return;
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  for (int64_t row = r.begin; row < r.end; ++row) {
    const uint8_t* s = nth_row(a, row);
    const int64_t first = row * k;  // flat index of the row's first element
    int64_t done = 0;
    while (done < k) {
      const int64_t e = first + done;
      const int64_t d0 = e % dk;
      const int64_t n = std::min(k - done, dk - d0);
      copy_run(a.type, s + done * a.nb[0], a.nb[0], dst.type, nth_row(dst, e / dk) + d0 * dst.nb[0], dst.nb[0], n);
      done += n;
    }
  }
}

// A packed copy of a quantized a: whole rows of blocks.
void copy_quantized_rows(const KernelContext& kc, const Tensor& a, Tensor& dst) {
  const size_t bytes = row_bytes(a.type, a.ne[0]);
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  for (int64_t row = r.begin; row < r.end; ++row) std::memmove(nth_row(dst, row), nth_row(a, row), bytes);
}

// Dequantizes whole packed rows of a into the packed f32 dst of its shape.
void copy_dequantize(const KernelContext& kc, const Tensor& a, Tensor& dst) {
  const Range r = split_range(a.nrows(), kc.ith, kc.nth);
  for (int64_t row = r.begin; row < r.end; ++row)
    to_f32_row(a.type, nth_row(a, row), reinterpret_cast<float*>(nth_row(dst, row)), a.ne[0]);
}

void copy_op(const KernelContext& kc, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  if (traits(a.type).quantized && dst.type == DType::f32 && dst.op == Op::cpy)
    return copy_dequantize(kc, a, dst);                                  // cpy
  if (traits(a.type).quantized) return copy_quantized_rows(kc, a, dst);  // cont
  if (traits(dst.type).quantized) return copy_quantize(kc, a, dst);      // cpy
  copy_elements(kc, a, dst);
}

// What copy_quantize takes: a packed f32 copy of a source row, unless the
// source already is one. The other paths copy straight through.
size_t copy_scratch_bytes(const Tensor& n, int) {
  const Tensor& a = *n.src[0];
  if (!traits(n.type).quantized || traits(a.type).quantized) return 0;
  if (a.type == DType::f32 && a.nb[0] == sizeof(float)) return 0;
  return kScratchAlign + scratch_piece_bytes(a.ne[0], sizeof(float));
}

// From f32, f16 or bf16 into any dtype, i32 into i32, or a quantized
// tensor's packed rows into packed f32.
bool cpy_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  if (a && traits(a->type).quantized) return n.type == DType::f32 && a->rows_contiguous() && n.is_contiguous();
  return a && (is_float_type(a->type) || (a->type == DType::i32 && n.type == DType::i32));
}

// Any dtype; a quantized source only with packed rows (copied as whole rows).
bool cont_supports(const Tensor& n) {
  const Tensor* a = n.src[0];
  return a && (!traits(a->type).quantized || a->rows_contiguous());
}

}  // namespace

const OpFamily kCpyFamily{"cpy", cpy_supports, copy_scratch_bytes, copy_op};
const OpFamily kContFamily{"cont", cont_supports, copy_scratch_bytes, copy_op};

}  // namespace weft::cpu
