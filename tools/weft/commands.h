// The subcommands of the `weft` executable. main.cpp parses arguments with
// CLI11 and calls one of these; each returns the process exit code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::tools {

struct CheckArgs {
  std::string backends = "cpu";  // comma-separated backend specs
  std::string filter;            // run only cases whose name contains this
  int threads = 0;               // CPU threads; 0 = hardware threads
  bool quiet = false;            // print failures and the summary only
};
int cmd_check(const CheckArgs& args);

struct BenchOpsArgs {
  int threads = 0;
  std::string filter;
  double min_seconds = 0.2;  // time each measurement at least this long
};
int cmd_bench_ops(const BenchOpsArgs& args);
// `weft bench gemm`: float-weight matrix products against the FMA peak (same options).
int cmd_bench_gemm(const BenchOpsArgs& args);

struct BenchRpcArgs {
  std::string endpoint;  // empty: an in-process worker
  int threads = 0;
  size_t upload_bytes = size_t{256} << 20;
};
int cmd_bench_rpc(const BenchRpcArgs& args);

// `weft worker`: serves this machine's CPU to weft hosts over the RPC
// protocol (docs/rpc-protocol.md) until SIGINT or SIGTERM.
struct WorkerArgs {
  std::string host = "127.0.0.1";  // other addresses need auth_token_file or insecure
  int port = 50052;                // 0: any free port (printed)
  int threads = 0;                 // CPU threads in all; 0 = hardware threads
  size_t mem = 0;                  // bytes all sessions may hold together; 0: 90% of the memory available at start
  size_t session_mem = 0;          // bytes one session may hold; 0: all of mem
  double max_graph_cost = 0;       // multiply-adds + bytes per graph; 0: the default (2^50)
  double handshake_timeout = 5;    // seconds from connect to a finished handshake
  double idle_timeout = 600;       // seconds a session may wait between frames
  double io_timeout = 30;          // seconds for a frame's rest or a reply's write (plus 1 s per MiB)
  std::string cache_dir;           // tensor cache directory; empty: none
  size_t cache_max = 0;            // bytes the cache may hold; 0: 16 GiB
  int max_clients = 64;
  std::string auth_token_file;     // shared secret (whitespace trimmed); empty: no auth
  bool insecure = false;           // allow a non-loopback host without a token
  int cpu_devices = 1;             // several devices per worker: CPU partitions
  std::vector<std::string> peer_allow;  // where PEER_CONNECT may dial; empty: the default (docs/security.md)
  bool tls = false;                     // TLS on every connection (a self-signed certificate unless given)
  std::string tls_cert, tls_key;        // PEM files; given: TLS
  bool advertise = false;               // broadcast a discovery beacon (weft/rpc/discovery.h)
  int advertise_port = 50051;           // its UDP port
};
int cmd_worker(const WorkerArgs& args);

// `weft gguf info FILE`: prints a GGUF file's metadata (arrays summarized:
// element type, length, first values) and its tensor table.
int cmd_gguf_info(const std::string& path);

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
int cmd_demo(const DemoArgs& args);

// The model and the devices of `weft run` and `weft perplexity`
// (session_ui.h): this CPU, device 0 of each worker, then any --device.
struct ModelHostArgs {
  std::string model;                 // GGUF file
  int threads = 0;                   // host CPU threads; 0 = hardware threads
  std::vector<std::string> workers;  // HOST:PORT, one device each
  std::vector<std::string> devices;  // more device specs (weft/runtime/devices.h)
  std::string split;                 // layer proportions host,worker1,...; empty: by placement
  double worker_timeout_s = 0;       // a worker silent this long while awaited is dead; 0: no limit
  bool no_peer_links = false;        // activations between workers go through this host
  std::string auth_token_file;       // the workers' shared secret (whitespace trimmed); empty: none
  bool no_mmap = false;              // copy the host's weights instead of using the file's mapping
  std::string cache_type = "f16";    // the KV cache's element type: f16 or q8_0
  std::string placement = "speed";   // without --split: "speed" (probed at connect) or "memory"
  std::string experts_split;         // expert proportions host,worker1,...; empty: experts with their layer
  bool discover = false;             // also the workers whose beacons this host hears (weft/rpc/discovery.h)
  double discover_seconds = 2.5;     // how long to listen for them
  int discover_port = 50051;         // the UDP port of the beacons
};

// `weft workers`: the workers advertising on this machine's networks
// (weft worker --advertise), one line each, for discover_seconds.
struct WorkersArgs {
  double seconds = 3;
  int port = 50051;
  std::string auth_token_file;  // keep beacons signed with this token (others listed as not usable)
};
int cmd_workers(const WorkersArgs& args);

// `weft bench model`: prompt processing and generation speed of a model
// (bench/model_bench.h), each beside the limit that bounds it, measured in
// the same run; text, or one JSON object for scripts.
struct BenchModelArgs {
  ModelHostArgs host;
  int n_prompt = 512;  // tokens of the prompt test (pp); 0: skip it
  int n_gen = 128;     // tokens of the generation test (tg); 0: skip it
  int depth = 0;       // KV cache positions filled before the generation test
  int reps = 5;        // repetitions of each, after one warm-up
  bool json = false;   // one JSON object on stdout instead of text
  int parallel = 1;    // > 1: also the generation test over this many sequences at once
};
int cmd_bench_model(const BenchModelArgs& args);

