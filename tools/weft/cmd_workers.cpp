// `weft workers`: lists the workers whose discovery beacons this machine
// hears (weft/rpc/discovery.h), and whether `--discover` would use each.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "weft/core/secret_file.h"
#include "weft/rpc/discovery.h"

namespace weft::tools {
namespace {

// `weft workers`: the workers advertising on this machine's networks
// (weft worker --advertise), one line each, for discover_seconds.
struct WorkersArgs {
  double seconds = 3;
  int port = 50051;
  std::string auth_token_file;  // keep beacons signed with this token (others listed as not usable)
};

int cmd_workers(const WorkersArgs& args) {
  rpc::DiscoveryOptions d;
  d.port = static_cast<uint16_t>(args.port);
  d.listen = std::chrono::milliseconds(static_cast<int64_t>(args.seconds * 1000.0));
  if (!args.auth_token_file.empty()) d.auth_secret = read_secret_file(args.auth_token_file, "workers");
  d.keep_unusable = true;
  const std::vector<rpc::DiscoveredWorker> found = rpc::discover_workers(d);
  for (const rpc::DiscoveredWorker& w : found) {
    const bool usable = d.auth_secret ? w.signed_by_token : !w.wants_token && w.address.rfind("127.", 0) == 0;
    std::string devices;
    for (const std::string& dev : w.devices) devices += (devices.empty() ? "" : "; ") + dev;
    std::printf("%s  %s  protocol %s  %s%s  %s%s\n", w.endpoint.c_str(), w.name.c_str(), w.protocol.c_str(),
                w.wants_token ? "token required" : "no token", w.signed_by_token ? " (beacon signed with this token)" : "",
                devices.c_str(),
                usable ? "" : (d.auth_secret ? "  [not used by --discover: not signed with this token]"
                                             : "  [not used by --discover: another machine's, or wants a token]"));
  }
  std::fprintf(stderr, "%zu worker%s heard in %.1f s on UDP port %d\n", found.size(), found.size() == 1 ? "" : "s",
               args.seconds, args.port);
  return 0;
}

}  // namespace

void add_workers_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<WorkersArgs>();
  CLI::App* cmd =
      app.add_subcommand("workers", "list the workers advertising on this machine's networks (weft worker --advertise)");
  cmd->add_option("--seconds", a->seconds, "how long to listen")->capture_default_str()->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--port", a->port, "UDP port of the beacons")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--auth-token-file", a->auth_token_file, "the pool's token: which beacons it signed");
  out.push_back({cmd, [a] { return cmd_workers(*a); }});
}

}  // namespace weft::tools
