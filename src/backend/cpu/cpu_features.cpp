#include "cpu_features.h"

#include <cpuid.h>

namespace weft::cpu {
namespace {

// Clang's __builtin_cpu_supports has no "f16c"; read CPUID leaf 1 instead.
// F16C is VEX-encoded, so it also needs the OS to save YMM state, which the
// avx2 check (done by the compiler runtime with XGETBV) already covers.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  return (c & bit_F16C) != 0;
}

CpuFeatures detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = f.avx2 && has_f16c();
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace weft::cpu
