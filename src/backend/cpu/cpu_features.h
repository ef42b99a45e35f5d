// Instruction-set extensions of the CPU we run on, detected once at run time.
// The build's baseline is AVX2 + FMA + F16C; code compiled for anything wider
// (simd_avx512.cpp) may only run when these flags say so.
#pragma once

namespace weft::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;  // the AVX-512 file is compiled with -mavx512dq
  bool avx512vnni = false;
  bool avx512bf16 = false;
};

// Detected on first call (thread-safe); the same object afterwards.
const CpuFeatures& cpu_features();

}  // namespace weft::cpu
