// Placement: which device computes which layers, and which heads of them.
#include <string>

#include "weft/core/error.h"
#include "weft/runtime/executor.h"

namespace weft {
namespace {

constexpr const char* kWhere = "placement";

std::string part_name(const Placement& pl, size_t i) {
  const PlacementPart& p = pl.parts[i];
  if (!p.label.empty()) return p.label;
  if (p.device != nullptr) return p.device->name();
  return "part " + std::to_string(i);
}

std::string range(int64_t first, int64_t last) {
  return last - first == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last - 1);
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
  if (parts.empty()) fail(ErrorKind::invalid_input, kWhere, "a placement needs at least one part with a device");
  const int64_t group = n_head_kv > 0 && n_head % n_head_kv == 0 ? n_head / n_head_kv : n_head;
  int64_t next_layer = 0;
  for (size_t begin = 0; begin < parts.size();) {
    const size_t end = run_end(*this, begin);
    const PlacementPart& first = parts[begin];
    const std::string name = "placement part " + std::to_string(begin) + " (" + part_name(*this, begin) + ")";
    for (size_t i = begin; i < end; ++i)
      if (parts[i].device == nullptr)
        fail(ErrorKind::invalid_input, kWhere, "placement part " + std::to_string(i) + " has no device");
    if (first.first_layer != next_layer || first.last_layer < first.first_layer)
      fail(ErrorKind::invalid_input, kWhere,
           name + " [" + std::to_string(first.first_layer) + ", " + std::to_string(first.last_layer) +
               ") does not continue at layer " + std::to_string(next_layer) + " of " + std::to_string(n_layer));
    if (!first.all_heads()) {
      if (first.first_layer == first.last_layer)
        fail(ErrorKind::invalid_input, kWhere, name + " cuts heads of no layers");
      int64_t next_head = 0;
      for (size_t i = begin; i < end; ++i) {
        const PlacementPart& p = parts[i];
        if (p.first_head != next_head || p.last_head <= p.first_head || p.last_head > n_head)
          fail(ErrorKind::invalid_input, kWhere,
               "placement part " + std::to_string(i) + " heads [" + std::to_string(p.first_head) + ", " +
                   std::to_string(p.last_head) + ") do not continue at head " + std::to_string(next_head) +
                   " of " + std::to_string(n_head));
        if (p.first_head % group != 0 || p.last_head % group != 0)
          fail(ErrorKind::invalid_input, kWhere,
               "placement part " + std::to_string(i) + " heads [" + std::to_string(p.first_head) + ", " +
                   std::to_string(p.last_head) + ") split a group of " + std::to_string(group) +
                   " query heads sharing one key/value head");
        next_head = p.last_head;
      }
      if (next_head != n_head)
        fail(ErrorKind::invalid_input, kWhere,
             name + ": its parts' heads end at " + std::to_string(next_head) + " of " + std::to_string(n_head));
    }
    next_layer = first.last_layer;
    begin = end;
  }
  if (next_layer != n_layer)
    fail(ErrorKind::invalid_input, kWhere,
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
        out += (i > begin ? ", " : "") + range(parts[i].first_head, parts[i].last_head) + " on " +
               part_name(*this, i);
    }
    begin = end;
  }
  return out;
}

}  // namespace weft
