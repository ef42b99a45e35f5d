// The draws both speculative loops make (run_speculative_generation,
// speculative.cpp; BatchEngine's rounds, batch_speculative.cpp): shared so
// that a sequence speculating alone or in `weft serve` draws alike.
// Internal to weft_runtime; defined in speculative_pick.cpp.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "weft/model/sampler.h"

namespace weft::detail {

// Uniform in [0, 1) from the generator's top 53 bits.
double speculative_uniform(std::mt19937_64& rng);

// One id from a distribution (Sampler::distribution: probabilities summing
// to 1), v uniform in [0, 1); the last id when rounding leaves the walk
// short. d must not be empty.
int32_t draw_from(std::span<const model::Sampler::Choice> d, double v);

}  // namespace weft::detail
