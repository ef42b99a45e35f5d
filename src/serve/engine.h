// The serving engine: continuous batching of completion requests over one
// loaded Session, through the runtime's one batched-generation engine
// (weft/runtime/batch_engine.h, which `weft run --parallel` drives too).
// This class adds what serving needs around it: a queue and the thread that
// drives the BatchEngine, admitting queued requests into free slots between
// steps (the slot whose cached tokens share the longest prefix with the
// prompt, so a conversation's next turn re-evaluates only what is new); the
// text each request receives (UTF-8 complete, stop strings held back),
// logprobs, cancellation and deadlines (a request that is cancelled — its
// client went away — or passes its deadline leaves at its next step); and
// metrics. A full queue refuses new requests (the HTTP side answers 429).
// Over several stages the slots form groups whose steps are in flight at
// once while some slot still has prompt tokens to feed; once every busy
// slot only decodes, one step carries them all (docs/serve.md).
// Embeddings requests (submit_embed) wait in the same queue and run
// between steps in a free slot (EmbedJob). With a draft model
// (EngineOptions::draft), a request decoded alone runs speculative rounds
// (docs/speculative.md).
//
//   Engine engine(session, {.slots = 4});
//   auto r = engine.submit(std::move(job));          // null: queue full
//   while (auto ev = r->next(std::chrono::milliseconds(100))) { ... }  // pieces, then the finish
//   r->cancel();                                     // the client went away
//
// Thread-safety: submit(), metrics() and every Request method may be called
// from any thread; the Session is used by the engine's thread alone from
// construction to destruction (tokenizer() is const and shared).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "serve/embedding.h"
#include "weft/model/grammar.h"
#include "weft/model/sampler.h"
#include "weft/runtime/batch_engine.h"
#include "weft/runtime/session.h"

namespace weft::serve {

// What one completion asks of the engine (already tokenized and checked).
struct Job {
  std::vector<int32_t> prompt;  // non-empty
  int max_tokens = 16;          // >= 0 (0: the prompt is evaluated into the slot's cache); the slot's context also ends it
  model::SamplerOptions sampler;  // its penalties also see the prompt's last repetition_window tokens
  std::vector<std::string> stop;  // stop strings (the text ends before the first match)
  bool ignore_eos = false;
  int top_logprobs = -1;  // -1: no logprobs; else the chosen token's and this many alternatives'
  // Control tokens whose vocabulary text the request's text includes (they
  // decode to "" otherwise): the tool-call markers its reply is parsed for.
  std::vector<int32_t> text_tokens;
  // Constrained output (response_format, grammar): every token sampled
  // among those this grammar allows (GenerateOptions::grammar); null: none.
  std::shared_ptr<const model::Grammar> grammar;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// One alternative of a token's logprobs.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// A piece of generated text (UTF-8 complete, never part of a stop string)
// with the tokens that made it; or the end of the request.
struct Event {
  std::string text;
  std::vector<int32_t> tokens;
  // With Job::top_logprobs >= 0: per token, its logprob and the top ones.
  std::vector<TokenLogprob> chosen;
  std::vector<std::vector<TokenLogprob>> top;

