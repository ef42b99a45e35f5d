// ModelHost: devices, placement, plan, loading with progress, evaluation.
#include "model_host.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "layer_split.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"

namespace weft::tools {
namespace {

using Clock = std::chrono::steady_clock;

double mib(size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// "512 B", "8.0 KiB", "106.9 MiB", "21.4 GiB".
std::string human_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
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

}  // namespace

ModelHost::ModelHost(const ModelHostArgs& args, const char* what) : what_(what), args_(args) {
  file_ = GgufFile::open(args.model);
  tok_ = model::Tokenizer::from_gguf(*file_);
  if (!tok_->warning().empty()) std::fprintf(stderr, "weft: warning: %s\n", tok_->warning().c_str());
  params_ = model::LlamaParams::from_gguf(*file_);
  devices_.push_back(make_cpu_device(args.threads));
  labels_.push_back("host");
  for (const std::string& endpoint : args.workers) {
    RpcOptions options;
    options.reply_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.worker_timeout_s * 1000.0));
    auto remote = make_rpc_devices(endpoint, options);
    if (remote.empty()) fail(ErrorKind::invalid_input, what_, "worker " + endpoint + " serves no devices");
    devices_.push_back(std::move(remote[0]));
    labels_.push_back(endpoint);
  }
}

ModelHost::~ModelHost() = default;

void ModelHost::load(int64_t n_ctx) {
  if (model_) fail(ErrorKind::invalid_input, what_, "the model is loaded already");
  n_ctx_ = n_ctx;
  const size_t n = devices_.size();

  // Layers: by --split, else by free memory (equal when no device reports any).
  std::vector<double> w;
  std::vector<size_t> free_bytes(n);  // asked once: a worker's answer is a round trip
  for (size_t i = 0; i < n; ++i) free_bytes[i] = devices_[i]->memory().free;
  if (!args_.split.empty()) {
    w = parse_split(args_.split, n, what_);
  } else {
    double total = 0;
    for (size_t f : free_bytes) {
      w.push_back(static_cast<double>(f));
      total += w.back();
    }
    if (!(total > 0)) w.assign(n, 1.0);
  }
  const std::vector<int64_t> bounds = layer_bounds(w, params_.n_layer);
  // Checks every tensor the model reads before anything is planned or loaded.
  const std::vector<model::PartPlan> plan = model::LlamaModel::plan(*file_, bounds, n_ctx);

  // The plan, then a check that each device can hold its share.
  std::string too_big;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const model::PartPlan& part = plan[i];
    const size_t need = part.kv_cache_bytes > SIZE_MAX - part.weight_bytes ? SIZE_MAX  // saturate, never wrap
                                                                           : part.weight_bytes + part.kv_cache_bytes;
    total += part.weight_bytes;
    std::fprintf(stderr, "%s (%s): layers [%lld, %lld), %s weights + %s KV cache (%lld positions), %s free\n",
                 labels_[i].c_str(), devices_[i]->name().c_str(), static_cast<long long>(part.first_layer),
                 static_cast<long long>(part.last_layer), human_bytes(part.weight_bytes).c_str(),
                 human_bytes(part.kv_cache_bytes).c_str(), static_cast<long long>(n_ctx),
                 human_bytes(free_bytes[i]).c_str());
    if (free_bytes[i] > 0 && need > free_bytes[i] && too_big.empty())
      too_big = labels_[i] + " has " + human_bytes(free_bytes[i]) + " free but its share needs " + human_bytes(need) +
                " (change --split, or add workers)";
  }
  if (!too_big.empty()) fail(ErrorKind::out_of_memory, what_, too_big);

  ProgressBar bar;
  const auto t0 = Clock::now();
  const model::LoadProgress progress = [&bar](size_t done, size_t total) { bar.update(done, total); };
  if (n == 1) {
    model_ = std::make_unique<model::LlamaModel>(*file_, *devices_[0], n_ctx, progress);
    backends_.push_back(devices_[0]->create_backend());
  } else {
    std::vector<model::LayerPlacement> placement;
    for (size_t i = 0; i < n; ++i) placement.push_back({devices_[i].get(), bounds[i], bounds[i + 1]});
    model_ = std::make_unique<model::LlamaModel>(*file_, placement, n_ctx, progress);
    for (const auto& d : devices_) {
      backends_.push_back(d->create_backend());
      backend_ptrs_.push_back(backends_.back().get());
    }
    sched_ = std::make_unique<Scheduler>(backend_ptrs_);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fprintf(stderr, "loaded %s of weights in %.2f s (%.0f MiB/s)\n", human_bytes(total).c_str(), s,
               s > 0 ? mib(total) / s : 0.0);
  file_.reset();  // the model and tokenizer hold copies
}

std::vector<float> ModelHost::eval(std::span<const int32_t> tokens, int64_t n_past) {
  if (!model_) fail(ErrorKind::invalid_input, what_, "eval before load");
  if (sched_) return model_->eval(*sched_, backend_ptrs_, tokens, n_past);
  return model_->eval(*backends_[0], tokens, n_past);
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
         path + " has " + human_bytes(static_cast<size_t>(st.st_size)) + ", over the limit of " +
             human_bytes(kMaxBytes));
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

void ModelHost::print_worker_stats() const {
  for (const std::string& endpoint : args_.workers) {
    const RpcStats s = rpc_stats(endpoint);
    std::fprintf(stderr, "worker %s: %s sent, %s received, %llu round trips, %.3f s waiting\n", endpoint.c_str(),
                 human_bytes(s.bytes_sent).c_str(), human_bytes(s.bytes_received).c_str(),
                 static_cast<unsigned long long>(s.round_trips), s.wait_seconds);
  }
}

}  // namespace weft::tools
