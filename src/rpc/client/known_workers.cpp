// The known-workers file (known_workers.h).
#include "client/known_workers.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "transport/tls.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

// Threads of one process record one at a time (processes append whole lines).
std::mutex g_file_mu;

std::string recorded_fingerprint(const std::filesystem::path& file, const std::string& hostport) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string who, fingerprint;
    if (!(words >> who >> fingerprint) || who[0] == '#') continue;
    if (who == hostport) return normalize_fingerprint(fingerprint);
  }
  return "";
}

}  // namespace

std::filesystem::path known_workers_path(const RpcOptions& options) {
  if (!options.known_workers_file.empty()) return options.known_workers_file;
  if (const char* env = std::getenv("WEFT_KNOWN_WORKERS"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0')
    return std::filesystem::path(xdg) / "weft" / "known_workers";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".config" / "weft" / "known_workers";
}

void check_worker_fingerprint(const std::string& hostport, const std::string& pin, const std::string& presented,
                              const RpcOptions& options) {
  const std::string who = "tls://" + hostport;
  if (presented.empty()) fail(ErrorKind::invalid_input, "rpc", who + ": the worker presented no certificate");
  if (!pin.empty()) {
    if (pin != presented) {
      fail(ErrorKind::invalid_input, "rpc",
           who + ": the worker's certificate is " + presented + ", not the pinned " + pin + ": refused");
    }
    return;
  }
  const std::filesystem::path file = known_workers_path(options);
  std::lock_guard lock(g_file_mu);
  const std::string recorded = recorded_fingerprint(file, hostport);
  if (!recorded.empty()) {
    if (recorded != presented) {
      fail(ErrorKind::invalid_input, "rpc",
           who + ": the worker's certificate is " + presented + ", but " + file.string() + " has " + recorded +
               " for it: refused (if its certificate was replaced on purpose, remove that line)");
    }
    return;
  }
  if (!options.trust_on_first_use) {
    fail(ErrorKind::invalid_input, "rpc",
         who + ": no fingerprint known for this worker (it presented " + presented + "): give " + who + "#" +
             presented + " after checking it against the worker's log, or add it to " + file.string());
  }
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  std::ofstream out(file, std::ios::app);
  out << hostport << ' ' << presented << '\n';
  if (!out) fail(ErrorKind::invalid_input, "rpc", who + ": cannot record its fingerprint in " + file.string());
  std::fprintf(stderr,
               "weft: first TLS connection to %s: trusting its certificate %s (recorded in %s; compare it with the "
               "fingerprint the worker printed when it started)\n",
               who.c_str(), presented.c_str(), file.string().c_str());
}

}  // namespace weft::rpc
