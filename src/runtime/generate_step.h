// What the generation loops (run_generation, run_parallel_generation) do
// with one sampled token; shared so that one sequence of a parallel run
// stops exactly where a run of it alone would.
#pragma once

#include <optional>

#include "weft/runtime/generate.h"

namespace weft::detail {

// Takes `next`, sampled for a sequence at position n_past (the position it
// would be evaluated at): stops at an end-of-generation or stop token (not
// emitted); else accepts it into the sampler, appends it to r.tokens and
// hands it to emit (which may be empty), then stops when emit said so, at
// max_tokens, or when no position is left (n_past >= n_ctx). nullopt: go on
// and evaluate it at n_past.
std::optional<StopReason> take_token(int32_t next, int64_t n_past, int64_t n_ctx, const GenerationModel& model,
                                     const GenerateOptions& options, model::Sampler& sampler, GenerateResult& r,
                                     const TokenCallback& emit);

}  // namespace weft::detail
