#include "layer_split.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "weft/core/error.h"

namespace weft::tools {

std::vector<double> parse_split(const std::string& spec, size_t n_parts, const char* what) {
  std::vector<double> w;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0) || v > 1e18)
      fail(ErrorKind::invalid_input, what, "--split '" + spec + "': '" + item + "' is not a weight >= 0");
    w.push_back(v);
    start = comma + 1;
  }
  double total = 0;
  for (double v : w) total += v;
  if (w.size() != n_parts || !(total > 0))
    fail(ErrorKind::invalid_input, what,
         "--split '" + spec + "' needs " + std::to_string(n_parts) + " weights (host, then one per worker), not all zero");
  return w;
}

std::vector<int64_t> layer_bounds(const std::vector<double>& w, int64_t n_layer) {
  double total = 0;
  for (double v : w) total += v;
  std::vector<int64_t> bounds{0};
  double sum = 0;
  for (double v : w) {
    sum += v;
    bounds.push_back(std::min<int64_t>(n_layer, std::llround(static_cast<double>(n_layer) * sum / total)));
  }
  bounds.back() = n_layer;
  return bounds;
}

}  // namespace weft::tools
