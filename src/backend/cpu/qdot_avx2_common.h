// Helpers shared by the AVX2 quantized dot products (qdot_avx2.cpp, the
// 32-value types; qdot_avx2_k.cpp, the super-block types). For those two
// files only: everything is in an anonymous namespace, compiled into each.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "../../core/quant/blocks.h"
#include "qdot.h"

namespace weft::cpu {
namespace {

namespace wq = weft::quant;

#define WEFT_INLINE [[gnu::always_inline]] inline
#define WEFT_LAMBDA_INLINE __attribute__((always_inline))

WEFT_INLINE __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
WEFT_INLINE __m128i load16(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
WEFT_INLINE float f16(uint16_t h) {
  return _cvtsh_ss(h);
}

WEFT_INLINE float hsum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
WEFT_INLINE float hsum(__m256 v) {
  return hsum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// i32 sums of four products of unsigned bytes u and signed bytes s.
WEFT_INLINE __m256i dot_us(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// The 32 nibbles of 16 bytes as bytes: low nibbles (values 0..15), then high
// nibbles (16..31), the order of the 32-value blocks.
WEFT_INLINE __m256i nibbles(const uint8_t* p) {
  const __m128i b = load16(p);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

// Two 64-bit integers computed in scalar registers, as one vector. The
// empty asm keeps GCC from vectorizing their computation, which costs more
// than the scalar instructions it saves.
WEFT_INLINE __m128i from_u64(uint64_t lo, uint64_t hi) {
  asm("" : "+r"(lo), "+r"(hi));
  return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
}

// Decode reads every weight once, in order, faster than the hardware
// prefetcher (which stops at 4 KiB pages) requests it: the kernels ask for
// the weights this far ahead, a whole number of steps of rows_bytes (the
// rows one pass covers) so that the same place of later rows is fetched.
constexpr size_t kPrefetchBytes = 8192;
WEFT_INLINE size_t prefetch_distance(size_t rows_bytes) {
  return rows_bytes == 0 ? kPrefetchBytes : (kPrefetchBytes + rows_bytes - 1) / rows_bytes * rows_bytes;
}
// The address is formed as an integer: it may lie past the tensor (a
// prefetch never faults, but a pointer past its object is undefined).
WEFT_INLINE void prefetch(const void* from, size_t ahead, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(from) + ahead;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a + o), _MM_HINT_T0);
}

// Decode's prefetch (as the AVX-512 kernels'): 16 KiB ahead of each row's
// place into L2; past a row's end that is the rows the next tiles read.
// Into L1 a few KiB ahead, the out-of-order window alone keeps too few
// lines in flight.
constexpr size_t kDecodePrefetch = 16384;
WEFT_INLINE void prefetch_l2(const void* from, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(from) + kDecodePrefetch;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(a + o), _MM_HINT_T1);
}

// The 16 iq4 levels in each 128-bit lane, for pshufb.
WEFT_INLINE __m256i iq4_levels() {
  return _mm256_broadcastsi128_si256(load16(wq::kIq4Levels));
}

}  // namespace
}  // namespace weft::cpu
