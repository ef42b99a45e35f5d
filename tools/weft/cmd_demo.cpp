// `weft demo`: the whole stack end to end on one machine. Two `weft worker`
// child processes (this executable, re-run) serve their CPUs on loopback;
// the demo model's layers are split over this CPU and both workers, and the
// greedy tokens must equal those of this CPU alone. The model's vocabulary is
// generated text pieces, so the prompt is text and the output decodes to
// (meaningless) text.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/quantize.h"
#include "weft/model/tokenizer.h"
#include "weft/runtime/session.h"

namespace weft::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr const char* kWhere = "demo";

// A `weft worker --port 0` child process. The constructor waits for its
// "listening on HOST:PORT" line; the destructor sends SIGTERM and reaps it.
class WorkerProcess {
 public:
  WorkerProcess() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) fail(ErrorKind::out_of_memory, kWhere, std::string("pipe: ") + std::strerror(errno));
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      close(fds[0]);
      close(fds[1]);
      fail(ErrorKind::out_of_memory, kWhere, std::string("fork: ") + std::strerror(errno));
    }
    if (pid_ == 0) {
      // The child: stdout into the pipe, stderr discarded; dies with the demo
      // if it dies first.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      dup2(fds[1], STDOUT_FILENO);
      const int null = open("/dev/null", O_WRONLY);  // its per-session log lines would drown the demo's
      if (null >= 0) dup2(null, STDERR_FILENO);
      execl("/proc/self/exe", "weft", "worker", "--host", "127.0.0.1", "--port", "0", "--threads", "1",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (out.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{fds[0], POLLIN, 0};
      char buf[256];
      ssize_t got = 0;
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0 || (got = read(fds[0], buf, sizeof buf)) <= 0) break;
      out.append(buf, static_cast<size_t>(got));
    }
    close(fds[0]);
    const std::string key = "listening on ";
    const size_t at = out.find(key);
    if (at == std::string::npos) {
      stop();
      fail(ErrorKind::disconnected, kWhere, "worker process did not report its port (got '" + out + "')");
    }
    endpoint_ = out.substr(at + key.size());
    endpoint_.erase(endpoint_.find_last_not_of("\r\n ") + 1);
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess() { stop(); }

  const std::string& endpoint() const { return endpoint_; }
  int pid() const { return pid_; }

  // SIGTERM and wait; returns the exit status (-1 if already stopped).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  std::string endpoint_;
};

fs::path cache_folder(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "weft";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "weft";
  fail(ErrorKind::invalid_input, kWhere, "no cache folder: set --cache-dir, XDG_CACHE_HOME or HOME");
}

// The text the tokens add to the prompt (its first space kept; bytes that
// are not printable UTF-8 shown as U+FFFD), then their ids.
void print_run(const char* label, const GenerateResult& r, const model::Tokenizer& tok) {
  std::string text;
  for (int32_t t : r.tokens) text += tok.decode_token(t);
  std::printf("%-6s \"%s\"\n%-6s ids", label, model::printable_text(text).c_str(), "");
  for (int32_t t : r.tokens) std::printf(" %d", t);
  std::printf("\n");
}

void print_speed(const char* label, const GenerateResult& r) {
  const size_t n = r.tokens.size();
  std::printf("%-6s %.1f tokens/s (%zu tokens in %.3f s; prompt %.1f ms, then %.1f tokens/s)\n", label,
              static_cast<double>(n) / r.total_seconds, n, r.total_seconds, r.prompt_seconds * 1e3,
              r.decode_tokens_per_second());
}

// Greedy, exactly n tokens (the demo vocabulary's end token does not stop it).
GenerateResult generate(Session& s, const LoadPlan& plan, const std::vector<int32_t>& prompt, int n) {
  s.load(plan);
  GenerateOptions o;
  o.max_tokens = n;
  o.stop_at_end_of_generation = false;
  return s.generate(prompt, o);
}

// The demo model in the mix named `type`, beside it in the cache folder;
// made once by the library behind `weft quantize` (the demo model is q8_0,
// so this requantizes).
fs::path quantized_copy(const fs::path& path, const std::string& type, int threads) {
  const std::optional<model::QuantMix> mix = model::quant_mix_from_name(type);
  if (!mix) fail(ErrorKind::invalid_input, kWhere, "--type " + type + ": not a quantization mix (see weft quantize --help)");
  const model::QuantMixInfo& info = model::quant_mix_info(*mix);
  const fs::path out = path.parent_path() / (path.stem().string() + "-" + std::string(info.name) + ".gguf");
  if (fs::exists(out)) {
    std::printf("model %s (%.0f MB)\n", out.c_str(), static_cast<double>(fs::file_size(out)) / 1e6);
    return out;
  }
  model::QuantizeOptions o;
  o.mix = *mix;
  o.allow_requantize = true;
  o.threads = threads;
  const model::QuantizeStats s = model::quantize_file(path.string(), out.string(), o);
  std::printf("quantized %s to %s: %.0f MB -> %.0f MB, %.2f bits per weight, in %.1f s\n", path.filename().c_str(),
              std::string(info.name).c_str(), static_cast<double>(s.in_bytes) / 1e6,
              static_cast<double>(s.out_bytes) / 1e6,
              8.0 * static_cast<double>(s.out_bytes) / static_cast<double>(std::max<int64_t>(s.weights, 1)), s.seconds);
  return out;
}

}  // namespace

