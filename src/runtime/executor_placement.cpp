// Placement: which device computes which layers, and which heads of them.
#include <algorithm>
#include <cmath>
#include <string>

#include "weft/core/error.h"
#include "weft/runtime/executor.h"
#include "weft/runtime/placement.h"

namespace weft {
namespace {

constexpr const char* kExecutorPlacementWhere = "placement";

std::string part_name(const Placement& pl, size_t i) {
  const PlacementPart& p = pl.parts[i];
  if (!p.label.empty()) return p.label;
  if (p.device != nullptr) return p.device->name();
  return "part " + std::to_string(i);
}

std::string range(int64_t first, int64_t last) {
  return last - first == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last - 1);
}

std::string heads_range(const PlacementPart& p) {
  return p.last_head == p.first_head ? std::string("feed-forward only") : range(p.first_head, p.last_head);
}

// The parts [begin, end) that cover the same run of layers: one part of
// every head, or several cutting it by heads.
size_t run_end(const Placement& pl, size_t begin) {
  const PlacementPart& first = pl.parts[begin];
  size_t end = begin + 1;
  if (first.all_heads()) return end;
  while (end < pl.parts.size() && !pl.parts[end].all_heads() && pl.parts[end].first_layer == first.first_layer &&
         pl.parts[end].last_layer == first.last_layer)
    ++end;
  return end;
}

// The largest block of the dense feed-forward's down projections in layers
// [first, last): feed-forward shares are cut on multiples of it.
int64_t down_block(const GgufFile& file, int64_t first, int64_t last) {
  int64_t block = 1;
  for (int64_t il = first; il < last; ++il)
    if (const GgufTensorInfo* t = file.find_tensor("blk." + std::to_string(il) + ".ffn_down.weight"))
      block = std::max(block, traits(t->dtype()).block_size);
  return block;
}

// Feed-forward column boundaries in proportion to weights, on multiples of
// align, the last at n_ff.
std::vector<int64_t> ffn_bounds_by_weight(const std::vector<double>& weights, int64_t n_ff, int64_t align) {
  std::vector<int64_t> b = layer_bounds(weights, n_ff / align);
  for (int64_t& x : b) x *= align;
  b.back() = n_ff;
  return b;
}

}  // namespace

Placement Placement::by_layers(std::span<const LayerPlacement> layers) {
  Placement pl;
  for (const LayerPlacement& l : layers) pl.parts.push_back({l.device, "", l.first, l.last, 0, 0});
  return pl;
}

bool Placement::splits_heads() const {
  for (const PlacementPart& p : parts)
    if (!p.all_heads()) return true;
  return false;
}

std::vector<int64_t> Placement::layer_bounds() const {
  std::vector<int64_t> bounds{0};
  for (const PlacementPart& p : parts) bounds.push_back(p.last_layer);
  return bounds;
}

void Placement::check(int64_t n_layer, int64_t n_head, int64_t n_head_kv) const {
  if (parts.empty())
    fail(ErrorKind::invalid_input, kExecutorPlacementWhere, "a placement needs at least one part with a device");
  const int64_t group = n_head_kv > 0 && n_head % n_head_kv == 0 ? n_head / n_head_kv : n_head;
  int64_t next_layer = 0;
  for (size_t begin = 0; begin < parts.size();) {
    const size_t end = run_end(*this, begin);
    const PlacementPart& first = parts[begin];
    const std::string name = "placement part " + std::to_string(begin) + " (" + part_name(*this, begin) + ")";
    for (size_t i = begin; i < end; ++i)
      if (parts[i].device == nullptr)
        fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
             "placement part " + std::to_string(i) + " has no device");
    if (first.first_layer != next_layer || first.last_layer < first.first_layer)
      fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
           name + " [" + std::to_string(first.first_layer) + ", " + std::to_string(first.last_layer) +
               ") does not continue at layer " + std::to_string(next_layer) + " of " + std::to_string(n_layer));
    if (!first.all_heads()) {
      if (first.first_layer == first.last_layer)
        fail(ErrorKind::invalid_input, kExecutorPlacementWhere, name + " cuts heads of no layers");
      int64_t next_head = 0;
      for (size_t i = begin; i < end; ++i) {
        const PlacementPart& p = parts[i];
        const bool ffn_only = i > begin && p.ffn_share > 0 && p.last_head == p.first_head;
        if (!(p.ffn_share >= 0) || !std::isfinite(p.ffn_share))
          fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
               "placement part " + std::to_string(i) + ": a feed-forward share must be finite and >= 0");
        if (p.first_head != next_head || (p.last_head <= p.first_head && !ffn_only) || p.last_head > n_head)
          fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
               "placement part " + std::to_string(i) + " heads [" + std::to_string(p.first_head) + ", " +
                   std::to_string(p.last_head) + ") do not continue at head " + std::to_string(next_head) + " of " +
                   std::to_string(n_head));
        if (p.first_head % group != 0 || p.last_head % group != 0)
          fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
               "placement part " + std::to_string(i) + " heads [" + std::to_string(p.first_head) + ", " +
                   std::to_string(p.last_head) + ") split a group of " + std::to_string(group) +
                   " query heads sharing one key/value head");
        next_head = p.last_head;
      }
      if (next_head != n_head)
        fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
             name + ": its parts' heads end at " + std::to_string(next_head) + " of " + std::to_string(n_head));
    }
    next_layer = first.last_layer;
    begin = end;
  }
  if (next_layer != n_layer)
    fail(ErrorKind::invalid_input, kExecutorPlacementWhere,
         "the placement ends at layer " + std::to_string(next_layer) + " of " + std::to_string(n_layer));
}

