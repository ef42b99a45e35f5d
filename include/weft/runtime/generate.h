// The generation loop, apart from any model: prompt, then one token at a
// time, sampled, handed to a callback, until a stop condition. The Session
// runs it over its model; tests run it over any eval function.
//
//   GenerateResult r = weft::run_generation(eval, {.n_vocab = v, .n_ctx = 512}, prompt,
//                                           {.max_tokens = 32}, on_token);
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "weft/model/grammar.h"
#include "weft/model/model.h"
#include "weft/model/sampler.h"

namespace weft {

struct RejoinEstimate;  // weft/runtime/rejoin.h

struct GenerateOptions {
  int max_tokens = 64;                  // tokens to generate, >= 0 (0: evaluate the prompt only)
  model::SamplerOptions sampler;        // default: greedy
  bool stop_at_end_of_generation = true;  // the model's end-of-generation tokens end it (not emitted)
  std::vector<int32_t> stop_tokens;     // more ids that end it (not emitted)
  // Positions already in the KV cache before the prompt (a conversation's
  // earlier turns): the prompt is evaluated at positions start.. and only
  // it. run_generation only; run_parallel_generation refuses non-zero.
  int64_t start = 0;
  // Constrained output (weft/model/grammar.h): when grammar is set, each
  // token is sampled among those the grammar allows after the tokens
  // before it (the others' logits taken as -inf; the end-of-generation
  // tokens only where the grammar may end), and generation ends with
  // StopReason::end_of_generation once nothing but the end may follow.
  // token_trie (the model's vocabulary, TokenTrie::from_tokenizer) must be
  // set with it and cover n_vocab tokens. The prompt is not matched.
  std::shared_ptr<const model::Grammar> grammar;
  std::shared_ptr<const model::TokenTrie> token_trie;
};

// Feeds the sampler's penalty window with the prompt's last
// repetition_window tokens, so that the penalties see the prompt as they
// see what is generated (llama.cpp's behaviour; the server's engine and both
// generation loops call it).
void accept_prompt_tail(model::Sampler& sampler, std::span<const int32_t> prompt);

enum class StopReason {
  max_tokens,         // max_tokens were emitted
  end_of_generation,  // the model's end-of-generation token came
  stop_token,         // one of options.stop_tokens came
  context_full,       // the next token would not fit n_ctx
  callback,           // on_token returned false
  // BatchEngine only (weft/runtime/batch_engine.h):
  cancelled,          // its owner cancelled it between steps
  failed,             // a step or its owner's callback threw
};
const char* stop_reason_name(StopReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // emitted, in order (never the stop token)
  StopReason stop = StopReason::max_tokens;
  double prompt_seconds = 0;    // the prompt's eval, up to the first token's logits
  double total_seconds = 0;     // every eval and sample
  double grammar_seconds = 0;   // of total_seconds, finding the tokens the grammar allows and following it
  // Tokens per second after the first (the decode speed); 0 below two tokens.
  double decode_tokens_per_second() const;
};

// Called with each emitted token; false stops after it.
using TokenCallback = std::function<bool(int32_t token)>;
// Evaluates tokens at positions n_past.. and writes the last one's logits
// (n_vocab floats) into logits, a vector the loop keeps between calls: a
// model that computes the output product for that token alone and writes
// in place allocates nothing per token (Session::generate: Executor::eval
// with LogitRows::last).
using EvalFn = std::function<void(std::span<const int32_t> tokens, int64_t n_past, std::vector<float>& logits)>;

struct GenerationModel {
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;  // positions the eval can hold
  std::function<bool(int32_t)> is_end_of_generation;  // null: none
  // An encoder (LlamaParams::encoder): no logits to generate from, and its
  // attention runs both ways, so an input's hidden states come from one
  // step holding all of it (BatchEngine::hidden_states).
  bool encoder = false;
};

// Evaluates the prompt at position options.start (0 unless continuing a
// conversation), then repeats: sample the last row,
// stop if it is an end-of-generation or stop token, emit it (on_token), stop
// at max_tokens or when the callback says so, stop when the context is
// full, else evaluate it at the next position. Throws Error(invalid_input)
// for an empty prompt, one that does not fit n_ctx after start, start < 0,
// max_tokens < 0, or an
// eval returning the wrong number of logits.
GenerateResult run_generation(const EvalFn& eval, const GenerationModel& model, std::span<const int32_t> prompt,
                              const GenerateOptions& options, const TokenCallback& on_token = {});

// Several sequences decoded together (`weft run --parallel`): a model that
// keeps up to `slots` steps in flight, each a batch over the sequences
// (Executor::submit_batch / finish_batch, whose contract this is).
struct BatchedEval {
  int slots = 1;
  std::function<void(int slot, std::span<const model::BatchToken> batch, int64_t n_seq)> submit;
  std::function<void(int slot, std::vector<float>& logits)> finish;
  // Optional: sizes every slot's memory for steps of up to n_tokens tokens
  // and n_out logit rows (Executor::reserve_batch).
  std::function<void(int64_t n_tokens, int64_t n_out)> reserve;
  // Optional: after submit or finish threw `cause`, tries to recover the
  // model (Session with SessionOptions::recover: the lost workers dropped,
  // the model placed and loaded again over the devices left, its KV cache
  // empty). Returns the slots of the model as it now is (steps in flight at
  // once), or 0 when it did not recover (cause stands). submit and finish
  // reach the recovered model from then on.
  std::function<int(const std::exception& cause)> recover;
  // Optional: with nothing in flight, takes back lost workers that answer
  // again (Session with SessionOptions::recover: the model placed and
  // loaded over every device again, its KV cache empty). running null: no
  // job waits (`weft serve` idle), each worker that answers is taken back.
  // running set: jobs will re-evaluate what they had after a move
  // (BatchEngine::rejoin_running), so the move is made only when every lost
  // worker answers and running->pays(), and a decline is reported once.
  // Returns the model's slots after a move, 0 when nothing moved (the model
  // and its cache untouched). May throw as submit does (a returning worker
  // gone again part-way): then recover.
  std::function<int(const RejoinEstimate* running)> rejoin;
  // Optional: whether every lost worker answers again (a rejoin with jobs
  // running has something to weigh). Cheap: asked between steps.
  std::function<bool()> rejoin_ready;
  // Optional: evaluates batch at once (nothing in flight) and writes the
  // hidden states after the output norm of the tokens marked `logits`
  // (n_embd floats each, in batch order) instead of logits: embeddings
  // (BatchEngine::hidden_states; Session: eval_batch with LogitRows::hidden).
  std::function<void(std::span<const model::BatchToken> batch, int64_t n_seq, std::vector<float>& rows)> hidden;
};
// Called with each emitted token of sequence seq; false stops that sequence.
using SequenceTokenCallback = std::function<bool(int seq, int32_t token)>;

// Generates for every prompt at once, through the one BatchEngine
// (weft/runtime/batch_engine.h; decode_together false). The KV cache is cut into one part per
// prompt (n_ctx / prompts.size() positions each; BatchToken). Sequence s
// goes in group s mod G, G = min(slots, prompts): one step per group carries
// its sequences' next tokens (first, their whole prompts), and the groups'
// steps are in flight together, so with G stages every device works on some
// group's step while the host samples another's. Each sequence samples with
// options.sampler and seed + s, and stops as run_generation would stop it
// alone (so greedy sequences equal their own single runs); a stopped one
// leaves its group's steps. Results in prompt order; prompt_seconds is when
// a sequence's first token was sampled, total_seconds when it stopped, both
// from the start of the call. Throws as run_generation does for each prompt
// (one that does not fit its part of the context) and for no prompts. When
// a step throws and eval.recover recovers the model, every sequence
// re-evaluates what it had and goes on (BatchEngine::recover).
std::vector<GenerateResult> run_parallel_generation(const BatchedEval& eval, const GenerationModel& model,
                                                    std::span<const std::vector<int32_t>> prompts,
                                                    const GenerateOptions& options,
                                                    const SequenceTokenCallback& on_token = {});

}  // namespace weft