  bool finished = false;
  std::string finish_reason;  // "stop", "length", "cancelled", "timeout", "error"
  std::string error;          // with "error"
  int prompt_tokens = 0;      // with finished
  int completion_tokens = 0;
  int cached_tokens = 0;      // prompt tokens reused from the slot's cache
  double prompt_seconds = 0;  // admission to the first sampled token
  double decode_seconds = 0;  // from there to the end
  int drafted = 0;            // with a draft model: draft tokens judged for this request
  int accepted = 0;           // of those, kept
};

// A submitted request: the engine pushes events, the HTTP side pulls them.
class Request {
 public:
  // The next event, waiting up to timeout; nullopt when none came. After the
  // finished event, nullopt forever.
  std::optional<Event> next(std::chrono::milliseconds timeout);
  // Asks the engine to drop the request at its next step (idempotent).
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Engine;
  void push(Event e);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool done_ = false;  // the finished event was taken
  std::atomic<bool> cancelled_{false};
};

// An embeddings request (/v1/embeddings, /api/embed): texts already
// tokenized, each evaluated from position 0 in a free slot for its hidden
// states, pooled and L2-normalised (serve/embedding.h). Served between the
// engine's steps, one request at a time, with no step in flight: not
// batched with the generations in the same graph (docs/serve.md).
struct EmbedJob {
  std::vector<std::vector<int32_t>> inputs;  // non-empty, each non-empty and fitting a slot's context
  Pooling pooling = Pooling::last;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct EmbedResult {
  std::vector<std::vector<float>> vectors;  // one per input, n_embd floats, unit L2 norm
  int prompt_tokens = 0;                    // every input's tokens
  std::string error;  // non-empty: failed ("cancelled", "timeout", or what the model threw)
};

// A submitted embeddings request: the engine sets its result once.
class EmbedRequest {
 public:
  // The result, waiting up to timeout; nullopt while there is none yet.
  std::optional<EmbedResult> wait(std::chrono::milliseconds timeout);
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Engine;
  void set(EmbedResult r);

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<EmbedResult> result_;
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  int slots = 1;          // sequences decoded together; must divide the session's n_ctx
  size_t max_queue = 64;  // requests that may wait for a slot (beyond the free ones); then submit() refuses
  int batch_tokens = 256; // prompt tokens fed per step across slots (decode tokens come first)
  // Over several stages, the slots in groups whose steps are in flight at
  // once; false: one group, one step at a time (for comparison).
  bool pipelined = true;
  // Speculative decoding: a loaded draft Session (same vocabulary, context
  // at least a slot's, on this host) whose proposals a request running
  // alone is decoded with (BatchEngineOptions::draft); null: none. Used by
  // the engine's thread alone, like the target.
  Session* draft = nullptr;
  int draft_max = 8;  // tokens the draft proposes per round
};

// Counters for /metrics (monotonic unless noted).
struct EngineMetrics {
  uint64_t requests_finished = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_rejected = 0;  // queue full
  uint64_t requests_failed = 0;    // generation failed (a worker died, ...)
  uint64_t embeddings = 0;         // embeddings requests served (their inputs' tokens in prompt_tokens)
  uint64_t embed_steps = 0;        // the steps they took (inputs batched over the free slots)
  uint64_t prompt_tokens = 0;      // evaluated (cached ones not counted)
  uint64_t generated_tokens = 0;
  uint64_t steps = 0;
  uint64_t speculative_steps = 0;  // of those, speculative rounds (a draft's proposals judged)
  uint64_t drafted = 0;            // draft tokens judged in them
  uint64_t accepted = 0;           // of those, kept
  double busy_seconds = 0;    // in eval_batch and sampling
  double grammar_seconds = 0; // of which in grammar masks (requests finished)
  size_t queue_length = 0;    // now: completions and embeddings waiting
  int slots_busy = 0;         // now
  int slots = 0;
  int groups = 0;             // steps that may be in flight at once (Session::batch_slots, at most slots)
  std::string last_error;     // the last step that failed, "" if none
  uint64_t recoveries = 0;    // failed steps the model recovered from (SessionOptions::recover)
  std::vector<std::string> devices_lost;  // what those recoveries dropped (Session::lost_devices)
  uint64_t rejoins = 0;       // lost workers taken back while idle (BatchEngine::rejoin)
  std::vector<std::string> devices_joining;  // workers added (add_workers) and not yet taken in
  std::vector<std::string> devices_leaving;  // workers removed (remove_workers) still in the placement
  // The placement in force and its devices (Session::loaded_plan,
  // device_specs), copied when it changes: HTTP threads read these, never
  // the Session, which the engine's thread changes in a recovery or rejoin.
  LoadPlan plan;
  std::vector<DeviceSpec> device_specs;
  // Per device of plan: its compute time per step (ms) since the placement
  // began, measured at the engine's last idle moment (Session::
  // compute_stats, a round trip to each worker, made only with nothing in
  // flight); -1 where the device does not report it; empty until a step ran.
  std::vector<double> device_ms_per_step;
};

class Engine {
 public:
  // session must be loaded; its n_ctx is cut into options.slots parts.
  // Throws Error(invalid_input) when slots < 1 or does not divide n_ctx.
  Engine(Session& session, EngineOptions options);
  // shutdown().
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a job; nullptr when the queue is full. Throws Error(invalid_input)
  // when the prompt is empty or longer than a slot's context,
  // Error(disconnected) after shutdown().
  std::shared_ptr<Request> submit(Job job);
  // Queues jobs together (a request's n choices, each its own sequence):
  // all of them, or none when the queue cannot take them all (an empty
  // vector, counted as one rejection). Throws as submit().
  std::vector<std::shared_ptr<Request>> submit_group(std::vector<Job> jobs);
  // Queues an embeddings request (it waits with the completions, within
  // max_queue); nullptr when the queue is full. Throws Error(invalid_input)
  // naming the input that is empty, too long for a slot or outside the
  // vocabulary, or for no inputs; Error(disconnected) after shutdown().
  std::shared_ptr<EmbedRequest> submit_embed(EmbedJob job);
  // Hands workers to the model (`weft serve`'s workers file on SIGHUP):
  // the engine's thread gives them to Session::add_workers between steps,
  // and they are taken in like lost workers back (when the engine is idle
  // and they answer). The future says what was added or why nothing was
  // (--split shares, a spec that is not a worker); after shutdown(), that
  // the engine stopped.
  std::future<std::string> add_workers(std::vector<DeviceSpec> specs);
  // Takes workers out (the workers file re-read without them): the
  // engine's thread gives them to Session::remove_workers between steps; a
  // lost or joining one is forgotten at once, a placed one leaves when the
  // engine is idle (Session::depart_idle: the model placed again without
  // it first). The future says what was removed or why nothing was.
  std::future<std::string> remove_workers(std::vector<DeviceSpec> specs);
  // Stops the thread; requests still queued or running finish with
  // "cancelled". Idempotent; the engine stays valid (submit refuses).
  void shutdown();

