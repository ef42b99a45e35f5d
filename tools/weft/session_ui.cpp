// The plan, progress and stats lines of `weft run` and `weft perplexity`.
#include "session_ui.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "weft/core/error.h"
#include "weft/rpc/discovery.h"
#include "weft/serve/chat_template.h"

namespace weft::tools {
namespace {

double mib(size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// Draws "loading weights [####    ]  52%  55.1/106.0 MiB" on a terminal,
// redrawn when the percentage changes; prints nothing elsewhere.
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO) != 0) {}
  void update(size_t done, size_t total) {
    if (!tty_ || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\rloading weights [%.*s%*s] %3d%%  %.1f/%.1f MiB", filled, "##############################",
                 kWidth - filled, "", percent, mib(done), mib(total));
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool tty_;
  int last_percent_ = -1;
};

// "0.412 ms" (three significant digits).
std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  return buf;
}

// ", predicted 0.412 ms/token + 0.105 ms link; measured: matvec 9.61 GB/s,
// round trip 0.21 ms, link 2.13 GB/s": what the probe gave for a device.
std::string prediction(const DevicePlan& d) {
  if (!d.speed.measured()) return {};
  std::string s = ", predicted " + ms(d.predicted_seconds) + "/token";
  if (d.predicted_link_seconds > 0) s += " + " + ms(d.predicted_link_seconds) + " link";
  char buf[128];
  std::snprintf(buf, sizeof buf, "; measured: matvec %.3g GB/s", 1e-9 / d.speed.seconds_per_byte);
  s += buf;
  if (d.speed.bytes_per_second > 0) {
    std::snprintf(buf, sizeof buf, ", round trip %s, link %.3g GB/s", ms(2 * d.speed.latency_seconds).c_str(),
                  d.speed.bytes_per_second * 1e-9);
    s += buf;
  }
  return s;
}

}  // namespace

SessionOptions session_options(const ModelHostArgs& args, const char* what) {
  SessionOptions o;
  o.model = args.model;
  o.name = what;
  o.split = args.split;
  o.experts_split = args.experts_split;
  if (args.placement == "memory") {  // the CLI checked the name; "speed" is the Session's default
    o.probe = false;
    if (args.split.empty()) o.placement = split_by_free_memory();
  }
  if (!args.auth_token_file.empty()) o.device_options.rpc.auth_secret = read_token_file(args.auth_token_file, what);
  o.devices = {"cpu"};
  for (const std::string& w : args.workers) o.devices.push_back(worker_device_spec(w).text);
  if (args.discover) {
    rpc::DiscoveryOptions d;
    d.port = static_cast<uint16_t>(args.discover_port);
    d.listen = std::chrono::milliseconds(static_cast<int64_t>(args.discover_seconds * 1000.0));
    d.auth_secret = o.device_options.rpc.auth_secret;
    const std::vector<rpc::DiscoveredWorker> found = rpc::discover_workers(d);
    for (const rpc::DiscoveredWorker& w : found) {
      const std::string spec = worker_device_spec(w.endpoint).text;
      if (std::find(o.devices.begin(), o.devices.end(), spec) != o.devices.end()) continue;  // named already
      o.devices.push_back(spec);
      std::fprintf(stderr, "discovered worker %s (%s, protocol %s%s)\n", w.endpoint.c_str(), w.name.c_str(),
                   w.protocol.c_str(), w.signed_by_token ? ", beacon signed with the token" : "");
    }
    if (found.empty()) {
      std::fprintf(stderr,
                   "weft: warning: --discover heard no usable worker in %.1f s on UDP port %d (workers need "
                   "--advertise%s)\n",
                   args.discover_seconds, args.discover_port,
                   d.auth_secret ? " and this token" : "; without --auth-token-file only this machine's count");
    }
  }
  for (const std::string& d : args.devices) o.devices.push_back(d);
  o.device_options.cpu_threads = args.threads;
  o.load.map_weights = !args.no_mmap;
  o.load.cache_type = dtype_from_name(args.cache_type).value_or(DType::f16);  // CLI checked the name
  o.device_options.rpc.peer_links = !args.no_peer_links;
  o.device_options.rpc.reply_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(args.worker_timeout_s * 1000.0));
  return o;
}

std::string chat_template_source(const std::string& spec, const char* what) {
  if (spec.empty()) return "";
  if (auto builtin = serve::builtin_chat_template(spec)) return *builtin;
  if (!std::filesystem::exists(spec))
    fail(ErrorKind::invalid_input, what,
         "--chat-template " + spec + " is neither a file nor a built-in template (" +
             serve::builtin_chat_template_names() + ")");
  return read_text_file(spec, what);
}

std::string read_token_file(const std::string& path, const char* what) {
  const std::string text = read_text_file(path, what);
  const size_t b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) fail(ErrorKind::invalid_input, what, path + " holds no token");
  return text.substr(b, e - b + 1);
}