std::string Placement::describe() const {
  std::string out;
  for (size_t begin = 0; begin < parts.size();) {
    const size_t end = run_end(*this, begin);
    const PlacementPart& first = parts[begin];
    if (!out.empty()) out += "; ";
    if (first.first_layer >= first.last_layer) {
      out += "no layers on " + part_name(*this, begin);
    } else if (first.all_heads()) {
      out += "layers " + range(first.first_layer, first.last_layer) + " on " + part_name(*this, begin);
    } else {
      out += "layers " + range(first.first_layer, first.last_layer) + ": heads ";
      for (size_t i = begin; i < end; ++i)
        out += (i > begin ? ", " : "") + heads_range(parts[i]) + " on " + part_name(*this, i);
    }
    begin = end;
  }
  return out;
}

std::vector<model::TensorShare> tensor_shares(const GgufFile& file, const Placement& placement) {
  if (!placement.splits_heads()) return {};
  const model::LlamaParams p = model::LlamaParams::from_gguf(file);
  placement.check(p.n_layer, p.n_head, p.n_head_kv);
  const auto& parts = placement.parts;
  const int64_t group = p.n_head / p.n_head_kv;
  std::vector<model::TensorShare> shares(parts.size());
  for (size_t begin = 0; begin < parts.size();) {
    const size_t end = run_end(placement, begin);
    shares[begin].home = static_cast<int>(begin);
    if (parts[begin].all_heads()) {
      begin = end;
      continue;
    }
    std::vector<int64_t> kv{0};
    std::vector<double> ffn_weights;
    for (size_t i = begin; i < end; ++i) {
      kv.push_back(parts[i].last_head / group);
      ffn_weights.push_back(parts[i].ffn_share);
    }
    const int64_t block = down_block(file, parts[begin].first_layer, parts[begin].last_layer);
    const bool weighed = std::any_of(ffn_weights.begin(), ffn_weights.end(), [](double w) { return w > 0; });
    const std::vector<int64_t> ff =
        weighed ? ffn_bounds_by_weight(ffn_weights, p.n_ff, block) : model::ffn_bounds(kv, p.n_head_kv, p.n_ff, block);
    for (size_t i = begin; i < end; ++i)
      shares[i] = {static_cast<int>(begin), kv[i - begin], kv[i - begin + 1], ff[i - begin], ff[i - begin + 1]};
    begin = end;
  }
  return shares;
}

std::vector<int64_t> head_bounds(const std::vector<double>& weights, int64_t n_head, int64_t n_head_kv) {
  if (n_head_kv <= 0 || n_head % n_head_kv != 0)
    fail(ErrorKind::invalid_input, "placement",
         "cutting " + std::to_string(n_head) + " heads into " + std::to_string(n_head_kv) + " key/value groups");
  if (static_cast<int64_t>(weights.size()) > n_head_kv) {  // one each; the others the feed-forward only
    (void)layer_bounds(weights, 1);                        // the weights' rules
    std::vector<int64_t> bounds{0};
    for (size_t i = 0; i < weights.size(); ++i)
      bounds.push_back(std::min<int64_t>(static_cast<int64_t>(i) + 1, n_head_kv) * (n_head / n_head_kv));
    return bounds;
  }
  const auto n = static_cast<int64_t>(weights.size());
  // One key/value head each, the rest in proportion to the weights (layer_bounds).
  const std::vector<int64_t> rest = layer_bounds(weights, n_head_kv - n);
  std::vector<int64_t> bounds{0};
  for (int64_t i = 0; i < n; ++i)
    bounds.push_back(bounds.back() + (1 + rest[static_cast<size_t>(i) + 1] - rest[static_cast<size_t>(i)]) *
                                         (n_head / n_head_kv));
  return bounds;
}

}  // namespace weft
