// weft: one executable, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "cli_options.h"
#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/version.h"

namespace {

// The options of the model and its devices, shared by `run` and `perplexity`.
void add_model_host_options(CLI::App* cmd, weft::tools::ModelHostArgs& host) {
  cmd->add_option("-m,--model", host.model, "GGUF model file")->required();
  cmd->add_option("-t,--threads", host.threads, "host CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--worker", host.workers, "HOST:PORT of a weft worker (repeatable)");
  cmd->add_option("--auth-token-file", host.auth_token_file, "file holding the workers' shared secret");
  cmd->add_option("--device", host.devices, "another device after the workers: rpc://HOST:PORT/N, cpu:THREADS, ... (repeatable)");
  cmd->add_option("--split", host.split, "layer proportions host,worker1,... (default: by --placement)");
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

}  // namespace

int main(int argc, char** argv) {
  using namespace weft::tools;
  CLI::App app{"weft: run one model across many machines"};
  app.require_subcommand(1);
  // Checked before the subcommand requirement: `weft --version` alone works.
  app.set_version_flag("--version", [] {
    return std::string("weft ") + weft::version() + " (commit " + weft::git_commit() +
           "), CPU kernels: " + weft::cpu_simd_level();
  });

  CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand("check", "run the backend conformance suite against a float64 reference");
  check_cmd->add_option("--backend", check.backends, "backend(s) to check: cpu, async, async-copy, rpc://HOST:PORT[/N]; a comma list runs through the scheduler")->capture_default_str();
  check_cmd->add_option("--filter", check.filter, "only cases whose name contains this");
  check_cmd->add_option("-t,--threads", check.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  check_cmd->add_flag("-q,--quiet", check.quiet, "print only failures and the summary");

  CLI::App* bench_cmd = app.add_subcommand("bench", "benchmarks that report ratios against this machine's limits");
  bench_cmd->require_subcommand(1);
  BenchOpsArgs bench_ops;
  CLI::App* bench_ops_cmd = bench_cmd->add_subcommand("ops", "time each op's kernel against memory bandwidth");
  bench_ops_cmd->add_option("-t,--threads", bench_ops.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  bench_ops_cmd->add_option("--filter", bench_ops.filter, "only benchmarks whose name contains this");
  bench_ops_cmd->add_option("--min-time", bench_ops.min_seconds, "seconds per measurement")->capture_default_str();

  BenchOpsArgs bench_gemm;
  CLI::App* bench_gemm_cmd = bench_cmd->add_subcommand("gemm", "float-weight matrix products (prompts) against the FMA peak");
  bench_gemm_cmd->add_option("-t,--threads", bench_gemm.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  bench_gemm_cmd->add_option("--filter", bench_gemm.filter, "only rows whose name contains this");
  bench_gemm_cmd->add_option("--min-time", bench_gemm.min_seconds, "seconds per measurement")->capture_default_str();

  BenchRpcArgs bench_rpc;
  CLI::App* bench_rpc_cmd = bench_cmd->add_subcommand("rpc", "RPC upload, latency and a graph chain against loopback limits");
  bench_rpc_cmd->add_option("--worker", bench_rpc.endpoint, "HOST:PORT of a running worker (default: one in-process)");
  bench_rpc_cmd->add_option("-t,--threads", bench_rpc.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  add_size_option(bench_rpc_cmd, "--upload", bench_rpc.upload_bytes, "bytes uploaded (default 256MiB)");
  bench_rpc_cmd->add_option_function<size_t>(
      "--upload-mib", [&bench_rpc](size_t mib) {
        if (mib > (SIZE_MAX >> 20)) throw CLI::ValidationError("--upload-mib " + std::to_string(mib) + " is too large");
        bench_rpc.upload_bytes = mib << 20;
      },
      "MiB uploaded (the same as --upload NMiB)");

  BenchModelArgs bench_model;
  CLI::App* bench_model_cmd = bench_cmd->add_subcommand(
      "model", "prompt and generation speed of a model (as llama-bench's pp/tg) against this machine's limits");
  add_model_host_options(bench_model_cmd, bench_model.host);
  bench_model_cmd->add_option("-p,--n-prompt", bench_model.n_prompt, "prompt tokens, one batch from position 0 (0: skip)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  bench_model_cmd->add_option("-n,--n-gen", bench_model.n_gen, "tokens generated one at a time after --depth positions (0: skip)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  bench_model_cmd->add_option("-d,--depth", bench_model.depth, "KV cache positions filled before the generation test")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  bench_model_cmd->add_option("-r,--repetitions", bench_model.reps, "repetitions of each test, after one warm-up")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  bench_model_cmd->add_flag("--json", bench_model.json, "one JSON object on stdout (fields: docs/performance.md)");
  bench_model_cmd->add_option("--parallel", bench_model.parallel,
                              "also generate -n tokens for this many sequences at once, pipelined over the devices")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));

  WorkerArgs worker;
  CLI::App* worker_cmd = app.add_subcommand("worker", "serve this machine's CPU to weft hosts over TCP");
  worker_cmd->add_option("--host", worker.host, "address to listen on")->capture_default_str();
  worker_cmd->add_option("--port", worker.port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  worker_cmd->add_option("-t,--threads", worker.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  add_size_option(worker_cmd, "--mem", worker.mem,
                  "memory all sessions may hold together: buffers, graphs, scratch (0: 90% of available memory; at "
                  "least 1MiB)");
  add_size_option(worker_cmd, "--session-mem", worker.session_mem, "memory one session may hold (0: all of --mem; at least 1MiB)");
  worker_cmd->add_option("--max-graph-cost", worker.max_graph_cost,
                         "most multiply-adds + bytes touched one graph may ask for (0: 2^50)")
      ->check(CLI::NonNegativeNumber);
  worker_cmd->add_option("--handshake-timeout", worker.handshake_timeout, "seconds a new connection has to finish HELLO/AUTH")
      ->capture_default_str()->check(CLI::PositiveNumber);
  worker_cmd->add_option("--idle-timeout", worker.idle_timeout, "seconds a session may stay idle between commands")
      ->capture_default_str()->check(CLI::PositiveNumber);
  worker_cmd->add_option("--io-timeout", worker.io_timeout,
                         "seconds to receive a command's rest or send a reply, plus 1 s per MiB")
      ->capture_default_str()->check(CLI::PositiveNumber);
  worker_cmd->add_option("--cache-dir", worker.cache_dir, "tensor cache directory");
  add_size_option(worker_cmd, "--cache-max", worker.cache_max, "what the tensor cache may hold (0: 16GiB)");
  worker_cmd->add_option("--max-clients", worker.max_clients, "sessions at once (and connections in their handshake)")->capture_default_str()->check(CLI::PositiveNumber);
  worker_cmd->add_option("--auth-token-file", worker.auth_token_file, "file holding the shared secret");
  worker_cmd->add_flag("--insecure", worker.insecure, "allow a non-loopback address without a token");
  worker_cmd->add_option("--peer-allow", worker.peer_allow,
                         "where peer links may be dialed: ADDR[/BITS][:PORT], [V6]/BITS:PORT, a host name, loopback, any, "
                         "none (default: any with a token, else loopback)")
      ->delimiter(',');
  worker_cmd->add_flag("--tls", worker.tls,
                       "TLS on every connection: a self-signed certificate made on first start and kept beside the "
                       "token file (or in ~/.config/weft), unless --tls-cert/--tls-key give one");
  worker_cmd->add_flag("--advertise", worker.advertise,
                       "broadcast a beacon every 2 s on the networks this worker listens on, so that hosts find it "
                       "(weft workers, --discover); signed with the token when there is one");
  worker_cmd->add_option("--advertise-port", worker.advertise_port, "UDP port of the beacons")
      ->capture_default_str()->check(CLI::Range(1, 65535));
  worker_cmd->add_option("--tls-cert", worker.tls_cert, "TLS certificate (PEM); with --tls-key");
  worker_cmd->add_option("--tls-key", worker.tls_key, "TLS private key (PEM); with --tls-cert");
  worker_cmd->add_option("--devices", worker.cpu_devices, "CPU devices to serve (partitions of the threads)")
      ->capture_default_str()->check(CLI::Range(1, 64));

  WorkersArgs workers;
  CLI::App* workers_cmd =
      app.add_subcommand("workers", "list the workers advertising on this machine's networks (weft worker --advertise)");
  workers_cmd->add_option("--seconds", workers.seconds, "how long to listen")->capture_default_str()->check(CLI::Range(0.1, 600.0));
  workers_cmd->add_option("--port", workers.port, "UDP port of the beacons")->capture_default_str()->check(CLI::Range(1, 65535));
  workers_cmd->add_option("--auth-token-file", workers.auth_token_file, "the pool's token: which beacons it signed");

  CLI::App* gguf_cmd = app.add_subcommand("gguf", "inspect GGUF model files");
  gguf_cmd->require_subcommand(1);
  std::string gguf_path;
  CLI::App* gguf_info_cmd = gguf_cmd->add_subcommand("info", "print a GGUF file's metadata and tensor table");
  gguf_info_cmd->add_option("file", gguf_path, "GGUF file")->required();

  DemoArgs demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "run a ~100M-parameter random llama split over this CPU and two local workers; check it matches this CPU alone");
  demo_cmd->add_option("-n,--tokens", demo.n_tokens, "tokens to generate")->capture_default_str()->check(CLI::Range(1, 4096));
  demo_cmd->add_option("--cache-dir", demo.cache_dir, "folder for the model file (default: $XDG_CACHE_HOME/weft or ~/.cache/weft)");
  demo_cmd->add_option("-t,--threads", demo.threads, "host CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  demo_cmd->add_option("--split", demo.split, "layer proportions host,worker1,worker2 (default 1,1,1)");
  demo_cmd->add_option("--type", demo.type,
                       "run a copy of the model quantized to this mix by `weft quantize` (Q4_K_M, q4_K, Q6_K, IQ4_XS, ...)");

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "generate text from a GGUF model, its layers split over this CPU and any workers");
  add_model_host_options(run_cmd, run.host);
  CLI::Option* prompt_opt = run_cmd->add_option("-p,--prompt", run.prompt, "prompt text");
  CLI::Option* file_opt =
      run_cmd->add_option("-f,--file", run.prompt_file, "read the prompt from this file")->excludes(prompt_opt);
  CLI::Option* run_tokens_opt = run_cmd->add_option("-n,--tokens", run.n_tokens, "tokens to generate (stops early at end of generation; with --conversation per reply, default unlimited)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  add_sampling_options(run_cmd, run.sampling);
  run_cmd->add_option("-c,--ctx-size", run.ctx_size,
                      "KV cache positions in all, cut evenly among the sequences (0: the prompt and -n tokens; with "
                      "--conversation 4096), at most the model's training context unless given")
      ->capture_default_str();
  bool run_conversation = false;
  std::string run_system, run_template;
  CLI::Option* conversation_opt = run_cmd->add_flag(
      "--conversation", run_conversation, "an interactive chat, as `weft chat` (also spelled -cnv)");
  run_cmd->add_option("--system", run_system, "with --conversation: the system message")->needs(conversation_opt);
  run_cmd->add_option("--chat-template", run_template,
                      "with --conversation: a built-in template NAME or a FILE (default: the model's, else chatml)")
      ->needs(conversation_opt);
  run_cmd->add_flag("--stats", run.stats, "print speeds and RPC traffic to stderr");
  run_cmd->add_flag("--special", run.special, "read special-token strings in the prompt (e.g. <|eot_id|>) as those tokens");
  CLI::Option* parallel_opt = run_cmd->add_option("--parallel", run.parallel,
                      "sequences decoded together, pipelined over the devices (the prompt repeated; seed + i each)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  CLI::Option* prompts_opt =
      run_cmd->add_option("--prompts", run.prompts_file, "decode every non-empty line of this file as its own prompt, together")
          ->excludes(prompt_opt)
          ->excludes(file_opt);
  for (CLI::Option* o : {prompt_opt, file_opt, prompts_opt, parallel_opt}) conversation_opt->excludes(o);

  ChatArgs chat;
  CLI::App* chat_cmd = app.add_subcommand(
      "chat", "an interactive chat with the model's chat template, split over this CPU and any workers like `run`");
  add_model_host_options(chat_cmd, chat.host);
  add_sampling_options(chat_cmd, chat.sampling);
  chat_cmd->add_option("-c,--ctx-size", chat.ctx_size,
                       "KV cache positions for the whole conversation (0: 4096, at most the model's training context)")
      ->capture_default_str();
  chat_cmd->add_option("-n,--tokens", chat.n_tokens, "most tokens per reply (-1: until the reply or the context ends)")
      ->capture_default_str();
  chat_cmd->add_option("--system", chat.system, "the system message");
  chat_cmd->add_option("--chat-template", chat.chat_template,
                       "a built-in template NAME or a FILE (default: the model's, else chatml)");
  chat_cmd->add_flag("--stats", chat.stats, "per turn: tokens evaluated and reused from the cache, speeds");

  ServeArgs serve;
  CLI::App* serve_cmd = app.add_subcommand(
      "serve", "an OpenAI-compatible HTTP server (chat and completions, streamed) over the model and its workers");
  add_model_host_options(serve_cmd, serve.host);
  serve_cmd->add_option("-c,--ctx-size", serve.ctx_size, "KV cache positions in all, cut evenly among the slots")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  serve_cmd->add_option("--parallel", serve.parallel, "requests decoded together (slots)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  serve_cmd->add_flag("--serial-steps", serve.serial_steps,
                      "over several stages, one batched step at a time (the slots' groups are not pipelined; what "
                      "the pipelining is measured against)");
  serve_cmd->add_option("--host", serve.listen_host, "address to listen on (other than loopback: --api-key-file or --insecure)")
      ->capture_default_str();
  serve_cmd->add_option("--port", serve.port, "port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--port-file", serve.port_file, "write the port here once listening");
  serve_cmd->add_option("--api-key-file", serve.api_key_file, "file holding the API key clients send as 'Authorization: Bearer KEY'");
  serve_cmd->add_flag("--insecure", serve.insecure, "allow a non-loopback address without an API key");
  serve_cmd->add_option("--tls-cert", serve.tls_cert, "serve HTTPS with this certificate (PEM); with --tls-key");
  serve_cmd->add_option("--tls-key", serve.tls_key, "the HTTPS certificate's private key (PEM)");
  serve_cmd->add_option("--chat-template", serve.chat_template,
                        "chat template: a built-in (chatml, gemma, llama2, llama3, mistral, phi3) or a Jinja file "
                        "(default: the model file's)");
  serve_cmd->add_option("--alias", serve.alias, "the model's id in /v1/models (default: the file name)");
  serve_cmd->add_option("--max-queue", serve.max_queue, "requests that may wait for a slot; more get 429")
      ->capture_default_str()->check(CLI::Range(0, 1024));
  serve_cmd->add_option("--max-tokens", serve.max_tokens, "most tokens one request may ask for (0: a slot's context)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--timeout", serve.timeout_s, "seconds one request may take")->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
  serve_cmd->add_flag("-q,--quiet", serve.quiet, "no log line per request");

  PerplexityArgs ppl;
  CLI::App* ppl_cmd = app.add_subcommand("perplexity", "perplexity of a GGUF model over a text file, split like `run`");
  add_model_host_options(ppl_cmd, ppl.host);
  ppl_cmd->add_option("-f,--file", ppl.text_file, "text file (UTF-8)")->required();
  ppl_cmd->add_option("-c,--ctx", ppl.ctx, "tokens per chunk")->capture_default_str()->check(CLI::Range(4, 1 << 20));
  ppl_cmd->add_option("--chunks", ppl.max_chunks, "chunks to score (0: all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  ppl_cmd->add_flag("--stats", ppl.stats, "print speed and RPC traffic to stderr");

  QuantizeArgs quant;
  CLI::App* quant_cmd = app.add_subcommand(
      "quantize", "rewrite a GGUF model in a quantization mix (tensor types as llama.cpp's quantizer chooses them)");
  quant_cmd->add_option("input", quant.input, "GGUF model in f32/f16/bf16")->required();
  quant_cmd->add_option("output", quant.output, "GGUF file to write")->required();
  quant_cmd->add_option("type", quant.type,
                        "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M "
                        "Q6_K IQ4_NL IQ4_XS")
      ->required();
  quant_cmd->add_flag("--pure", quant.pure, "the mix's base type for every quantized tensor (no per-tensor mix)");
  quant_cmd->add_flag("--allow-requantize", quant.allow_requantize,
                      "accept already-quantized input tensors (loses more than quantizing from 16 or 32 bits)");
  quant_cmd->add_option("-t,--threads", quant.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  quant_cmd->add_option("--split-max-size", quant.split_max_size,
                        "write a split model (OUT less .gguf becomes OUT-00001-of-0000N.gguf ...), each part's tensors "
                        "at most this size: 500M, 2G (MiB, GiB, as llama-gguf-split counts)");
  quant_cmd->add_option("--split-max-tensors", quant.split_max_tensors,
                        "write a split model with at most this many tensors a part")
      ->check(CLI::PositiveNumber);

  rewrite_long_short_options(argc, argv);
  CLI11_PARSE(app, argc, argv);
  try {
    if (check_cmd->parsed()) return cmd_check(check);
    if (bench_ops_cmd->parsed()) return cmd_bench_ops(bench_ops);
    if (bench_gemm_cmd->parsed()) return cmd_bench_gemm(bench_gemm);
    if (bench_rpc_cmd->parsed()) return cmd_bench_rpc(bench_rpc);
    if (bench_model_cmd->parsed()) return cmd_bench_model(bench_model);
    if (worker_cmd->parsed()) return cmd_worker(worker);
    if (workers_cmd->parsed()) return cmd_workers(workers);
    if (gguf_info_cmd->parsed()) return cmd_gguf_info(gguf_path);
    if (demo_cmd->parsed()) return cmd_demo(demo);
    if (run_cmd->parsed() && run_conversation) {
      ChatArgs c;
      c.host = run.host;
      c.sampling = run.sampling;
      c.ctx_size = run.ctx_size;
      c.n_tokens = run_tokens_opt->count() > 0 ? run.n_tokens : -1;
      c.system = run_system;
      c.chat_template = run_template;
      c.stats = run.stats;
      return cmd_chat(c);
    }
    if (run_cmd->parsed()) return cmd_run(run);
    if (chat_cmd->parsed()) return cmd_chat(chat);
    if (serve_cmd->parsed()) return cmd_serve(serve);
    if (ppl_cmd->parsed()) return cmd_perplexity(ppl);
    if (quant_cmd->parsed()) return cmd_quantize(quant);
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft: %s error: %s\n", weft::error_kind_name(e.kind()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 1;
  }
  return 2;
}