int cmd_workers(const WorkersArgs& args) {
  rpc::DiscoveryOptions d;
  d.port = static_cast<uint16_t>(args.port);
  d.listen = std::chrono::milliseconds(static_cast<int64_t>(args.seconds * 1000.0));
  if (!args.auth_token_file.empty()) d.auth_secret = read_token_file(args.auth_token_file, "workers");
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

LoadPlan load_with_progress(Session& session, int64_t n_ctx) {
  if (const std::string& w = session.tokenizer().warning(); !w.empty()) std::fprintf(stderr, "weft: warning: %s\n", w.c_str());
  const LoadPlan plan = session.plan(n_ctx);
  if (plan.devices.size() > 1) {
    std::string line = "placement: " + plan.policy;
    if (plan.predicted_seconds > 0) {
      double compute = 0, links = plan.predicted_seconds + plan.predicted_overlap_seconds;
      for (const DevicePlan& d : plan.devices) compute += d.predicted_seconds;
      links -= compute;
      line += "; predicted " + ms(plan.predicted_seconds) + "/token (" + ms(compute) + " compute, " + ms(links) +
              " links" + (plan.predicted_overlap_seconds > 0 ? ", " + ms(plan.predicted_overlap_seconds) + " of it at once" : std::string()) + ")";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  size_t total = 0;
  bool expert_split = false;
  for (const DevicePlan& d : plan.devices) expert_split = expert_split || d.part.n_experts > 0;
  for (const DevicePlan& d : plan.devices) {
    total += d.part.weight_bytes;
    const std::string experts =
        expert_split ? ", " + std::to_string(d.part.n_experts) + " experts of each layer" : std::string();
    const std::string ring = plan.sliding_ring_rows > 0
                                 ? "; sliding layers " + std::to_string(plan.sliding_ring_rows) + " in a ring"
                                 : std::string();
    std::fprintf(stderr, "%s (%s): layers [%lld, %lld)%s, %s weights + %s %s KV cache (%lld positions%s), %s free%s\n",
                 d.label.c_str(), d.device_name.c_str(), static_cast<long long>(d.part.first_layer),
                 static_cast<long long>(d.part.last_layer), experts.c_str(), format_bytes(d.part.weight_bytes).c_str(),
                 format_bytes(d.part.kv_cache_bytes).c_str(), std::string(dtype_name(plan.cache_type)).c_str(),
                 static_cast<long long>(n_ctx), ring.c_str(), format_bytes(d.free_bytes).c_str(), prediction(d).c_str());
  }
  ProgressBar bar;
  const auto t0 = std::chrono::steady_clock::now();
  session.load(plan, [&bar](size_t done, size_t all) { bar.update(done, all); });  // the plan just printed
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t mapped = session.mapped_weight_bytes();
  std::fprintf(stderr, "loaded %s of weights in %.2f s (%.0f MiB/s%s%s)\n", format_bytes(total).c_str(), s,
               s > 0 ? mib(total) / s : 0.0, mapped > 0 ? "; used in place from the file: " : "",
               mapped > 0 ? format_bytes(mapped).c_str() : "");
  return plan;
}

void print_stage_times(const LoadPlan& plan, const std::vector<DeviceCompute>& before,
                       const std::vector<DeviceCompute>& after, int64_t steps) {
  if (plan.devices.size() < 2 || before.size() != plan.devices.size() || after.size() != before.size() || steps <= 0)
    return;
  for (size_t i = 0; i < before.size(); ++i) {
    const DevicePlan& d = plan.devices[i];
    std::string line = "stage " + d.label + ": ";
    if (before[i].seconds < 0 || after[i].seconds < 0) {
      line += "compute time not reported (a worker older than protocol 1.6, or another kind of device)";
    } else {
      const double per_step = (after[i].seconds - before[i].seconds) / static_cast<double>(steps);
      line += "measured " + ms(per_step) + "/token computing (" +
              std::to_string(after[i].graphs - before[i].graphs) + " graphs)";
      if (d.predicted_seconds > 0) line += ", predicted " + ms(d.predicted_seconds);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void print_device_stats(const Session& session) {
  for (const DeviceStats& d : session.stats()) {
    if (!d.remote) continue;
    const RpcStats& s = d.rpc;
    std::fprintf(stderr, "worker %s: %s sent, %s received, %llu round trips, %.3f s waiting, %llu op-support queries\n",
                 d.label.c_str(), format_bytes(s.bytes_sent).c_str(), format_bytes(s.bytes_received).c_str(),
                 static_cast<unsigned long long>(s.round_trips), s.wait_seconds,
                 static_cast<unsigned long long>(s.support_queries));
    if (!s.peer_link_failure.empty())
      std::fprintf(stderr, "worker %s: copies through this host: %s\n", d.label.c_str(), s.peer_link_failure.c_str());
  }
}

std::string read_text_file(const std::string& path, const char* what) {
  constexpr size_t kMaxBytes = size_t{1} << 30;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::invalid_input, what, "cannot open " + path + ": " + std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(ErrorKind::invalid_input, what, "cannot stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(ErrorKind::invalid_input, what, path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxBytes)
    fail(ErrorKind::invalid_input, what,
         path + " has " + format_bytes(static_cast<size_t>(st.st_size)) + ", over the limit of " +
             format_bytes(kMaxBytes));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::invalid_input, what, "cannot read " + path + ": " + std::strerror(errno));
    if (n == 0)
      fail(ErrorKind::invalid_input, what,
           path + " ended after " + std::to_string(got) + " of " + std::to_string(text.size()) + " bytes");
    got += static_cast<size_t>(n);
  }
  return text;
}

}  // namespace weft::tools
