// weft::cpu_simd_level() (weft/backend/cpu.h): the kernel levels the CPU
// backend chose, asked of the same selectors the kernels use, so the answer
// includes the WEFT_CPU_SIMD override and the fallbacks.
#include <cstring>
#include <string>

#include "qdot.h"
#include "simd.h"
#include "weft/backend/cpu.h"

namespace weft {

std::string cpu_simd_level() {
  // The float kernels (f32, f16, bf16): "avx2" or "avx512".
  const std::string level = cpu::dot_kernels().name;
  if (level != "avx512") return level;
  // The quantized kernels follow the float level, but the AVX-512 table also
  // needs VNNI; without it they run at the AVX2 level. The pointer tells
  // which table quant_dot() really serves.
  const cpu::QuantDot* chosen = cpu::quant_dot(DType::q8_0);
  const cpu::QuantDot* avx512 = cpu::quant_dot_for(cpu::Level::avx512, DType::q8_0);
  return avx512 != nullptr && chosen == avx512 ? "avx512-vnni" : "avx512 (quantized: avx2)";
}

}  // namespace weft