  int64_t slot_context() const { return batch_.slot_context(); }
  EngineMetrics metrics() const;

 private:
  class Active;  // a running request: the BatchEngine's sink for it
  struct Pending {
    Job job;
    std::shared_ptr<Request> request;
  };
  void run();
  void step();   // one round: collect, admit, launch
  // With a device lost and nothing to do: lost workers that answer again
  // are taken back (BatchEngine::rejoin), the placement as started restored.
  void rejoin();
  void admit();  // queued requests into free slots; drops the cancelled and expired ones
  void reap();   // forgets the requests that finished
  void count_finish(const std::string& reason);  // metrics_, under mu_
  void copy_counters();  // the BatchEngine's counters into metrics_; engine thread, mu_ held
  void copy_placement();  // the Session's plan, devices and missing ones into metrics_; engine thread, mu_ held
  // Engine thread: the devices' compute totals at a new placement (nothing
  // in flight), and, when idle after steps, the time per step since then
  // into metrics_.device_ms_per_step.
  void rebase_device_times();
  void measure_device_times();
  std::vector<DeviceCompute> compute_base_;
  uint64_t compute_base_steps_ = 0, measured_at_steps_ = 0;
  // engine_embed.cpp: with embeddings queued, finishes the steps in flight
  // and serves the first live one while a slot is free (its result set,
  // whatever happens; a model error rethrown to run()).
  void embed_queued();
  EmbedResult embed(const EmbedJob& job, const EmbedRequest& request);

  Session& session_;
  EngineOptions options_;
  BatchEngine batch_;  // the engine thread's (check() is const and safe anywhere)
  // The vocabulary's token bytes as a trie, built once for every grammar's
  // masks; immutable, shared by the jobs' matchers.
  std::shared_ptr<const model::TokenTrie> trie_;

  mutable std::mutex mu_;  // guards queue_, embed_queue_, stop_, metrics_
  std::condition_variable cv_;
  struct WorkersToAdd {
    std::vector<DeviceSpec> specs;
    std::promise<std::string> done;
    bool remove = false;  // remove_workers'
  };
  std::future<std::string> change_workers(std::vector<DeviceSpec> specs, bool remove);
  void add_pending_workers();  // engine thread: workers_to_add_ into the Session
  void depart();               // engine thread, idle: the leaving workers out (Session::depart_idle)
  std::deque<Pending> queue_;
  std::vector<WorkersToAdd> workers_to_add_;  // under mu_
  std::deque<std::pair<EmbedJob, std::shared_ptr<EmbedRequest>>> embed_queue_;
  bool stop_ = false;
  bool shut_down_ = false;  // engine thread joined (caller's thread only)
  EngineMetrics metrics_;

  std::vector<std::unique_ptr<Active>> active_;  // the engine thread's
  std::thread thread_;  // last: started after everything it reads
};

}  // namespace weft::serve
