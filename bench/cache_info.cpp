#include "cache_info.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>

namespace weft::bench {
namespace {

// "260M", "48K", "1024" as in /sys/devices/system/cpu/cpu0/cache/index*/size.
size_t parse_size(const std::string& text) {
  size_t i = 0, value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0)
    value = value * 10 + static_cast<size_t>(text[i++] - '0');
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) value <<= 10;
  if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) value <<= 20;
  if (i < text.size() && (text[i] == 'G' || text[i] == 'g')) value <<= 30;
  return value;
}

}  // namespace

size_t last_level_cache_bytes() {
  size_t best = 0;
  for (int index = 0; index < 16; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text)) continue;
    best = std::max(best, parse_size(text));
  }
  if (best == 0) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    best = static_cast<size_t>(std::max({l3, l2, 0L}));
  }
  return best > 0 ? best : size_t{32} << 20;
}

size_t level2_cache_bytes() {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_in(dir + "level"), type_in(dir + "type"), size_in(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_in >> level) || !(type_in >> type) || !(size_in >> size)) continue;
    if (level == 2 && type != "Instruction" && parse_size(size) > 0) return parse_size(size);
  }
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<size_t>(l2) : size_t{1} << 20;
}

size_t beyond_cache_bytes(size_t floor, double factor) {
  const auto scaled = static_cast<size_t>(factor * static_cast<double>(last_level_cache_bytes()));
  return std::max(floor, scaled);
}

}  // namespace weft::bench
