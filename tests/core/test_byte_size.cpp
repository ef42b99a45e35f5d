// parse_byte_size and format_byte_size (include/weft/core/byte_size.h): a
// table of spellings with their values worked out by hand (1 KiB = 1024 B),
// and of texts that must be refused with the option named.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "weft/core/byte_size.h"
#include "weft/core/error.h"

namespace weft {
namespace {

TEST(ByteSize, AcceptsTheDocumentedSpellings) {
  const struct {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"0", 0},
      {"64", 64},
      {"64B", 64},
      {"64b", 64},
      {"1k", 1024},
      {"1K", 1024},
      {"1KB", 1024},
      {"1kib", 1024},
      {"1KiB", 1024},
      {"512M", 536870912},
      {"64MiB", 67108864},
      {"64 MiB", 67108864},
      {"64mb", 67108864},
      {"1G", 1073741824},
      {"4GiB", 4294967296},
      {"4gb", 4294967296},
      {"2T", 2199023255552},
      {"1TiB", 1099511627776},
      {"1.5G", 1610612736},
      {"0.5K", 512},
      {"1.0009765625K", 1025},   // 1024 + 1 exactly
      {"0.0001K", 0},            // 0.1024 B rounds to 0
      {"0.0005K", 1},            // 0.512 B rounds to 1
      {"18446744073709551615", UINT64_MAX},
      {"16777215.999999999999T", UINT64_MAX},  // 2^64 - 1.0995 B: UINT64_MAX - 0.0995, rounded
      {" 8M ", 8388608},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(parse_byte_size("--mem", c.text), c.bytes);
  }
}

TEST(ByteSize, RefusesGarbageNamingTheOption) {
  const char* bad[] = {"",     "MiB",  "-1",    "+1",   "1e9",     "64XB", "64 MiB x", "64MiBB", "1.5",
                       "1.K",  ".5K",  "0x10",  "1,024", "64 M B", "1P",   "18446744073709551616",
                       "16777216T", "99999999999999999999999", "17179869184G", "abc"};
  for (const char* text : bad) {
    SCOPED_TRACE(text);
    try {
      parse_byte_size("--session-mem", text);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
      const std::string what = e.what();
      EXPECT_NE(what.find("[--session-mem]"), std::string::npos) << what;
      EXPECT_NE(what.find("'" + std::string(text) + "'"), std::string::npos) << what;
    }
  }
}

TEST(ByteSize, FormatsWithUnitsAndNeverShowsZeroForSomething) {
  EXPECT_EQ(format_byte_size(0), "0 B");
  EXPECT_EQ(format_byte_size(64), "64 B");
  EXPECT_EQ(format_byte_size(1023), "1023 B");
  EXPECT_EQ(format_byte_size(1024), "1 KiB");
  EXPECT_EQ(format_byte_size(1536), "1.5 KiB (1536 B)");
  EXPECT_EQ(format_byte_size(67108864), "64 MiB");
  EXPECT_EQ(format_byte_size(4294967296), "4 GiB");
  EXPECT_EQ(format_byte_size(uint64_t{3} << 40), "3 TiB");
  EXPECT_EQ(format_byte_size(UINT64_MAX), "16.0 EiB (18446744073709551615 B)");
  // What parse gives back formats to a spelling parse accepts again.
  for (const char* text : {"64MiB", "4GiB", "1KiB", "64B", "3TiB"})
    EXPECT_EQ(parse_byte_size("x", format_byte_size(parse_byte_size("x", text))), parse_byte_size("x", text));
}

}  // namespace
}  // namespace weft