// `weft run`: generates text from a GGUF llama/qwen2 model, its layers split
// over this CPU and any workers (in proportion to --split, else by
// --placement: docs/placement.md), streaming tokens to stdout.
// `weft serve`: the OpenAI-compatible HTTP server (docs/serve.md) until
// SIGINT or SIGTERM.
struct ServeArgs {
  ModelHostArgs host;
  int64_t ctx_size = 4096;            // KV positions in all, cut among the slots
  int parallel = 1;                   // slots decoded together
  bool serial_steps = false;          // one step at a time even over several stages
  std::string listen_host = "127.0.0.1";
  int port = 8080;                    // 0: any free port
  std::string port_file;              // the port written here once listening (tests)
  std::string api_key_file;           // Bearer key required of every request
  bool insecure = false;              // a non-loopback address without a key
  std::string tls_cert, tls_key;      // HTTPS (PEM files)
  std::string chat_template;          // NAME (built-in) or FILE
  std::string alias;                  // the model's id in /v1/models
  size_t max_queue = 64;              // waiting requests beyond the slots; more: 429
  int max_tokens = 0;                 // per request (0: a slot's context)
  double timeout_s = 600;             // per request
  bool quiet = false;                 // no line per request
};
int cmd_serve(const ServeArgs& args);

// The sampler's flags of `weft run` and `weft chat` (cli_options.h turns
// them into model::SamplerOptions, the one sampler the server uses too).
struct SamplingArgs {
  float temperature = 0;        // --temp; 0: greedy
  int top_k = 40;               // --top-k; 0: off
  float top_p = 0.95f;          // --top-p; 1: off
  float min_p = 0.05f;          // --min-p; 0: off
  uint64_t seed = 0;            // --seed
  float repeat_penalty = 1;     // --repeat-penalty; 1: off
  int repeat_last_n = 64;       // --repeat-last-n; 0: no penalties; -1: the whole context
  float presence_penalty = 0;   // --presence-penalty
  float frequency_penalty = 0;  // --frequency-penalty
};

// `weft chat` and `weft run --conversation`: an interactive chat with the
// model's chat template, its history kept in the KV cache between turns
// (weft/serve/conversation.h). Ctrl-C stops a reply; Ctrl-C at the prompt or
// end of input (Ctrl-D) ends the chat with status 0.
struct ChatArgs {
  ModelHostArgs host;
  SamplingArgs sampling;
  int64_t ctx_size = 0;        // KV positions; 0: 4096, at most the model's training context
  int n_tokens = -1;           // most tokens per reply; -1: until the end of generation or of the context
  std::string system;          // the system message
  std::string chat_template;   // NAME (built-in) or FILE; empty: the file's, else chatml
  bool stats = false;          // per turn: tokens evaluated, reused, speeds
};
int cmd_chat(const ChatArgs& args);

struct RunArgs {
  ModelHostArgs host;
  std::string prompt;
  std::string prompt_file;           // the prompt from a file instead
  int n_tokens = 64;                 // tokens to generate (stops early at end of generation)
  SamplingArgs sampling;
  int64_t ctx_size = 0;              // KV positions in all; 0: the prompt and -n tokens (at most the training context)
  bool stats = false;                // speeds and RPC traffic to stderr
  bool special = false;              // special-token strings in the prompt are those tokens
  int parallel = 1;                  // sequences decoded together (the prompt repeated)
  std::string prompts_file;          // one prompt per non-empty line, decoded together
};
int cmd_run(const RunArgs& args);

// `weft perplexity`: perplexity of a model over a text file, the check users
// run after quantizing or splitting a model. The tokens are cut into chunks
// of ctx tokens, each evaluated from position 0 (its first token replaced by
// bos when the model has one); the second half of each chunk is scored, so
// every scored token sees at least ctx / 2 tokens before it (the convention
// of llama.cpp's perplexity tool, so figures compare).
struct PerplexityArgs {
  ModelHostArgs host;
  std::string text_file;             // UTF-8 text
  int ctx = 512;                     // tokens per chunk
  int max_chunks = 0;                // 0: every whole chunk in the text
  bool stats = false;                // speed and RPC traffic to stderr
};
int cmd_perplexity(const PerplexityArgs& args);

// `weft quantize IN OUT TYPE`: rewrites a GGUF model in one of the standard
// quantization mixes (include/weft/quantize.h); prints a progress bar when
// stderr is a terminal and one summary line. Exit 130 when interrupted.
struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string type;               // a mix name: Q4_K_M, Q8_0, ...
  bool pure = false;              // the mix's base type for every quantized tensor
  bool allow_requantize = false;  // accept already-quantized input tensors
  int threads = 0;                // 0: hardware threads
  std::string split_max_size;     // "500M", "2G": write a split model
  uint64_t split_max_tensors = 0; // nonzero: write a split model
};
int cmd_quantize(const QuantizeArgs& args);

}  // namespace weft::tools
