// Layer placement for `weft run` and `weft demo`: "--split a,b,c" weights
// and the layer ranges they give.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::tools {

// "a,b,c" -> n_parts weights, each >= 0, not all zero. Throws
// Error(invalid_input) naming the spec; `what` names the command.
std::vector<double> parse_split(const std::string& spec, size_t n_parts, const char* what);

// n_parts + 1 boundaries: part i holds layers [bounds[i], bounds[i+1]), in
// proportion to w (rounded; the last boundary is n_layer).
std::vector<int64_t> layer_bounds(const std::vector<double>& w, int64_t n_layer);

}  // namespace weft::tools