int cmd_demo(const DemoArgs& args) {
  if (args.n_tokens < 1 || args.n_tokens > 4096)
    fail(ErrorKind::invalid_input, kWhere, "--tokens " + std::to_string(args.n_tokens) + " (1 to 4096)");
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal

  // The model, written once.
  const model::DemoModelSpec spec;
  const fs::path dir = cache_folder(args.cache_dir);
  const fs::path path = dir / "demo-llama-100m-v2.gguf";  // v2: with a vocabulary
  if (!fs::exists(path)) {
    fs::create_directories(dir);
    std::error_code ignored;  // the first demo model (no vocabulary), 107 MB nothing reads any more
    fs::remove(dir / "demo-llama-100m.gguf", ignored);
    const auto t0 = Clock::now();
    model::write_demo_model(path.string(), spec);
    std::printf("wrote %s (%.1f M parameters, %.0f MB) in %.1f s\n", path.c_str(),
                static_cast<double>(model::demo_model_params(spec)) / 1e6,
                static_cast<double>(fs::file_size(path)) / 1e6,
                std::chrono::duration<double>(Clock::now() - t0).count());
  } else {
    std::printf("model %s (%.0f MB)\n", path.c_str(), static_cast<double>(fs::file_size(path)) / 1e6);
  }
  const fs::path model_path = args.type.empty() ? path : quantized_copy(path, args.type, args.threads);

  // Two workers, then one device each beside this CPU.
  WorkerProcess w1, w2;
  std::printf("workers: %s (pid %d), %s (pid %d)\n", w1.endpoint().c_str(), w1.pid(), w2.endpoint().c_str(),
              w2.pid());
  int exit_code = 0;
  {
    SessionOptions split_options;
    split_options.model = model_path.string();
    split_options.name = kWhere;
    split_options.devices = {"cpu", "rpc://" + w1.endpoint(), "rpc://" + w2.endpoint()};
    split_options.split = args.split.empty() ? "1,1,1" : args.split;
    split_options.device_options.cpu_threads = args.threads;
    split_options.probe = false;  // a fixed split, and a plan printed without predicted times: no probe
    SessionOptions local_options = split_options;
    local_options.devices = {"cpu"};
    local_options.split.clear();

    // The split model first, freed before the local one loads (one copy of
    // the weights in this process at a time).
    std::vector<int32_t> prompt;
    GenerateResult split_run;
    {
      Session split(split_options);
      prompt = split.tokenizer().encode(model::kDemoPrompt, /*add_bos=*/true);
      const LoadPlan plan = split.plan(static_cast<int64_t>(prompt.size()) + args.n_tokens);
      std::printf("layers:");
      for (const DevicePlan& d : plan.devices)
        std::printf(" %s [%lld, %lld)", d.label.c_str(), static_cast<long long>(d.part.first_layer),
                    static_cast<long long>(d.part.last_layer));
      std::printf("\nprompt \"%s\" (%zu tokens)\n", model::kDemoPrompt, prompt.size());
      std::fflush(stdout);
      const auto t0 = Clock::now();
      split_run = generate(split, plan, prompt, args.n_tokens);
      std::printf("split model loaded and run in %.2f s\n", std::chrono::duration<double>(Clock::now() - t0).count());
    }
    Session local(local_options);
    const model::Tokenizer& tok = local.tokenizer();
    const GenerateResult local_run = generate(local, local.plan(static_cast<int64_t>(prompt.size()) + args.n_tokens),
                                              prompt, args.n_tokens);

    print_run("split", split_run, tok);
    print_run("local", local_run, tok);
    print_speed("split", split_run);
    print_speed("local", local_run);
    const unsigned host_threads = args.threads > 0 ? static_cast<unsigned>(args.threads)
                                                   : std::max(1u, std::thread::hardware_concurrency());
    std::printf("(the host computes with %u thread%s, each worker with 1, all on this machine: the split's speed is\n"
                " bounded by the workers' single threads, not by the loopback link; see docs/models.md)\n",
                host_threads, host_threads == 1 ? "" : "s");
    size_t first_diff = 0;
    const size_t n = std::min(split_run.tokens.size(), local_run.tokens.size());
    while (first_diff < n && split_run.tokens[first_diff] == local_run.tokens[first_diff]) ++first_diff;
    if (first_diff == n && split_run.tokens.size() == local_run.tokens.size()) {
      std::printf("identical: %zu of %zu tokens\n", first_diff, split_run.tokens.size());
    } else {
      std::printf("MISMATCH at token %zu: split %d, local %d\n", first_diff,
                  first_diff < split_run.tokens.size() ? split_run.tokens[first_diff] : -1,
                  first_diff < local_run.tokens.size() ? local_run.tokens[first_diff] : -1);
      exit_code = 1;
    }
  }
  const int s1 = w1.stop(), s2 = w2.stop();
  std::printf("workers stopped (exit %d, %d)\n", s1, s2);
  return exit_code;
}

}  // namespace weft::tools
