// The one batched-generation engine: several sequences decoded together
// over a model that keeps steps in flight (BatchedEval: Executor::
// submit_batch / finish_batch). `weft run --parallel` (run_parallel_
// generation) and `weft serve` (serve::Engine) both drive it; neither has a
// step loop of its own.
//
// The KV cache is cut into `slots` parts, one sequence each. A job started
// goes to the free slot whose cached tokens share the longest prefix with
// its prompt (a conversation's next turn re-evaluates only what is new).
// Each step is one batched graph: a token for every slot that is
// generating, then prompt chunks within batch_tokens. Over several stages
// (BatchedEval::slots > 1) the slots form that many groups (slot i in group
// i % groups), each group's step in flight at once with the others', so that
// while one device works on a group's step the next works on another's.
// Each sequence samples its rows with its own sampler and stops exactly as
// run_generation would stop it alone (so greedy sequences equal their own
// single runs).
//
//   BatchEngine engine(session.batched_eval(), session.generation_model(), {.slots = 4});
//   engine.start(std::move(job), &sink);   // sink: on_token, cancelled, on_finish
//   while (engine.busy()) engine.advance();
//
// With a draft model (BatchEngineOptions::draft, `weft serve --model-draft`):
// a step that would carry a single generating sequence — one slot busy, its
// prompt fed, no grammar, no other step in flight — is a speculative round
// instead (weft/runtime/speculative.h): the draft proposes up to draft_max
// tokens, the step evaluates the sequence's next token and the proposals,
// and the sequence keeps the longest run the target agrees with plus one
// token of its own (the accept/reject rule, speculative_pick). With two or
// more sequences busy the steps are plain batched ones: greedy output is
// the same either way (docs/speculative.md).
//
// Not thread-safe: one thread drives it (serve::Engine's own thread; the
// caller of run_parallel_generation). The sinks are called on that thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/model/sampler.h"
#include "weft/runtime/generate.h"
#include "weft/runtime/rejoin_estimate.h"

