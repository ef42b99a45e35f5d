// The defaults of `weft worker` (weft/rpc/worker.h), kept in the library so
// that a program embedding a worker gets the same ones and tests can check them.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "weft/core/error.h"
#include "weft/rpc/worker.h"

namespace weft::rpc {

size_t default_memory_budget(const Device& device) {
  return device.memory().free / 10 * 9;
}

int cpu_threads_per_device(int threads, int devices) {
  if (devices < 1 || devices > 64)
    fail(ErrorKind::invalid_input, "worker", "--devices " + std::to_string(devices) + " (1 to 64)");
  if (threads < 0) fail(ErrorKind::invalid_input, "worker", "--threads " + std::to_string(threads) + " is negative");
  const unsigned hw = std::thread::hardware_concurrency();
  const int total = threads > 0 ? threads : (hw == 0 ? 1 : static_cast<int>(hw));
  return std::max(1, total / devices);
}

std::filesystem::path default_tls_folder(const std::string& token_file) {
  if (!token_file.empty()) return std::filesystem::absolute(token_file).parent_path();
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0')
    return std::filesystem::path(xdg) / "weft";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".config" / "weft";
}

}  // namespace weft::rpc
