// `weft demo`: the whole stack end to end on one machine. Two `weft worker`
// child processes (this executable, re-run) serve their CPUs on loopback;
// the demo model's layers are split over this CPU and both workers, and the
// greedy tokens must equal those of this CPU alone. The model's vocabulary is
// generated text pieces, so the prompt is text and the output decodes to
// (meaningless) text.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "demo_files.h"
#include "runtime/listening_process.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/quantize.h"
#include "weft/model/tokenizer.h"
#include "weft/runtime/session.h"

namespace weft::tools {

// `weft demo`: writes a ~100 M parameter llama model with deterministic
// random weights into cache_dir (once), starts two `weft worker` child
// processes on loopback, generates n_tokens greedily with the layers split
// over this CPU and both workers, then the same on this CPU alone, and checks
// that the two token sequences are identical (exit 1 if not).
struct DemoArgs {
  int n_tokens = 32;
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/weft or ~/.cache/weft
  int threads = 0;        // host CPU threads; 0 = hardware threads
  std::string split;      // layer proportions host,worker1,worker2; empty: 1,1,1
  std::string type;       // a quantization mix (Q4_K_M, q4_K, ...): run a copy made by `weft quantize`
};

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr const char* kCmdDemoWhere = "demo";

// A `weft worker --port 0` child process (this executable, re-run) on
// loopback, its per-session log lines discarded (they would drown the demo's).
ListeningProcessOptions worker_process() {
  ListeningProcessOptions o;
  o.program = "/proc/self/exe";
  o.argv = {"weft", "worker", "--host", "127.0.0.1", "--port", "0", "--threads", "1"};
  o.discard_stderr = true;
  return o;
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

}  // namespace

int cmd_demo(const DemoArgs& args) {
  if (args.n_tokens < 1 || args.n_tokens > 4096)
    fail(ErrorKind::invalid_input, kCmdDemoWhere, "--tokens " + std::to_string(args.n_tokens) + " (1 to 4096)");
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal

  const fs::path model_path = demo_model_file(args.cache_dir, args.type, args.threads);

  // Two workers, then one device each beside this CPU.
  ListeningProcess w1(worker_process()), w2(worker_process());
  std::printf("workers: %s (pid %d), %s (pid %d)\n", w1.address().c_str(), w1.pid(), w2.address().c_str(),
              w2.pid());
  int exit_code = 0;
  {
    SessionOptions split_options;
    split_options.model = model_path.string();
    split_options.name = kCmdDemoWhere;
    split_options.devices = {"cpu", "rpc://" + w1.address(), "rpc://" + w2.address()};
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

void add_demo_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<DemoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "run a ~100M-parameter random llama split over this CPU and two local workers; check it matches this CPU alone");
  cmd->add_option("-n,--tokens", a->n_tokens, "tokens to generate")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--cache-dir", a->cache_dir, "folder for the model file (default: $XDG_CACHE_HOME/weft or ~/.cache/weft)");
  cmd->add_option("-t,--threads", a->threads, "host CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--split", a->split, "layer proportions host,worker1,worker2 (default 1,1,1)");
  cmd->add_option("--type", a->type,
                  "run a copy of the model quantized to this mix by `weft quantize` (Q4_K_M, q4_K, Q6_K, IQ4_XS, ...)");
  out.push_back({cmd, [a] { return cmd_demo(*a); }});
}

}  // namespace weft::tools