namespace weft {

// One sequence's work: its prompt, evaluated from the slot's position 0
// (what the slot already holds of it is reused), and how to generate after
// it (GenerateOptions::start must be 0). max_tokens 0 evaluates the prompt
// (its keys and values stay in the slot's cache) and samples nothing.
struct BatchJob {
  std::vector<int32_t> prompt;
  GenerateOptions options;
};

// How a job ended (BatchSink::on_finish).
struct BatchEnd {
  StopReason stop = StopReason::max_tokens;
  std::string error;        // with StopReason::failed
  int prompt_tokens = 0;
  int cached_tokens = 0;    // prompt tokens reused from the slot's cache
  int generated = 0;        // tokens handed to on_token
  int drafted = 0;          // draft tokens the target judged for this job (speculative rounds)
  int accepted = 0;         // of those, kept
  double prompt_seconds = 0;  // start() to the prompt's logits
  double total_seconds = 0;   // start() to the end
};

// A job's owner. Called on the thread that drives the engine.
class BatchSink {
 public:
  virtual ~BatchSink() = default;
  // token, sampled from row (the model's logits for it: the sampler never
  // writes them), is the job's next; false ends the job after it
  // (StopReason::callback). A throw ends the job (StopReason::failed).
  virtual bool on_token(int32_t token, std::span<const float> row) = 0;
  // Asked between the job's steps: true ends it (StopReason::cancelled).
  virtual bool cancelled() { return false; }
  // The end, once, last: the engine forgets the sink after it returns.
  virtual void on_finish(const BatchEnd& end) = 0;
};

// A draft model for speculative rounds: one sequence's cache on this host
// (positions 0.., at least a slot's context), evaluated by eval (the last
// row's logits: EvalFn). Its vocabulary must be the target's
// (check_same_vocabulary; the engine checks only n_vocab).
struct BatchDraft {
  EvalFn eval;
  GenerationModel model;
  int draft_max = 8;  // tokens proposed per round, 1 to 511
};

struct BatchEngineOptions {
  int slots = 1;           // sequences decoded together; must divide the model's n_ctx
  int batch_tokens = 256;  // prompt tokens per step, across the slots it carries (decode tokens come first)
  // Over several stages, the slots' groups in flight at once; false: one
  // step of every slot at a time (for comparison).
  bool pipelined = true;
  // Once no slot has prompt tokens left to feed: true, one step of every
  // slot at a time (a decode step reads every weight once however many
  // slots it carries: what `weft serve` does, whose requests come and go);
  // false, the groups stay in flight at once, so every stage works on some
  // group's step while the host samples another's (what `weft run
  // --parallel` does).
  bool decode_together = true;
  // Speculative rounds while one sequence runs (see above); empty eval: none.
  BatchDraft draft;
};

// Counters, monotonic (BatchEngine::counters).
struct BatchCounters {
  uint64_t prompt_tokens = 0;     // evaluated (cached ones not counted)
  uint64_t generated_tokens = 0;  // sampled rows
  uint64_t steps = 0;             // steps finished
  uint64_t embed_steps = 0;       // steps of hidden_states (not in steps)
  double busy_seconds = 0;        // in advance(): finishing, sampling, submitting
  double grammar_seconds = 0;     // of which masking by and following grammars (jobs finished)
  uint64_t recoveries = 0;        // recover() that recovered
  uint64_t rejoins = 0;           // rejoin() that moved the model back over its lost workers
  uint64_t replayed_tokens = 0;   // tokens evaluated again after them (also in prompt_tokens)
  uint64_t speculative_steps = 0; // steps that were speculative rounds (also in steps)
  uint64_t drafted = 0;           // draft tokens the target judged in them
  uint64_t accepted = 0;          // of those, kept
};

class BatchEngine {
 public:
  // Throws Error(invalid_input) when slots < 1 or does not divide
  // model.n_ctx, batch_tokens < 1, or eval has no slots; with a draft, for
  // draft_max outside 1..511, another n_vocab, or a context smaller than a
  // slot's. With several
  // groups, eval.reserve (when set) sizes every memory set once for the
  // largest step: a buffer grown while steps are in flight would be a call
  // to a worker, which answers only after the work queued before it.
  BatchEngine(BatchedEval eval, GenerationModel model, BatchEngineOptions options);
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // Throws Error(invalid_input) naming what is wrong with job: an empty
  // prompt or one longer than a slot's context, a token outside the
  // vocabulary, max_tokens < 0, start != 0, an impossible sampler option.
  // Reads only what the constructor set: callable from any thread.
  void check(const BatchJob& job) const;
  // Whether start() has a slot to give (none busy and none in a step).
  bool has_free_slot() const;
  // Checks the job and starts it in a free slot (see above); sink must
  // live until its on_finish. Throws Error(invalid_input) for a bad job or
  // when no slot is free.
  void start(BatchJob job, BatchSink* sink);

  // The two halves of a round, for a driver that admits jobs between them:
  // collect() finishes the oldest step in flight and samples its rows, then
  // ends the jobs whose sinks say cancelled (between their steps); false
  // when nothing was in flight. launch() submits every step that has work
  // (its group not in flight); false when it submitted none. Both throw
  // what the model throws (a worker died): then call fail_all().
  bool collect();
  bool launch();
  // collect() then launch(); false when neither did anything.
  bool advance();

