// The SIMD levels of the CPU kernel tests. Each test of a kernel family runs
// once per level (a value-parameterized suite instantiated with
// WEFT_SIMD_LEVELS), and a level this machine does not run is a visible
// skip naming the level and the CPU flags it lacks, never a silently shorter
// loop: an AVX2-only CI machine reports its AVX-512 kernels as unchecked.
// AVX2 (+FMA, F16C) is the build's baseline, so the AVX2 instances, which
// compare with float64 and the scalar (generic) kernels, run on every
// machine the tests can run on.
//
// WEFT_CPU_SIMD=avx2 (the kernels' own switch, simd.h) also skips the
// AVX-512 instances: it shows on an AVX-512 machine what an AVX2-only one
// reports.
//
//   class VecRows : public weft::cpu::level_test::LevelTest {};
//   WEFT_SIMD_LEVELS(VecRows);
//   TEST_P(VecRows, Something) { const VecKernels* k = vec_kernels_for(level()); ... }
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/simd.h"

namespace weft::cpu::level_test {

inline const char* level_name(Level l) {
  return l == Level::avx2 ? "avx2" : "avx512";
}

// Why the kernels of level l are not checked on this machine, or "" when
// they are. needs_vnni: the family's AVX-512 kernels also need AVX-512 VNNI
// (the quantized dot products, qdot.h).
inline std::string why_not_run(Level l, bool needs_vnni = false) {
  const CpuFeatures& f = cpu_features();
  std::string missing;
  auto need = [&](bool have, const char* flag) {
    if (!have) missing += std::string(missing.empty() ? "" : ", ") + flag;
  };
  need(f.avx2, "avx2");
  need(f.fma, "fma");
  need(f.f16c, "f16c");
  if (l == Level::avx512) {
    need(f.avx512f, "avx512f");
    need(f.avx512bw, "avx512bw");
    need(f.avx512vl, "avx512vl");
    need(f.avx512dq, "avx512dq");
    if (needs_vnni) need(f.avx512vnni, "avx512_vnni");
  }
  const std::string level = l == Level::avx2 ? "AVX2" : needs_vnni ? "AVX-512 VNNI" : "AVX-512";
  if (!missing.empty()) return level + " kernels not checked: this CPU lacks " + missing;
  const char* force = std::getenv("WEFT_CPU_SIMD");
  if (l == Level::avx512 && force != nullptr && std::strcmp(force, "avx2") == 0)
    return level + " kernels not checked: WEFT_CPU_SIMD=avx2 limits the kernels to AVX2";
  return {};
}

inline std::string level_param_name(const ::testing::TestParamInfo<Level>& info) {
  return level_name(info.param);
}

// A suite whose tests run at one level each; SetUp skips, with the reason,
// where this machine cannot run the level.
class LevelTest : public ::testing::TestWithParam<Level> {
 protected:
  // The quantized dot product suites set this (their AVX-512 table needs VNNI).
  virtual bool needs_vnni() const { return false; }
  void SetUp() override {
    const std::string why = why_not_run(GetParam(), needs_vnni());
    if (!why.empty()) GTEST_SKIP() << why;
  }
  Level level() const { return GetParam(); }
};

}  // namespace weft::cpu::level_test

#define WEFT_SIMD_LEVELS(Suite)                                                                                    \
  INSTANTIATE_TEST_SUITE_P(Levels, Suite, ::testing::Values(::weft::cpu::Level::avx2, ::weft::cpu::Level::avx512), \
                           ::weft::cpu::level_test::level_param_name)
