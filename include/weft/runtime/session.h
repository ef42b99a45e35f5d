// A model ready to run: from a GGUF path and device specs to placed, loaded
// weights, evaluation, generation and perplexity. What `weft run`,
// `weft perplexity` and `weft demo` are built on.
//
//   weft::Session s({.model = "m.gguf", .devices = {"cpu", "rpc://10.0.0.2:50052"}});
//   const weft::LoadPlan plan = s.plan(512);      // who holds what; nothing loaded yet
//   s.load(512, [](size_t done, size_t total) { ... });
//   std::vector<int32_t> prompt = s.tokenizer().encode("Once upon a time", true);
//   s.generate(prompt, {.max_tokens = 64}, [&](int32_t t) {
//     std::cout << s.tokenizer().decode_token(t) << std::flush;
//     return true;                                // false stops
//   });
//
// Layers go to the devices in order (device 0 also holds the token
// embedding, the last the output), by options.split when given, else by the
// placement policy (default: where the predicted time per token is least,
// from a short probe of each device at connect; docs/placement.md). The Session
// owns the devices and, once loaded, the Executor that runs the model on
// them (its backends and, when split, its Scheduler: weft/runtime/
// executor.h). Not thread-safe: one caller at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/model/model.h"
#include "weft/model/perplexity.h"
#include "weft/model/sampler.h"
#include "weft/model/tokenizer.h"
#include "weft/rpc/client.h"
#include "weft/runtime/devices.h"
#include "weft/runtime/executor.h"
#include "weft/runtime/generate.h"
#include "weft/runtime/placement.h"
#include "weft/runtime/rejoin.h"

