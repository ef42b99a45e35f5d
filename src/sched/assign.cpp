// Placement passes 1-4 (docs/scheduler.md): decide a backend for every
// tensor of the caller's graph.
#include <string>

#include "sched_impl.h"
#include "weft/core/error.h"

namespace weft::detail {

int BackendSet::backend_for_buffer(const BufferType& bt) const {
  for (int b = 0; b < size(); ++b) {
    if (&backends[static_cast<size_t>(b)]->device().default_buffer_type() == &bt) return b;
  }
  for (int b = 0; b < size(); ++b) {
    if (can_read(b, bt)) return b;
  }
  return -1;
}

namespace {

class Passes {
 public:
  Passes(const Graph& g, const BackendSet& set, const Assignment& pins) : g_(g), set_(set), pins_(pins) {}

  Assignment run() {
    place_fixed();
    expand();
    upgrade();
    place_rest();
    return std::move(a_);
  }

 private:
  bool assigned(const Tensor* t) const { return a_.count(t) != 0; }
  int lowest() const { return set_.size() - 1; }

  [[noreturn]] void unsupported(const Tensor& t, const std::string& why) const {
    fail(ErrorKind::unsupported, "sched",
         std::string(op_name(t.op)) + " " + shape_string(t) + " '" + t.name + "': " + why);
  }

  // Pass 1: what is already decided: pins, data already in a buffer, nodes
  // writing into such data, and nodes using weights (run where the weights are).
  void place_fixed() {
    for (Tensor* leaf : g_.leafs()) {
      if (auto pin = pins_.find(leaf); pin != pins_.end()) {
        a_[leaf] = pin->second;
      } else if (leaf->buffer != nullptr) {
        const int b = set_.backend_for_buffer(leaf->buffer->type());
        if (b >= 0) a_[leaf] = b;
      }
    }
    for (Tensor* node : g_.nodes()) {
      if (auto pin = pins_.find(node); pin != pins_.end()) {
        if (!op_is_view(node->op) && !set_.supports(pin->second, *node)) {
          unsupported(*node, "pinned to backend " + std::to_string(pin->second) + ", which does not support it");
        }
        a_[node] = pin->second;
        continue;
      }
      const Tensor* root = node->view_root();
      if (root != node && root->buffer != nullptr) {  // writes or views bound memory
        const int b = set_.backend_for_buffer(root->buffer->type());
        if (b >= 0 && (op_is_view(node->op) || set_.supports(b, *node))) a_[node] = b;
        continue;
      }
      for (const Tensor* s : node->src) {
        if (s == nullptr || !s->view_root()->has_flag(kFlagWeight) || s->view_root()->buffer == nullptr) continue;
        const int b = set_.backend_for_buffer(s->view_root()->buffer->type());
        if (b >= 0 && set_.supports(b, *node)) {
          a_[node] = b;
          break;
        }
      }
    }
  }

  // Pass 2: unassigned nodes take the backend of their neighbours in
  // execution order: down, then up, not spreading the lowest-priority
  // backend (usually the CPU) in those two; then down again with all.
  void expand() {
    auto sweep = [&](auto begin, auto end, bool spread_lowest) {
      int cur = -1;
      for (auto it = begin; it != end; ++it) {
        Tensor* node = *it;
        if (op_is_view(node->op)) continue;
        if (auto found = a_.find(node); found != a_.end()) {
          cur = found->second == lowest() && !spread_lowest ? -1 : found->second;
        } else if (cur >= 0 && set_.supports(cur, *node)) {
          a_[node] = cur;
        }
      }
    };
    const auto nodes = g_.nodes();
    sweep(nodes.begin(), nodes.end(), false);
    sweep(nodes.rbegin(), nodes.rend(), false);
    sweep(nodes.begin(), nodes.end(), true);
  }

  // Pass 3: move a node to a higher-priority backend that shares its buffer
  // type (no copy needed) and supports it. Pinned nodes stay.
  void upgrade() {
    for (Tensor* node : g_.nodes()) {
      auto it = a_.find(node);
      if (it == a_.end() || pins_.count(node) || op_is_view(node->op) || node->view_root() != node) continue;
      for (int b = 0; b < it->second; ++b) {
        if (set_.buffer_of_backend[static_cast<size_t>(b)] == set_.buffer_of_backend[static_cast<size_t>(it->second)] &&
            set_.supports(b, *node)) {
          it->second = b;
          break;
        }
      }
    }
  }

  // Pass 4: what is left. Nodes: the first backend that supports them.
  // Leafs: the backend of their first reader. Views: their source's.
  void place_rest() {
    for (Tensor* node : g_.nodes()) {
      if (op_is_view(node->op) || assigned(node)) continue;
      for (int b = 0; b < set_.size() && !assigned(node); ++b) {
        if (set_.supports(b, *node)) a_[node] = b;
      }
      if (!assigned(node)) unsupported(*node, "no backend supports it");
    }
    for (Tensor* node : g_.nodes()) {
      if (op_is_view(node->op)) continue;
      for (const Tensor* s : node->src) {
        if (s != nullptr && !assigned(s->view_root())) a_[s->view_root()] = a_.at(node);
      }
    }
    for (Tensor* leaf : g_.leafs()) {
      if (!assigned(leaf)) a_[leaf] = 0;  // read by no node: anywhere will do
    }
    place_writers_with_their_memory();
    for (Tensor* node : g_.nodes()) {
      if (op_is_view(node->op)) a_[node] = a_.at(node->view_root());
    }
  }

  // A node that writes into another tensor's memory (set_rows, cpy) must run
  // where it can reach that memory: the memory follows the writer when it is
  // a leaf not yet placed, else the writer moves to the memory.
  void place_writers_with_their_memory() {
    for (Tensor* node : g_.nodes()) {
      const Tensor* root = node->view_root();
      if (op_is_view(node->op) || root == node) continue;
      const int b = a_.at(node);
      const BufferType& memory = root->buffer ? root->buffer->type()
                                              : *set_.buffer_types[static_cast<size_t>(
                                                    set_.buffer_of_backend[static_cast<size_t>(a_.at(root))])];
      if (set_.can_read(b, memory)) continue;
      if (root->op == Op::none && root->buffer == nullptr && !pins_.count(root)) {
        a_[root] = b;
        continue;
      }
      const int home = set_.backend_for_buffer(memory);
      if (pins_.count(node) || home < 0 || !set_.supports(home, *node)) {
        unsupported(*node, "no backend that can reach the memory it writes supports it");
      }
      a_[node] = home;
    }
  }

  const Graph& g_;
  const BackendSet& set_;
  const Assignment& pins_;
  Assignment a_;
};

}  // namespace

Assignment assign_backends(const Graph& g, const BackendSet& set, const Assignment& pins) {
  return Passes(g, set, pins).run();
}

}  // namespace weft::detail
