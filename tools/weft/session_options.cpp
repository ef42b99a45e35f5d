// The model-and-devices options of `weft run`, `chat`, `serve`,
// `perplexity` and `bench model`, declared once and turned into the
// Session's options (session_ui.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli_options.h"
#include "session_ui.h"
#include "weft/core/error.h"
#include "weft/core/secret_file.h"
#include "weft/rpc/discovery.h"
#include "weft/serve/chat_template.h"

namespace weft::tools {

void add_model_host_options(CLI::App* cmd, ModelHostArgs& host) {
  cmd->add_option("-m,--model", host.model, "GGUF model file")->required();
  cmd->add_option("-t,--threads", host.threads, "host CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--worker", host.workers, "HOST:PORT of a weft worker (repeatable)");
  cmd->add_option("--workers-file", host.workers_file,
                  "a file of workers, one HOST:PORT per line (# comments); `weft serve` reads it again on SIGHUP "
                  "and takes in the new ones");
  cmd->add_option("--auth-token-file", host.auth_token_file, "file holding the workers' shared secret");
  cmd->add_option("--device", host.devices, "another device after the workers: rpc://HOST:PORT/N, cpu:THREADS, ... (repeatable)");
  cmd->add_option("--split", host.split,
                  "layer proportions host,worker1,... (default: by --placement); with --split-mode tensor, head "
                  "shares (default: equal), and '/' between groups of devices that take runs of layers in turn "
                  "(1/1,1: this host some layers, two workers the rest cut by heads)");
  cmd->add_option("--split-mode", host.split_mode,
                  "layer: each device holds whole layers (a pipeline); tensor: every device computes its share "
                  "of every layer's heads and feed-forward columns (--split weighs the shares; devices beyond the "
                  "key/value heads take feed-forward columns only); auto: whichever the probe's speeds predict "
                  "faster")
      ->capture_default_str()
      ->check(CLI::IsMember({"layer", "tensor", "auto"}));
  cmd->add_option("--placement", host.placement,
                  "without --split: speed (each device's speed and link measured at connect; the least predicted "
                  "time per token that fits) or memory (in proportion to free memory, no probe)")
      ->capture_default_str()
      ->check(CLI::IsMember({"speed", "memory"}));
  cmd->add_option("--experts-split", host.experts_split,
                  "mixture-of-experts models: each layer's experts in these proportions over host,worker1,... "
                  "(this host routes and computes its share while the others run; the other weights stay on "
                  "this host unless --split places them)");
  cmd->add_flag("--no-mmap", host.no_mmap,
                "copy this CPU's weights into memory instead of using the mapped file in place "
                "(then the file may change while the model runs)");
  cmd->add_option("--cache-type", host.cache_type,
                  "KV cache element type: f16, or q8_0 (about half the memory; needs fused attention)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f16", "q8_0"}));
  cmd->add_option("--tensor-partials", host.tensor_partials,
                  "with --split-mode tensor: how the activations cross between devices, f32 (exact) or q8_0 "
                  "(0.27 of the partials' bytes, for links of about 100 Mbit/s and slower; rounds them as a q8_0 "
                  "product's activations are)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "q8_0"}));
  cmd->add_flag("--no-peer-links", host.no_peer_links,
                "send activations between workers through this host (workers that cannot reach each other)");
  cmd->add_flag("--discover", host.discover,
                "also use the workers advertising on this machine's networks (weft worker --advertise; with "
                "--auth-token-file only those that signed their beacon with it, else only this machine's)");
  cmd->add_option("--discover-seconds", host.discover_seconds, "how long --discover listens")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 60.0));
  cmd->add_option("--discover-port", host.discover_port, "UDP port of the beacons")->capture_default_str()->check(CLI::Range(1, 65535));
  cmd->add_option("--worker-timeout", host.worker_timeout_s,
                  "seconds a worker may stay silent while awaited before it counts as dead (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

SessionOptions session_options(const ModelHostArgs& args, const char* what) {
  SessionOptions o;
  o.model = args.model;
  o.name = what;
  o.split = args.split;
  o.experts_split = args.experts_split;
  if (args.split_mode == "tensor") o.split_mode = SessionOptions::SplitMode::tensor;
  if (args.split_mode == "auto") o.split_mode = SessionOptions::SplitMode::automatic;
  if (args.placement == "memory") {  // the CLI checked the name; "speed" is the Session's default
    o.probe = false;
    if (args.split.empty()) o.placement = split_by_free_memory();
  }
  if (!args.auth_token_file.empty()) o.device_options.rpc.auth_secret = read_secret_file(args.auth_token_file, what);
  o.devices = {"cpu"};
  for (const std::string& w : args.workers) o.devices.push_back(worker_device_spec(w).text);
  if (!args.workers_file.empty()) {
    for (const DeviceSpec& w : read_workers_file(args.workers_file))
      if (std::find(o.devices.begin(), o.devices.end(), w.text) == o.devices.end()) o.devices.push_back(w.text);
  }
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
  o.load.tensor_partials = dtype_from_name(args.tensor_partials).value_or(DType::f32);
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

}  // namespace weft::tools
