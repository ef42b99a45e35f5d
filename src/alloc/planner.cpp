// plan_memory: liveness-based offsets with in-place reuse and hazard
// records. See include/weft/backend/alloc.h for the contract.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "free_list.h"
#include "weft/backend/alloc.h"
#include "weft/core/error.h"

namespace weft {

// The registry's in_place column: each output element depends only on the
// same-index element of src[0] (and on values read before it is written).
bool op_can_run_in_place(Op op) { return op_is_known(static_cast<int>(op)) && op_info(op).in_place; }

namespace {

// The splits that touched each byte range of one buffer while its last
// occupant lived: that occupant's writer and all its readers. Readers on
// different backends do not wait for each other, so a new writer must wait
// for every one of them; it need not look further back, because the
// occupant's writer (and, through rule 1, its readers) already waited for
// whoever touched the bytes before.
class TouchMap {
 public:
  void touch(size_t begin, size_t end, const std::vector<int>& splits) {
    cut(begin);
    cut(end);
    segments_.erase(segments_.lower_bound(begin), segments_.lower_bound(end));
    segments_[begin] = {end, splits};
  }
  void collect(size_t begin, size_t end, int writer, std::set<int>& out) const {
    auto it = segments_.upper_bound(begin);
    if (it != segments_.begin()) --it;
    for (; it != segments_.end() && it->first < end; ++it) {
      if (it->second.end <= begin) continue;
      for (int s : it->second.splits) {
        if (s >= 0 && s != writer) out.insert(s);
      }
    }
  }

 private:
  struct Segment {
    size_t end;
    std::vector<int> splits;
  };
  void cut(size_t at) {  // splits the segment containing at, so at is a boundary
    auto it = segments_.upper_bound(at);
    if (it == segments_.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      segments_[at] = {it->second.end, it->second.splits};
      it->second.end = at;
    }
  }
  std::map<size_t, Segment> segments_;
};

class Planner {
 public:
  Planner(const Graph& g, const GraphLayout& layout, std::span<const size_t> alignments,
          const std::function<size_t(const Tensor&, int)>& alloc_size,
          const std::function<bool(const Tensor&)>& needs_memory)
      : g_(g), layout_(layout), alloc_size_(alloc_size), needs_memory_(needs_memory) {
    for (size_t a : alignments) lists_.emplace_back(a);
    touched_.resize(alignments.size());
  }

  MemoryPlan run() {
    count_readers();
    for (Tensor* leaf : g_.leafs()) {
      if (planned(leaf) && (leaf->has_flag(kFlagInput) || layout_.split_of(*leaf) < 0)) place(leaf, -1);
    }
    for (Tensor* node : g_.nodes()) step(node);
    for (size_t i = 0; i < lists_.size(); ++i) plan_.buffer_sizes.push_back(lists_[i].high_water());
    plan_.hazards.resize(hazards_.size());
    for (size_t s = 0; s < hazards_.size(); ++s) plan_.hazards[s].assign(hazards_[s].begin(), hazards_[s].end());
    return std::move(plan_);
  }

 private:
  struct State {
    int readers = 0;       // readers not yet run
    std::vector<int> touchers;  // splits that wrote or read it, ascending
    bool keep = false;     // output, or no reader at all: never freed
    bool moved = false;    // its memory passed to an in-place result
  };

  bool planned(const Tensor* t) const { return !t->is_view() && needs_memory_(*t); }

  void count_readers() {
    for (Tensor* node : g_.nodes()) {
      if (node->has_flag(kFlagOutput)) state_[node->view_root()].keep = true;
      if (op_is_view(node->op)) continue;  // a view reads nothing; its readers read the root
      for (Tensor* s : node->src) {
        if (s) ++state_[s->view_root()].readers;
      }
    }
    for (Tensor* node : g_.nodes()) {
      State& st = state_[node];
      if (planned(node) && st.readers == 0) st.keep = true;  // a graph result
    }
    for (Tensor* leaf : g_.leafs()) {
      if (leaf->has_flag(kFlagOutput)) state_[leaf].keep = true;
    }
  }

  int buffer_of(const Tensor* t) const {
    const int b = layout_.buffer_of(*t);
    if (b < 0 || static_cast<size_t>(b) >= lists_.size()) {
      fail(ErrorKind::invalid_input, "plan_memory",
           "tensor '" + t->name + "' assigned to buffer " + std::to_string(b) + " of " + std::to_string(lists_.size()));
    }
    return b;
  }