  // After a throw: finishes what is still in flight (dropping its logits),
  // ends every job with StopReason::failed and error, and forgets every
  // slot's cache (its state is unknown). The engine takes jobs again.
  void fail_all(const std::string& error);
  // After collect() or launch() threw cause: when BatchedEval::recover
  // recovers the model (a lost worker's share placed again over the
  // devices left, the KV cache empty), forgets every slot's cache and has
  // each job evaluate again its prompt and the tokens it has generated, its
  // sampler and what it has emitted untouched; the next steps then sample
  // its next token as if nothing had happened (greedy output unchanged).
  // The groups follow the recovered model's slots. false, changing nothing
  // but the steps in flight (finished, their logits dropped), when there is
  // no recover or it did not recover: then call fail_all(). Never throws:
  // why a recovery that was tried failed is recovery_error() (else empty).
  bool recover(const std::exception& cause);
  const std::string& recovery_error() const { return recovery_error_; }
  // Between jobs (none busy, nothing in flight): BatchedEval::rejoin takes
  // back lost workers that answer again; every slot's cache is forgotten
  // and the groups follow the model's slots. true when the model moved.
  // When the move fails part-way it recovers (recover()) and returns false;
  // throws Error(disconnected) naming why when that recovery fails too
  // (the model is then unloaded: the next steps fail their jobs).
  bool rejoin();
  // Between jobs (none busy, nothing in flight): the model was placed again
  // by its owner (Session::depart_idle, `weft serve` taking a removed worker
  // out) and keeps model_slots steps in flight: every slot's cache is
  // forgotten and the groups follow. Throws Error(invalid_input) while a
  // job runs or a step is in flight; what the reserve throws.
  void placement_replaced(int model_slots);
  // While jobs run (`weft run --parallel`, between advance() calls): when
  // every lost worker answers again (BatchedEval::rejoin_ready), weighs the
  // move back by the rule of weft/runtime/rejoin.h, per round (a busy
  // sequence's time between two of its tokens) instead of per token:
  // measured since the placement last changed, against the same measured
  // on the placement with every device at the first loss; rounds left, the
  // most any busy job still has to generate; the move's cost, the last
  // recovery's reload plus its replay time scaled to the tokens the jobs
  // hold now (running_estimate()). When it pays, the steps in flight finish
  // (their tokens kept), BatchedEval::rejoin(&estimate) moves the model,
  // and every job evaluates again what it had, as after recover(). true
  // when the model moved. Throws as collect() does, or, when a failed move
  // cannot be recovered, as rejoin().
  bool rejoin_running();
  // The rule's inputs now (see rejoin_running; seconds_per_token_with < 0:
  // not measured before the first loss).
  RejoinEstimate running_estimate() const;
  // Ends every job with StopReason::cancelled after finishing the steps in
  // flight (a driver shutting down).
  void cancel_all();

  // Embeddings, outside any job: evaluates each input from position 0 in a
  // free slot of its own (those with the fewest cached tokens first),
  // batched as prompts are: as many inputs at once as slots are free, up to
  // batch_tokens tokens a step (an encoder's inputs whole, each in one
  // step, however long: its tokens attend both ways). Returns each input's
  // hidden states after the output norm, token-major (its size * n_embd
  // floats). Each slot's cache then holds its last input's tokens (a later
  // prompt sharing their prefix reuses them). Only with no step in flight
  // (collect() until it returns false) and a free slot. `stop`, when set,
  // is asked before each step: true ends the work there (a deadline
  // passed, the client left) and returns nullopt, the slots it used
  // holding no cache. Throws Error(invalid_input) for no inputs, an input
  // check() would refuse, no free slot, a step in flight or an eval
  // without `hidden`; and what the model throws (then those slots' caches
  // are forgotten; call fail_all() or recover() as after a step).
  std::optional<std::vector<std::vector<float>>> hidden_states(std::span<const std::vector<int32_t>> inputs,
                                                               const std::function<bool()>& stop = {});
  // Whether a step is in flight.
  bool stepping() const { return !in_flight_.empty(); }

  bool busy() const;  // a job started and not yet finished
  int slots_busy() const;
  int slots() const { return options_.slots; }
  int groups() const { return n_groups_; }
  int64_t slot_context() const { return slot_ctx_; }
  const BatchCounters& counters() const { return counters_; }

