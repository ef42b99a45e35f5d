// new_file_mode: see file_mode.h.
#include "file_mode.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

namespace weft::detail {
namespace {

// umask(2) can only be read by setting it; done once here, during static
// initialisation, before any thread of the program runs.
mode_t umask_at_start() {
  const mode_t old = ::umask(0);
  ::umask(old);
  return old;
}
const mode_t g_umask_at_start = umask_at_start();

}  // namespace

std::optional<mode_t> umask_from_status(std::string_view status) {
  constexpr std::string_view kKey = "Umask:";
  size_t at = 0;
  while (at < status.size()) {
    const size_t end = std::min(status.find('\n', at), status.size());
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty() || line.size() > 4) return std::nullopt;
    mode_t mask = 0;
    for (const char c : line) {
      if (c < '0' || c > '7') return std::nullopt;
      mask = mask * 8 + static_cast<mode_t>(c - '0');
    }
    if (mask > 0777) return std::nullopt;
    return mask;
  }
  return std::nullopt;
}

mode_t new_file_mode() {
  std::ifstream in("/proc/self/status");
  std::ostringstream text;
  if (in) text << in.rdbuf();
  const mode_t mask = umask_from_status(text.str()).value_or(g_umask_at_start);
  return static_cast<mode_t>(0666 & ~mask);
}

}  // namespace weft::detail
