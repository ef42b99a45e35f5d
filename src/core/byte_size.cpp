// Byte sizes with units (include/weft/core/byte_size.h).
#include "weft/core/byte_size.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "weft/core/error.h"

namespace weft {
namespace {

constexpr const char* kAccepted =
    "a number of bytes, optionally with a binary unit: K, M, G, T, each optionally followed by B or iB "
    "(64MiB, 4G, 512k, 1.5GB; all units are powers of 1024)";

[[noreturn]] void refuse(std::string_view option, std::string_view text, const std::string& why) {
  std::string message = "'";
  message.append(text).append("' is not a size: ").append(why).append("; expected ").append(kAccepted);
  fail(ErrorKind::invalid_input, std::string(option), message);
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// The multiplier's power of 1024 for a unit (already lower case), or -1.
int unit_power(std::string_view unit) {
  if (unit.empty() || unit == "b") return 0;
  static constexpr std::string_view kLetters = "kmgt";
  const size_t at = kLetters.find(unit[0]);
  if (at == std::string_view::npos) return -1;
  const std::string_view rest = unit.substr(1);
  if (rest.empty() || rest == "b" || rest == "ib") return static_cast<int>(at) + 1;
  return -1;
}

}  // namespace

uint64_t parse_byte_size(std::string_view option, std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n && text[i] == ' ') ++i;
  const size_t int_begin = i;
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string_view whole = text.substr(int_begin, i - int_begin);
  std::string_view frac;
  if (i < n && text[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    frac = text.substr(frac_begin, i - frac_begin);
    if (frac.empty()) refuse(option, text, "a '.' without digits after it");
  }
  if (whole.empty()) refuse(option, text, text.empty() ? "it is empty" : "it does not start with a digit");
  while (i < n && text[i] == ' ') ++i;
  std::string unit;
  while (i < n && text[i] != ' ') unit += lower(text[i++]);
  while (i < n && text[i] == ' ') ++i;
  if (i != n) refuse(option, text, "text after the unit");
  const int power = unit_power(unit);
  if (power < 0) refuse(option, text, "unknown unit '" + unit + "'");
  if (!frac.empty() && power == 0) refuse(option, text, "a fraction of a byte (a fraction needs a unit)");

  // value = (whole + frac) * 1024^power, exactly, in 128 bits; checked
  // against UINT64_MAX after each step so nothing wraps.
  using u128 = unsigned __int128;
  const u128 limit = UINT64_MAX;
  const auto too_large = [&] { refuse(option, text, "above the largest size, 2^64 - 1 bytes"); };
  u128 integer = 0;
  for (char c : whole) {
    integer = integer * 10 + static_cast<u128>(c - '0');
    if (integer > limit) too_large();
  }
  const u128 multiplier = u128{1} << (10 * power);
  u128 value = integer * multiplier;  // integer <= 2^64 and multiplier <= 2^40: fits 128 bits
  if (value > limit) too_large();
  if (!frac.empty()) {
    // frac / 10^digits of the multiplier, rounded to the nearest byte (half
    // up). The first 19 digits count (10^19 * 2^40 fits 128 bits); later
    // ones are below 2^40 / 10^19 of a byte.
    const size_t digits = std::min<size_t>(frac.size(), 19);
    u128 numerator = 0, denominator = 1;
    for (size_t d = 0; d < digits; ++d) {
      numerator = numerator * 10 + static_cast<u128>(frac[d] - '0');
      denominator *= 10;
    }
    value += (numerator * multiplier + denominator / 2) / denominator;
    if (value > limit) too_large();
  }
  return static_cast<uint64_t>(value);
}

std::string format_byte_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (u < 6 && bytes >> (10 * (u + 1)) != 0) ++u;  // the largest unit not above bytes
  char buf[64];
  const uint64_t unit = uint64_t{1} << (10 * u);
  if (bytes % unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(bytes / unit), kUnits[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s (%llu B)", static_cast<double>(bytes) / static_cast<double>(unit),
                  kUnits[u], static_cast<unsigned long long>(bytes));
  }
  return buf;
}

}  // namespace weft