 private:
  struct Slot;
  // A group's step: the tokens it carries, the slot of each logits row
  // (null: a row asked for only because a step needs one), and the slots
  // whose tokens it carries.
  struct Group {
    std::vector<model::BatchToken> batch;
    std::vector<Slot*> rows;
    std::vector<Slot*> members;
    uint64_t prompt_tokens = 0;
    bool in_flight = false;
  };
  // group's slots (every idle slot when all) into groups_[group]; false
  // when it has nothing to compute.
  bool build(int group, bool all);
  void submit_step(int group);
  void end_step(Group& g);  // its slots are idle again
  void drain();             // finishes every step in flight, dropping its logits
  // hidden_states' steps for inputs, each in its slot, rows into out.
  // False when stop ended it.
  bool embed_group(std::span<const std::vector<int32_t>> inputs, std::span<Slot* const> slots,
                   std::span<std::vector<float>> out, const std::function<bool()>& stop);
  void take_row(Slot& s, std::span<const float> row);  // the slot's logits came
  void end(Slot& s, StopReason stop, const std::string& error = "");
  // batch_speculative.cpp. The speculative round's slot and how many tokens
  // it may draft now (0: a plain step).
  Slot* speculative_slot(int& k) const;
  // Builds groups_[0] as a speculative round for s: the draft's proposals,
  // then s's next token and them, every row's logits.
  void build_speculative(Slot& s, int k);
  void propose(Slot& s, int k);  // the draft catches up with s and proposes k tokens
  void take_speculative_rows(Slot& s, std::span<const float> logits);  // judges the round's rows
  void check_draft() const;
  void set_groups(int model_slots);  // n_groups_ and groups_ for a model keeping model_slots steps in flight
  // set_groups, and when its reserve meets a lost worker and
  // eval_.recover recovers the model, again over the recovered model (a
  // worker dead before the first step). Throws what stands.
  void set_groups_recovering(int model_slots);
  // batch_recovery.cpp: the placement changed (a loss, a move back): every
  // busy job evaluates again its prompt and the tokens it generated.
  void replay_jobs();
  void placement_lost();          // a recovery: the times measured so far belong to the placement before it
  void note_token_time(Slot& s);  // s sampled a token (or ended during a replay)
  // eval_.rejoin(running); a throw recovered (0 then), or, when the
  // recovery fails too, Error(disconnected) naming both.
  int call_rejoin(const RejoinEstimate* running);

  // The rejoin rule's measurements (rejoin_running).
  struct PlacementTimes {
    double round_seconds = 0;        // a sequence's time between tokens: moving average, the newest 1/4
    int64_t rounds = 0;              // intervals in it, since the placement last changed
    double full_round_seconds = -1;  // the same with every device, as it stood at the first loss (-1: unknown)
    bool full = true;                // the placement in force holds every device
    double reload_seconds = 0;       // the last recovery's BatchedEval::recover
    double replay_seconds = 0;       // from its end until every job had its next token
    uint64_t replay_tokens = 0;      // what the jobs evaluated again then
    std::chrono::steady_clock::time_point replay_start;
    int replaying = 0;  // jobs still evaluating again what they had
  };

  BatchedEval eval_;
  GenerationModel model_;
  BatchEngineOptions options_;
  int64_t slot_ctx_ = 0;
  int n_groups_ = 1;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Group> groups_;
  std::deque<int> in_flight_;  // groups with a step in flight, in the order submitted
  std::vector<float> logits_;
  // The speculative round in flight (null: none), its proposals and the
  // draft's distribution for each (Sampler::distribution).
  Slot* speculating_ = nullptr;
  std::vector<int32_t> drafts_;
  std::vector<std::vector<model::Sampler::Choice>> draft_dists_;
  std::vector<int32_t> draft_cached_;  // tokens in the draft's cache from position 0, in order
  std::vector<float> draft_logits_;
  BatchCounters counters_;
  std::string recovery_error_;
  PlacementTimes times_;
};

}  // namespace weft
