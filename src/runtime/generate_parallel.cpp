// Several sequences decoded together: run_parallel_generation
// (include/weft/runtime/generate.h), a fixed set of jobs for the one
// BatchEngine.
#include <algorithm>
#include <string>

#include "weft/core/error.h"
#include "weft/runtime/batch_engine.h"
#include "weft/runtime/generate.h"

namespace weft {
namespace {

constexpr const char* kGenerateParallelWhere = "generate";

// One sequence's result, filled as the engine calls back.
class SequenceSink final : public BatchSink {
 public:
  SequenceSink(int seq, const SequenceTokenCallback& on_token) : seq_(seq), on_token_(on_token) {}
  bool on_token(int32_t token, std::span<const float>) override {
    result.tokens.push_back(token);
    return !on_token_ || on_token_(seq_, token);
  }
  void on_finish(const BatchEnd& end) override {
    result.stop = end.stop;
    result.prompt_seconds = end.prompt_seconds;
    result.total_seconds = end.total_seconds;
    error = end.error;
  }
  GenerateResult result;
  std::string error;  // with StopReason::failed

 private:
  int seq_;
  const SequenceTokenCallback& on_token_;
};

}  // namespace

std::vector<GenerateResult> run_parallel_generation(const BatchedEval& eval, const GenerationModel& model,
                                                    std::span<const std::vector<int32_t>> prompts,
                                                    const GenerateOptions& options,
                                                    const SequenceTokenCallback& on_token) {
  if (prompts.empty()) fail(ErrorKind::invalid_input, kGenerateParallelWhere, "no prompts");
  const int n_seq = static_cast<int>(prompts.size());
  // Every group's first step carries its sequences' whole prompts.
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += static_cast<int64_t>(p.size());
  BatchEngineOptions eo;
  eo.slots = n_seq;
  eo.batch_tokens = static_cast<int>(std::clamp<int64_t>(prompt_tokens, 1, std::max<int64_t>(model.n_ctx, 1)));
  eo.decode_together = false;
  BatchEngine engine(eval, model, eo);

  std::vector<SequenceSink> sinks;
  sinks.reserve(prompts.size());
  std::vector<BatchJob> jobs;
  for (int s = 0; s < n_seq; ++s) {
    BatchJob job{prompts[static_cast<size_t>(s)], options};
    job.options.sampler.seed += static_cast<uint64_t>(s);
    engine.check(job);  // every prompt before any compute
    jobs.push_back(std::move(job));
    sinks.emplace_back(s, on_token);
  }
  for (int s = 0; s < n_seq; ++s) engine.start(std::move(jobs[static_cast<size_t>(s)]), &sinks[static_cast<size_t>(s)]);
  for (bool done = false; !done;) {
    try {
      while (engine.busy()) {
        engine.advance();
        engine.rejoin_running();  // lost workers that answer again, when taking them back pays
      }
      done = true;
    } catch (const std::exception& e) {
      if (engine.recover(e)) continue;  // every sequence re-evaluates what it had, then goes on
      engine.fail_all(e.what());
      if (!engine.recovery_error().empty())
        fail(ErrorKind::disconnected, kGenerateParallelWhere,
             std::string(e.what()) + "; recovery failed: " + engine.recovery_error());
      throw;
    }
  }
  std::vector<GenerateResult> out;
  out.reserve(sinks.size());
  for (SequenceSink& q : sinks) {
    if (q.result.stop == StopReason::failed) fail(ErrorKind::invalid_input, kGenerateParallelWhere, q.error);
    out.push_back(std::move(q.result));
  }
  return out;
}

}  // namespace weft
