// `weft run`: text generation from a GGUF file, the layers split over this
// CPU and any `weft worker`s. The plan goes to stderr before loading, the
// generated text streams to stdout token by token.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "layer_split.h"
#include "weft/cpu.h"
#include "weft/error.h"
#include "weft/gguf.h"
#include "weft/model.h"
#include "weft/rpc.h"
#include "weft/sampler.h"
#include "weft/sched.h"
#include "weft/tokenizer.h"

namespace weft::tools {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kWhere = "run";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes of weights each placement will hold: blk.L.* to L's placement, the
// embedding to the first, everything else (output norm, output) to the last.
std::vector<size_t> weight_bytes(const GgufFile& file, const std::vector<int64_t>& bounds) {
  const size_t n_parts = bounds.size() - 1;
  std::vector<size_t> bytes(n_parts, 0);
  for (const GgufTensorInfo& t : file.tensors()) {
    size_t part = n_parts - 1;
    if (t.name.rfind("token_embd.", 0) == 0) {
      part = 0;
    } else if (t.name.rfind("blk.", 0) == 0) {
      const long long layer = std::atoll(t.name.c_str() + 4);
      for (size_t i = 0; i < n_parts; ++i)
        if (layer >= bounds[i] && layer < bounds[i + 1]) part = i;
    }
    bytes[part] += t.nbytes;
  }
  return bytes;
}

}  // namespace

int cmd_run(const RunArgs& args) {
  if (args.n_tokens < 0) fail(ErrorKind::invalid_input, kWhere, "--tokens " + std::to_string(args.n_tokens) + " (>= 0)");
  signal(SIGPIPE, SIG_IGN);  // a dead worker is an Error(disconnected), not a signal

  auto file = GgufFile::open(args.model);
  const auto tok = model::Tokenizer::from_gguf(*file);
  const auto params = model::LlamaParams::from_gguf(*file);
  const int vocab = static_cast<int>(params.n_vocab);

  // Devices: this CPU, then device 0 of each worker.
  std::vector<std::unique_ptr<Device>> owned_devices;
  owned_devices.push_back(make_cpu_device(args.threads));
  std::vector<std::string> labels{"host"};
  for (const std::string& endpoint : args.workers) {
    auto remote = make_rpc_devices(endpoint);
    if (remote.empty()) fail(ErrorKind::invalid_input, kWhere, "worker " + endpoint + " serves no devices");
    owned_devices.push_back(std::move(remote[0]));
    labels.push_back(endpoint);
  }
  std::vector<Device*> devices;
  for (auto& d : owned_devices) devices.push_back(d.get());

  // Layers: by --split, else by free memory (equal when no device reports any).
  std::vector<double> w;
  if (!args.split.empty()) {
    w = parse_split(args.split, devices.size(), kWhere);
  } else {
    double total = 0;
    for (Device* d : devices) {
      w.push_back(static_cast<double>(d->memory().free));
      total += w.back();
    }
    if (!(total > 0)) w.assign(devices.size(), 1.0);
  }
  const std::vector<int64_t> bounds = layer_bounds(w, params.n_layer);
  const std::vector<size_t> bytes = weight_bytes(*file, bounds);
  for (size_t i = 0; i < devices.size(); ++i)
    std::fprintf(stderr, "%s (%s): layers [%lld, %lld), %.1f MiB of weights\n", labels[i].c_str(),
                 devices[i]->name().c_str(), static_cast<long long>(bounds[i]), static_cast<long long>(bounds[i + 1]),
                 static_cast<double>(bytes[i]) / (1024.0 * 1024.0));

  // The prompt, and a context that holds it and every generated token.
  const std::vector<int32_t> prompt = tok->encode(args.prompt, tok->bos() >= 0);
  if (prompt.empty()) fail(ErrorKind::invalid_input, kWhere, "the prompt is empty and the model has no bos token");
  int64_t n_ctx = static_cast<int64_t>(prompt.size()) + std::max(args.n_tokens, 1);
  if (params.n_ctx_train > 0) n_ctx = std::min(n_ctx, params.n_ctx_train);
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    fail(ErrorKind::invalid_input, kWhere,
         "prompt of " + std::to_string(prompt.size()) + " tokens exceeds the context length " + std::to_string(n_ctx));

  // The model, on one device or split by layers over several.
  std::unique_ptr<model::LlamaModel> m;
  std::vector<std::unique_ptr<Backend>> owned_backends;
  std::vector<Backend*> backends;
  std::unique_ptr<Scheduler> sched;
  std::function<std::vector<float>(std::span<const int32_t>, int64_t)> eval;
  if (devices.size() == 1) {
    m = std::make_unique<model::LlamaModel>(*file, *devices[0], n_ctx);
    owned_backends.push_back(devices[0]->create_backend());
    eval = [&](std::span<const int32_t> t, int64_t n_past) { return m->eval(*owned_backends[0], t, n_past); };
  } else {
    std::vector<model::LayerPlacement> placement;
    for (size_t i = 0; i < devices.size(); ++i) placement.push_back({devices[i], bounds[i], bounds[i + 1]});
    m = std::make_unique<model::LlamaModel>(*file, placement, n_ctx);
    for (Device* d : devices) {
      owned_backends.push_back(d->create_backend());
      backends.push_back(owned_backends.back().get());
    }
    sched = std::make_unique<Scheduler>(backends);
    eval = [&](std::span<const int32_t> t, int64_t n_past) { return m->eval(*sched, backends, t, n_past); };
  }
  file.reset();  // the model and tokenizer hold copies

  model::Sampler sampler({.temperature = args.temperature, .seed = args.seed});
  const auto t0 = Clock::now();
  std::vector<float> logits = eval(prompt, 0);
  const double prompt_s = seconds_since(t0);
  const float* row = &logits[(prompt.size() - 1) * static_cast<size_t>(vocab)];
  int64_t n_past = static_cast<int64_t>(prompt.size());
  int generated = 0;
  const auto t1 = Clock::now();
  while (generated < args.n_tokens) {
    const int32_t next = sampler.sample({row, static_cast<size_t>(vocab)});
    if (next == tok->eos()) break;
    sampler.accept(next);
    ++generated;
    const std::string piece = tok->decode_token(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (generated == args.n_tokens || n_past >= n_ctx) break;  // no room, or nothing more to sample
    logits = eval(std::span<const int32_t>(&next, 1), n_past++);
    row = logits.data();
  }
  const double gen_s = seconds_since(t1);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  if (args.stats) {
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", prompt.size(), prompt_s,
                 prompt_s > 0 ? static_cast<double>(prompt.size()) / prompt_s : 0.0);
    std::fprintf(stderr, "generation: %d tokens in %.3f s (%.1f tokens/s)\n", generated, gen_s,
                 gen_s > 0 ? generated / gen_s : 0.0);
    for (const std::string& endpoint : args.workers) {
      const RpcStats s = rpc_stats(endpoint);
      std::fprintf(stderr, "worker %s: %llu bytes sent, %llu bytes received, %llu round trips\n", endpoint.c_str(),
                   static_cast<unsigned long long>(s.bytes_sent), static_cast<unsigned long long>(s.bytes_received),
                   static_cast<unsigned long long>(s.round_trips));
    }
  }
  return 0;
}

}  // namespace weft::tools