  std::set<int>& hazards_of(int split) {
    if (static_cast<size_t>(split) >= hazards_.size()) hazards_.resize(static_cast<size_t>(split) + 1);
    return hazards_[static_cast<size_t>(split)];
  }

  void place(const Tensor* t, int writer) {
    const int b = buffer_of(t);
    const size_t size = alloc_size_(*t, b);
    bool reused = false;
    const size_t offset = lists_[static_cast<size_t>(b)].allocate(size, &reused);
    plan_.slots[t] = {b, offset, size};
    if (reused) ++plan_.reused;
    if (writer >= 0) {
      touched_[static_cast<size_t>(b)].collect(offset, offset + lists_[static_cast<size_t>(b)].rounded(size), writer,
                                               hazards_of(writer));
    }
    if (writer >= 0) add_toucher(state_[t], writer);
  }

  static void add_toucher(State& st, int split) {
    if (st.touchers.empty() || st.touchers.back() != split) st.touchers.push_back(split);  // splits only grow
  }

  bool try_in_place(const Tensor* node, int split) {
    const Tensor* src = node->src[0];
    if (!op_can_run_in_place(node->op) || src == nullptr || src->is_view() || !planned(src)) return false;
    auto slot = plan_.slots.find(src);
    State& st = state_[src];
    if (slot == plan_.slots.end() || st.keep || st.moved || st.readers != 1 || src->has_flag(kFlagInput)) return false;
    if (src->type != node->type || !src->is_contiguous() || !node->is_contiguous() || buffer_of(node) != slot->second.buffer ||
        alloc_size_(*node, slot->second.buffer) != slot->second.size) {
      return false;
    }
    for (int i = 1; i < kMaxSrc; ++i) {  // another operand aliasing the same memory would be overwritten mid-read
      if (node->src[i] && node->src[i]->view_root() == src) return false;
    }
    plan_.slots[node] = slot->second;
    st.moved = true;
    State& dst = state_[node];
    for (int s : st.touchers) {  // overwriting src: wait for all who touched it
      if (s != split) hazards_of(split).insert(s);
    }
    dst.touchers = st.touchers;
    add_toucher(dst, split);
    ++plan_.in_place;
    return true;
  }

  void release(const Tensor* t) {
    const Slot& slot = plan_.slots.at(t);
    const auto b = static_cast<size_t>(slot.buffer);
    touched_[b].touch(slot.offset, slot.offset + lists_[b].rounded(slot.size), state_[t].touchers);
    lists_[b].release(slot.offset, slot.size);
  }

  void step(Tensor* node) {
    const int split = layout_.split_of(*node);
    if (op_is_view(node->op)) return;
    for (Tensor* s : node->src) {  // leafs first written by this split arrive now
      if (s == nullptr) continue;
      const Tensor* r = s->view_root();
      if (planned(r) && !plan_.slots.count(r)) place(r, layout_.split_of(*r));
    }
    if (planned(node) && !try_in_place(node, split)) place(node, split);
    for (Tensor* s : node->src) {
      if (s == nullptr) continue;
      const Tensor* r = s->view_root();
      State& st = state_[r];
      if (split >= 0) add_toucher(st, split);
      if (--st.readers == 0 && planned(r) && !st.keep && !st.moved) release(r);
    }
  }

  const Graph& g_;
  const GraphLayout& layout_;
  const std::function<size_t(const Tensor&, int)>& alloc_size_;
  const std::function<bool(const Tensor&)>& needs_memory_;
  std::vector<detail::FreeList> lists_;
  std::vector<TouchMap> touched_;
  std::unordered_map<const Tensor*, State> state_;
  std::vector<std::set<int>> hazards_;
  MemoryPlan plan_;
};

}  // namespace

MemoryPlan plan_memory(const Graph& g, const GraphLayout& layout, std::span<const size_t> alignments,
                       const std::function<size_t(const Tensor&, int)>& alloc_size,
                       const std::function<bool(const Tensor&)>& needs_memory) {
  return Planner(g, layout, alignments, alloc_size, needs_memory).run();
}

}  // namespace weft
