// The floating-point peak of this machine: fused multiply-adds per second on
// every thread, the limit `weft bench model` reports prompt processing
// against, measured in the same run like the memory bandwidth
// (memory_bandwidth.h).
//
//   const FmaPeak peak = measure_fma_peak(n_threads);
//   std::printf("%.1f GFLOP/s (%s)\n", peak.flops_per_s * 1e-9, peak.isa);
//
// Each thread runs chains of independent f32 FMAs held in registers (no
// memory traffic), enough chains to hide the FMA latency, so the figure is
// what the FMA units can do: the ceiling of any f32 matrix product, and of
// the integer dot products of quantized weights only roughly (they use other
// instructions; docs/performance.md).
#pragma once

namespace weft::bench {

struct FmaPeak {
  double flops_per_s = 0;         // the best of the ISAs measured (an FMA counts 2 flops per lane)
  const char* isa = "avx2";       // which one: "avx2" (8 lanes) or "avx512" (16 lanes)
  double avx2_flops_per_s = 0;    // 256-bit FMAs
  double avx512_flops_per_s = 0;  // 512-bit FMAs; 0 when the CPU has no AVX-512
};

// Measures with n_threads threads (at least 1) for about 0.1 s per ISA,
// best of three runs each. AVX-512 is measured only when the CPU reports it
// (the CPU backend's own detection, cpu_features.h).
FmaPeak measure_fma_peak(int n_threads);

namespace detail {
// One thread's chains: iterations rounds of the kernel's independent FMAs;
// returns a value that depends on every one (so none is optimized away).
// The flops of one round are kFmaFlopsPerRound*.
inline constexpr double kFmaFlopsPerRoundAvx2 = 12 * 8 * 2;
inline constexpr double kFmaFlopsPerRoundAvx512 = 24 * 16 * 2;
float fma_chains_avx2(long iterations);
// Only on a CPU with AVX-512F (fma_peak_avx512.cpp is compiled for it).
float fma_chains_avx512(long iterations);
}  // namespace detail

}  // namespace weft::bench
