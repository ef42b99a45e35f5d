// What `weft --version` reports, from the library: the version the headers
// were configured with, a commit id, and the CPU kernel level the backend
// really uses (checked against the CPU's features and the kernel tables).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/simd.h"
#include "weft/backend/cpu.h"
#include "weft/version.h"

namespace weft {
namespace {

TEST(Version, LibraryMatchesHeaders) {
  EXPECT_STREQ(version(), WEFT_VERSION_STRING);
  EXPECT_EQ(std::string(version()), std::to_string(WEFT_VERSION_MAJOR) + "." + std::to_string(WEFT_VERSION_MINOR) +
                                        "." + std::to_string(WEFT_VERSION_PATCH));
}

TEST(Version, CommitIsAnAbbreviatedHashOrUnknown) {
  const std::string commit = git_commit();
  EXPECT_TRUE(commit == "unknown" || std::regex_match(commit, std::regex("[0-9a-f]{7,40}"))) << commit;
}

TEST(Version, SimdLevelIsWhatTheKernelsUse) {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const std::string floats = cpu::dot_kernels().name;
  const std::string level = cpu_simd_level();
  if (floats == "avx2") {
    EXPECT_EQ(level, "avx2");
  } else {
    ASSERT_EQ(floats, "avx512");
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
    EXPECT_EQ(level, f.avx512vnni ? "avx512-vnni" : "avx512 (quantized: avx2)");
  }
  EXPECT_EQ(cpu_simd_level(), level);  // chosen once per process
}

}  // namespace
}  // namespace weft