namespace weft {

struct RecoveryReport;
struct RejoinReport;

struct SessionOptions {
  std::string model;                          // GGUF file
  std::vector<std::string> devices{"cpu"};    // device specs (weft/runtime/devices.h), in layer order
  std::string split;                          // "a,b,..." one weight per device; empty: placement
  // How the devices share the model: by layers (a pipeline; split weighs
  // the layers, or the placement policy chooses), or by heads (tensor
  // parallelism: every device computes its share of every layer, its
  // key/value heads and feed-forward columns in proportion to split's
  // weights, or equal shares; devices beyond the key/value heads take
  // feed-forward columns only; docs/placement.md); or whichever of the two the probe's speeds
  // predict the faster (automatic: layers by speed, or every layer cut by
  // heads in proportion to each device's speed; layers when there are no
  // speeds or the heads cannot be cut).
  enum class SplitMode { layer, tensor, automatic };
  SplitMode split_mode = SplitMode::layer;
  // Experts spread over devices (docs/experts-split.md): "a,b,..." one
  // weight per device; each mixture-of-experts layer's experts cut in those
  // proportions (model::LoadOptions::expert_split). The layers' other
  // weights go where split or placement puts them; with neither, all on the
  // first device (this host routes every token). Empty: experts stay with
  // their layer.
  std::string experts_split;
  std::shared_ptr<const PlacementPolicy> placement;  // when split is empty; null: by speed (see probe)
  // With two or more devices, measure each at connect (runtime/probe.h: a
  // fraction of a second each) for the default placement, split_by_speed(),
  // and the plan's predicted times. false, or a failed probe: no
  // prediction, and the default placement is split_by_free_memory().
  bool probe = true;
  // The speed placement's goal: false, one sequence's time per token (the
  // stages take turns); true, the slowest stage's (several sequences in
  // flight keep every stage busy: `weft run --parallel`).
  bool pipelined = false;
  DeviceOptions device_options;               // CPU threads, RPC options
  model::LoadOptions load;                    // weights in place on the host CPU, or copied
  std::string name = "session";               // names the caller in errors: "[run] ..."
  // When a worker holding part of the model dies during generate(),
  // generate_parallel() or the steps of batched_eval() (`weft serve`) (an
  // Error(disconnected), and its connection no longer answers): re-place
  // the model over the devices left, load it there, re-evaluate the tokens
  // so far and go on, the samplers' state untouched (docs/recovery.md).
  // false: the error ends the generation.
  bool recover = false;
  // Called after each recovery (on the thread that runs the model). After
  // a batched step's, tokens_reevaluated and reprefill_seconds are 0: each
  // sequence re-evaluates its own within the next steps
  // (BatchCounters::replayed_tokens).
  std::function<void(const RecoveryReport&)> on_recovery;
  // With recover: the workers lost are probed in the background, and when
  // every one of them answers again at its address, generate() weighs a
  // move back at its next token (RejoinEstimate) and, when it pays, places
  // the model over all the devices again, loads it (a worker's tensor cache
  // makes the weights it kept cheap) and re-evaluates the history
  // (docs/recovery.md "Rejoin"). Called when the model moves back, and once
  // when a return is first declined, on the thread that runs the model.
  std::function<void(const RejoinReport&)> on_rejoin;
};

// One device's share of a plan.
struct DevicePlan {
  std::string label;        // DeviceSpec::label(): "host", "10.0.0.2:50052"
  std::string device_name;  // Device::name()
  model::PartPlan part;     // its layers, weight and KV cache bytes
  size_t free_bytes = 0;    // what the device reported (0: unknown)
  DeviceSpeed speed;        // what the probe measured (zeros: not probed)
  // Predicted seconds per generated token (predict_time; 0: no prediction):
  // its layers' compute, and the hops into it.
  double predicted_seconds = 0;
  double predicted_link_seconds = 0;
  // Device::description(): a worker's own words about its device inside
  // ("CPU on worker H:P (host CPU, avx2 kernels, 4 threads)").
  std::string description;
  // Weights plus KV cache, saturated at SIZE_MAX.
  size_t need_bytes() const;
  // Whether it fits: true when the device reports no free memory.
  bool fits() const { return free_bytes == 0 || need_bytes() <= free_bytes; }
};

struct LoadPlan {
  int64_t n_ctx = 0;
  DType cache_type = DType::f16;  // SessionOptions::load.cache_type
  int64_t sliding_ring_rows = 0;  // rows a sliding-window layer keeps (0: n_ctx; model::sliding_ring_rows)
  std::string policy;  // PlacementPolicy::describe(), and why the default fell back to free memory
  // Predicted seconds per generated token, every stage and hop (0: none).
  double predicted_seconds = 0;
  // Of the devices' predicted times, what runs at once (expert slices), so
  // predicted_seconds is their sum less this.
  double predicted_overlap_seconds = 0;
  std::vector<DevicePlan> devices;
  // Takes a prediction (predict_time, predict_tensor_time) of these
  // devices, measured at speeds: the totals and each device's share.
  void set_prediction(const TimePrediction& t, std::span<const DeviceSpeed> speeds);
  // "" when every share fits, else the first that does not, as a sentence
  // ("10.0.0.2:50052 has 8.0 KiB free but its share needs 1.2 MiB").
  std::string problem() const;
};

// What a recovery did (SessionOptions::recover).
struct RecoveryReport {
  std::vector<std::string> lost;  // DeviceSpec::label() of each device lost
  std::string cause;              // the error that revealed the loss
  LoadPlan plan;                  // the placement over the devices left
  int64_t tokens_reevaluated = 0;  // the history the lost KV cache was rebuilt from
  double reload_seconds = 0;       // detecting, re-planning and loading the weights again
  double reprefill_seconds = 0;    // re-evaluating the history
};

// What a rejoin did or why it did not (SessionOptions::on_rejoin).
struct RejoinReport {
  std::vector<std::string> rejoined;  // DeviceSpec::label() of each worker that answered again
  RejoinEstimate estimate;            // the rule's inputs
  bool moved = false;                 // estimate.pays() (or idle): the model was placed again with them
  bool idle = false;                  // weighed between batched steps with nothing in flight: no rule, moved when it fits
  // Weighed between batched steps (BatchedEval::rejoin): the estimate is
  // per round (a busy sequence's time between two of its tokens), and the
  // sequences re-evaluate what they had in the engine's next steps
  // (tokens_reevaluated and reprefill_seconds stay 0).
  bool batched = false;
  // Workers removed (Session::remove_workers) and taken out in this move:
  // then rejoined is empty, and declined says why they stay when it fails.
  std::vector<std::string> removed;
  std::string declined;               // why not, when not moved ("" when moved)
  LoadPlan plan;                      // when moved: the placement over every device
  int64_t tokens_reevaluated = 0;
  double reload_seconds = 0;     // re-planning and loading with them
  double reprefill_seconds = 0;  // re-evaluating the history
};

// One device's traffic (zeros for a local device): the totals of the
// connection to its worker, which the worker's devices share (two devices of
// one worker report the same figures).
struct DeviceStats {
  std::string label;
  bool remote = false;
  RpcStats rpc;
};

// What one device has computed: totals to compare between two calls of
// Session::compute_stats(). A worker's are its device's for this process's
// session (COMPUTE_STATS, protocol 1.6), this CPU's all of this process's
// CPU kernels (cpu_compute_stats()). seconds < 0: unknown (a worker older
// than 1.6, another kind of device).
struct DeviceCompute {
  double seconds = -1;
  uint64_t graphs = 0;
};

// "512 B", "8.0 KiB", "106.9 MiB", "21.4 GiB": for plans and messages.
std::string format_bytes(size_t bytes);

class Session {
 public:
  // Opens the file, reads its tokenizer and parameters, opens (connects to)
  // the devices. Throws Error(invalid_input) for a bad file or spec,
  // Error(disconnected) for a worker it cannot reach.
  explicit Session(SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  const model::LlamaParams& params() const { return params_; }
  // Weight bytes the host CPU uses in place from the mapped file
  // (SessionOptions::load); 0 before load() or when copied.
  size_t mapped_weight_bytes() const;
  const SessionOptions& options() const { return options_; }

  // Where each layer would go with a KV cache of n_ctx positions, and what
  // each device would hold, after checking every tensor the model reads
  // (the errors load() would raise). Loads nothing; asks each device its
  // free memory once per call.
  LoadPlan plan(int64_t n_ctx) const;
  // Loads a plan this Session made (so what was shown is what is loaded):
  // refuses it with Error(out_of_memory) naming the device when a share
  // does not fit, then copies the weights (progress after each tensor) and
  // allocates the KV cache. Once; the file closes after.
  void load(const LoadPlan& plan, const model::LoadProgress& progress = {});
  // load(plan(n_ctx)); returns that plan.
  LoadPlan load(int64_t n_ctx, const model::LoadProgress& progress = {});
  bool loaded() const { return executor_ != nullptr; }
  int64_t n_ctx() const;

  // Logits of every token (token-major, n * n_vocab floats) for tokens at
  // positions n_past..; writes their keys and values into the KV cache.
  // LogitRows::last: the last token's only (n_vocab floats), the output
  // product computed for it alone.
  std::vector<float> eval(std::span<const int32_t> tokens, int64_t n_past,
                          model::LogitRows rows = model::LogitRows::all);

  // One step over several sequences (Executor::eval_batch: n_seq parts
  // of the KV cache, one per sequence); the logits of the tokens marked
  // `logits`, in batch order.
  // LogitRows::hidden: the hidden states after the output norm instead
  // (n_embd floats per marked token: embeddings).
  void eval_batch(std::span<const model::BatchToken> batch, int64_t n_seq, std::vector<float>& logits,
                  model::LogitRows rows = model::LogitRows::all);
  // Steps of eval_batch pipelined over the devices (Executor::
  // batch_slots, submit_batch, finish_batch: up to batch_slots() steps in
  // flight, finished in the order submitted); 1 slot on one device.
  int batch_slots() const;
  void submit_batch(int slot, std::span<const model::BatchToken> batch, int64_t n_seq);
  void finish_batch(int slot, std::vector<float>& logits);
  void reserve_batch(int64_t n_tokens, int64_t n_out);  // Executor::reserve_batch
  // The loaded model as the generation loops see it (weft/runtime/
  // batch_engine.h): its batched steps (submit_batch, finish_batch,
  // reserve_batch), and its vocabulary, context and end-of-generation
  // tokens. Both refer to this Session, which must outlive them.
  BatchedEval batched_eval();
  GenerationModel generation_model() const;

  // Generation from position 0 (run_generation() with this model's eval
  // and end-of-generation tokens). The prompt and up to max_tokens - 1
  // generated tokens must fit n_ctx.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                          const TokenCallback& on_token = {});

  // Several prompts generated together (run_parallel_generation over
  // Executor::submit_batch): n_ctx() must divide into one part per
  // prompt; over several stages the sequences' steps are pipelined.
  std::vector<GenerateResult> generate_parallel(std::span<const std::vector<int32_t>> prompts,
                                                const GenerateOptions& options,
                                                const SequenceTokenCallback& on_token = {});

  // Perplexity over n_chunks chunks of n_ctx() tokens (chunked_perplexity;
  // each chunk's first token replaced by bos when the model adds one).
  model::PerplexityScore perplexity(std::span<const int32_t> tokens, int64_t n_chunks,
                                    const std::function<void(int64_t, const model::PerplexityScore&)>& on_chunk = {});

  // Recoveries so far (SessionOptions::recover), and the devices they
  // dropped that are not back (DeviceSpec::label(), in the order lost).
  int recoveries() const { return recoveries_; }
  const std::vector<std::string>& lost_devices() const { return lost_devices_; }
  // Rejoins that moved the model back onto returning workers.
  int rejoins() const { return rejoins_; }
  // Workers named after construction (`weft serve`'s workers file, re-read
  // on SIGHUP): each rpc spec not among the devices as constructed joins
  // them as one not yet placed; the rejoin watch probes it, and the model
  // moves onto it as onto a lost worker back (rejoin_batched: `weft serve`
  // when idle; its speed is probed then). Returns the labels added (none
  // for specs known already). Throws Error(invalid_input) for a spec that
  // is not a worker, and with --split or --experts-split (their shares
  // name every device), adding none. Not thread-safe (the model's thread).
  std::vector<std::string> add_workers(const std::vector<DeviceSpec>& specs);
  // The placement in force (the last load's: after a recovery or a rejoin,
  // theirs) and the devices it places, in its order.
  const LoadPlan& loaded_plan() const { return loaded_plan_; }
  const std::vector<DeviceSpec>& device_specs() const { return specs_; }
  // Workers added and not yet taken in (DeviceSpec::label()).
  const std::vector<std::string>& joining_devices() const { return joining_devices_; }
  // Workers taken out of the devices as constructed (`weft serve`'s
  // workers file re-read without them; session_depart.cpp). One lost or
  // not yet taken in is forgotten at once (no longer probed); one in the
  // placement is marked leaving and leaves at depart_idle(). Returns the
  // labels removed or leaving (none for specs that are not devices).
  // Throws Error(invalid_input), removing none, with --split or
  // --experts-split (their shares name every device). Not thread-safe.
  std::vector<std::string> remove_workers(const std::vector<DeviceSpec>& specs);
  const std::vector<std::string>& leaving_devices() const { return leaving_devices_; }
  // With nothing in flight and no job running (`weft serve` idle): the
  // model placed and loaded over the devices without the leaving ones,
  // which are then closed (their workers free what they held); each slot's
  // cache is lost. SessionOptions::on_rejoin hears of it (RejoinReport::
  // removed). When the devices left cannot hold the model (free memory is
  // asked while it is still loaded), or none would be left, nothing
  // changes, the report says why and they stay (no longer leaving). The
  // new model's slots after the move, else 0. Throws what the load throws
  // (a remaining worker lost part-way): then BatchedEval::recover.
  int depart_idle();

  // Per device, in device order.
  std::vector<DeviceStats> stats() const;
  // Per device, in device order. A round trip to each worker, after the
  // work it was given: call it from the thread that runs the model.
  std::vector<DeviceCompute> compute_stats() const;

 private:
  // session_place.cpp: the probe at connect, and the bounds and policy
  // description for a plan.
  void probe_devices();
  PlacementInput placement_input(const std::vector<size_t>& free_bytes, int64_t n_ctx) const;
  std::vector<int64_t> bounds(const PlacementInput& in, std::string& policy) const;
  // plan()'s three ways (session.cpp, session_place.cpp): by layers; cut
  // by heads (groups: each group's weights, '/' in --split; empty: the
  // split option's, else equal shares); the faster of the two predicted.
  LoadPlan plan_by_layers(int64_t n_ctx, const std::vector<size_t>& free_bytes) const;
  LoadPlan plan_by_heads(int64_t n_ctx, const std::vector<size_t>& free_bytes,
                         std::vector<std::vector<double>> groups = {}) const;
  LoadPlan plan_by_prediction(int64_t n_ctx, const std::vector<size_t>& free_bytes) const;
  // session_recover.cpp: after cause, drops the devices whose workers no
  // longer answer, loads the model over the rest and re-evaluates history
  // from position 0 into logits (its last token's). false, having changed
  // nothing, when every device still answers (cause was not a loss);
  // throws when nothing is left or the rest cannot hold the model.
  bool recover(const Error& cause, std::span<const int32_t> history, std::vector<float>& logits);
  // The part of a recovery both paths share: drops the devices that no
  // longer answer and loads the model over the rest (report: lost, cause,
  // plan, reload_seconds). false when every device answers; throws when
  // nothing is left or the rest cannot hold the model.
  bool replace_lost(const Error& cause, RecoveryReport& report);
  // BatchedEval::recover for batched_eval(): the new model's slots, or 0.
  int recover_batched(const std::exception& cause);
  void drop_devices(const std::vector<size_t>& lost);
  // session_rejoin.cpp. At a token boundary of generate() with remaining
  // tokens at most still to come: when every lost worker answers again and
  // the rule says the move pays, places and loads the model over every
  // device again and re-evaluates history_ (which ends with the token to
  // evaluate next) into logits; true then. false, changing nothing, when
  // there is no rejoin to make or it does not pay.
  bool try_rejoin(int64_t remaining, std::vector<float>& logits);
  // BatchedEval::rejoin for batched_eval(): called with nothing in flight.
  // running null (`weft serve` idle): each lost worker that answers again
  // is taken back (the others stay out, probed still), the model placed and
  // loaded over the devices then present (no rule to weigh: no request
  // waits on the move). running set (`weft run --parallel` between steps):
  // every lost worker must answer, and the move is made when
  // running->pays(), a decline reported once. The new model's slots after
  // a move, else 0. Throws what the load throws (a returning worker gone
  // again part-way: the model is unloaded, BatchedEval::recover places it
  // again).
  int rejoin_batched(const RejoinEstimate* running);
  // BatchedEval::rejoin_ready: every lost worker answers again.
  bool every_lost_worker_answers() const;
  // The move: the lost devices at back (places in all_specs_, ascending)
  // join the present ones, the shares and speeds as constructed less those
  // still missing; false, changing nothing, when one cannot be opened or
  // the placement with them does not fit.
  bool move_back(RejoinReport& report, const std::vector<size_t>& back);
  std::vector<size_t> missing_devices() const;  // places in all_specs_ of the devices lost now
  RejoinEstimate rejoin_estimate(int64_t remaining) const;
  void note_decode_seconds(double seconds);  // one decoded token's eval on the current placement

  SessionOptions options_;
  std::vector<DeviceSpec> specs_;
  std::unique_ptr<GgufFile> file_;  // closed after load()
  std::unique_ptr<model::Tokenizer> tokenizer_;
  model::LlamaParams params_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<DeviceSpeed> speeds_;  // per device, when every probe succeeded
  std::string probe_failure_;        // why not, when a probe failed
  int recoveries_ = 0;
  std::vector<std::string> lost_devices_;
  std::vector<std::string> joining_devices_;  // add_workers' not yet taken in
  std::vector<std::string> leaving_devices_;  // remove_workers' still in the placement (labels)
  // Probes the devices at places (in devices_) whose speed is not measured
  // (workers added since construction); a failure drops every speed.
  void probe_joined(const std::vector<size_t>& places);
  // What a rejoin restores: the devices, speeds and shares as constructed.
  std::vector<DeviceSpec> all_specs_;
  std::vector<DeviceSpeed> all_speeds_;
  std::string all_split_, all_experts_split_;
  int64_t n_ctx_loaded_ = 0;  // the last load's
  LoadPlan loaded_plan_;      // the last load's
  // Decoded tokens' eval time on the current placement, a moving average
  // (reset by load()), and on every device (kept from before the first
  // loss: -1 unknown).
  double decode_seconds_ = 0;
  int64_t decode_tokens_ = 0;
  double full_seconds_per_token_ = -1;
  // The last recovery's costs, the base of the predicted move back.
  double last_reload_seconds_ = 0, last_reprefill_seconds_ = 0;
  int64_t last_reprefill_tokens_ = 0;
  bool rejoin_noted_ = false;  // on_rejoin told that the move back is declined
  int rejoins_ = 0;
  std::unique_ptr<RejoinWatch> watch_;  // started at the first loss
  // The tokens in the KV cache from position 0, as the single-sequence
  // evals wrote them (eval, generate): what a recovery re-evaluates, so a
  // generation continuing an earlier one (`weft chat`) recovers too.
  // Unknown after a batch over sequences, or an eval past what is known.
  void note_history(std::span<const int32_t> tokens, int64_t n_past);
  void forget_history() {
    history_.clear();
    history_known_ = false;
  }
  std::vector<int32_t> history_;
  bool history_known_ = false;
  std::unique_ptr<Executor> executor_;  // declared after the devices it uses: destroyed first
};

}  // namespace weft
