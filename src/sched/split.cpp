// Pass 5: cut the graph into splits where the backend changes, clone the
// nodes, and create input copies for memory a split's backend cannot read.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "sched_impl.h"
#include "weft/core/error.h"

namespace weft::detail {
namespace {

class SplitBuilder {
 public:
  SplitBuilder(const Graph& g, const Assignment& a, const BackendSet& set, ExecPlan& plan)
      : g_(g), a_(a), set_(set), plan_(plan) {}

  void run() {
    for (Tensor* leaf : g_.leafs()) {  // the caller's data: set before compute starts
      plan_.graph.append(leaf);
      plan_.split_of[leaf] = -1;
      plan_.buffer_of[leaf] = buffer_of_backend(a_.at(leaf));
    }
    // Cut where the backend of a computing node changes; views compute
    // nothing and stay in the current run. Cut too before a node that reads
    // a result of another backend's run which the nodes before it in this
    // run do not read: a split waits for its inputs before its first node,
    // so the nodes before it run while that other backend still works (an
    // expert split's own slice, computed while a worker computes its slice,
    // before the sum that reads both).
    std::vector<std::pair<int, std::vector<Tensor*>>> runs;
    std::unordered_map<const Tensor*, int> run_of;  // caller's root -> the run computing it
    std::vector<int> awaited;                       // other backends' runs the current run reads
    bool computes = false;                          // the current run has a computing node
    for (Tensor* node : g_.nodes()) {
      const int b = a_.at(node);
      const bool view = op_is_view(node->op);
      bool cut = runs.empty() || (!view && b != runs.back().first);
      std::vector<int> reads;
      if (!view) {
        for (const Tensor* src : node->src) {
          if (src == nullptr) continue;
          const auto it = run_of.find(src->view_root());
          if (it != run_of.end() && runs[static_cast<size_t>(it->second)].first != b) reads.push_back(it->second);
        }
      }
      if (!cut && computes) {
        for (int r : reads) cut = cut || std::find(awaited.begin(), awaited.end(), r) == awaited.end();
      }
      if (cut) {
        runs.emplace_back(b, std::vector<Tensor*>{});
        awaited.clear();
        computes = false;
      }
      for (int r : reads) add_unique(awaited, r);
      runs.back().second.push_back(node);
      if (!view) {
        computes = true;
        run_of[node->view_root()] = static_cast<int>(runs.size()) - 1;
      }
    }
    for (const auto& [backend, nodes] : runs) {
      start_split(backend);
      // The scheduler makes a split's input copies before its first node
      // runs, so the plan must place them there too, ahead of the nodes.
      for (Tensor* node : nodes) {
        if (op_is_view(node->op)) continue;
        for (Tensor* s : node->src) {
          if (s != nullptr && !set_.can_read(backend, memory_of(s->view_root()))) copy_for(s);
        }
      }
      for (Tensor* node : nodes) add_node(node);
    }
  }

 private:
  int buffer_of_backend(int b) const { return set_.buffer_of_backend[static_cast<size_t>(b)]; }
  int current() const { return static_cast<int>(plan_.splits.size()) - 1; }
  Split& split() { return plan_.splits.back(); }

  void start_split(int backend) {
    plan_.splits.emplace_back();
    split().backend = backend;
    copies_.clear();
    copy_views_.clear();
  }

  // The buffer type holding root's memory.
  const BufferType& memory_of(const Tensor* root) const {
    if (root->buffer != nullptr) return root->buffer->type();
    return *set_.buffer_types[static_cast<size_t>(buffer_of_backend(a_.at(root)))];
  }

  // What the current split's clones use in place of the caller's tensor s.
  Tensor* resolve(Tensor* s) {
    const Tensor* root = s->view_root();
    const int producer = last_writer_.count(root) ? last_writer_.at(root) : -1;
    const int producer_backend = producer >= 0 ? plan_.splits[static_cast<size_t>(producer)].backend : a_.at(root);
    // Read after its split's graph ran, directly or by a copy: an output of
    // that graph, so that its backend neither skips nor fuses it away (the
    // CPU backend fuses an rms_norm into its only reader) and the planner
    // keeps it.
    if (producer >= 0 && producer != current() && root->op != Op::none) exec_tensor(root)->flags |= kFlagOutput;
    if (set_.can_read(split().backend, memory_of(root))) {
      if (producer >= 0 && producer_backend != split().backend) add_unique(split().producers, producer);
      return exec_tensor(s);
    }
    Tensor* copy = copy_for(s);
    if (s == root) return copy;
    // A view of copied memory: the same view over the copy.
    auto [it, fresh] = copy_views_.try_emplace(s, nullptr);
    if (fresh) {
      Tensor* v = plan_.ctx.new_node();
      *v = *s;
      v->op = Op::view;
      for (Tensor*& src : v->src) src = nullptr;
      v->src[0] = copy;
      v->view_src = copy;
      v->buffer = nullptr;
      v->data = nullptr;
      append(v);
      it->second = v;
    }
    return it->second;
  }

  // The current split's copy of s's root, made on first request: a copy an
  // earlier split on the same backend made of the same bytes (the same
  // writer since) is read again rather than copied again (an attention
  // mask or positions that every layer's split on a worker reads go to it
  // once per graph, not once per layer).
  Tensor* copy_for(const Tensor* s) {
    Tensor* root = const_cast<Tensor*>(s->view_root());
    const int producer = last_writer_.count(root) ? last_writer_.at(root) : -1;
    const int producer_backend = producer >= 0 ? plan_.splits[static_cast<size_t>(producer)].backend : a_.at(root);
    auto [it, fresh] = copies_.try_emplace(root, nullptr);
    if (!fresh) return it->second;
    const auto earlier = made_copies_.find({root, split().backend});
    if (earlier != made_copies_.end() && earlier->second.producer == producer) {
      it->second = earlier->second.copy;
      return it->second;
    }
    if (!root->is_contiguous()) {
      fail(ErrorKind::unsupported, "sched", "cannot copy non-contiguous " + shape_string(*root) + " '" + root->name + "'");
    }
    Tensor* copy = plan_.ctx.new_tensor(root->type, {root->ne[0], root->ne[1], root->ne[2], root->ne[3]});
    copy->op = Op::cont;  // for the planner: a node of this split that reads root
    copy->src[0] = exec_tensor(root);
    copy->name = "copy of " + root->name;
    split().copies.push_back({exec_tensor(root), copy, producer_backend, producer});
    append(copy, false);
    it->second = copy;
    made_copies_[{root, split().backend}] = {copy, producer};
    return copy;
  }

  // The tensor the plan uses for a caller's tensor: its clone, or the leaf.
  Tensor* exec_tensor(const Tensor* t) {
    if (t->op == Op::none) return const_cast<Tensor*>(t);
    return plan_.clone_of.at(t);
  }

  // Adds t to the plan in the current split. Input copies are made by the
  // scheduler, not computed by the backend: they stay out of the split's graph.
  void append(Tensor* t, bool computed = true) {
    plan_.graph.append(t);
    plan_.split_of[t] = current();
    plan_.buffer_of[t] = buffer_of_backend(split().backend);
    if (computed) split().graph.append(t);
  }

  void add_node(Tensor* node) {
    Tensor* clone = plan_.ctx.new_node();
    *clone = *node;
    clone->buffer = nullptr;
    clone->data = nullptr;
    for (Tensor*& s : clone->src) {  // a view reads nothing, so it needs no copy
      if (s != nullptr) s = op_is_view(node->op) ? exec_tensor(s) : resolve(s);
    }
    if (node->view_src != nullptr) clone->view_src = exec_tensor(node->view_src);
    plan_.clone_of[node] = clone;
    append(clone);
    if (!op_is_view(node->op)) last_writer_[node->view_root()] = current();
  }

  static void add_unique(std::vector<int>& v, int x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  }

  const Graph& g_;
  const Assignment& a_;
  const BackendSet& set_;
  ExecPlan& plan_;
  std::unordered_map<const Tensor*, int> last_writer_;       // caller's root -> split
  std::unordered_map<const Tensor*, Tensor*> copies_;        // this split's copies, by caller's root
  std::unordered_map<const Tensor*, Tensor*> copy_views_;    // caller's view -> view of a copy
  struct MadeCopy {
    Tensor* copy;
    int producer;  // the split whose result it holds (-1: data set before compute)
  };
  std::map<std::pair<const Tensor*, int>, MadeCopy> made_copies_;  // (caller's root, backend) -> its last copy
};

}  // namespace

void build_exec_plan(const Graph& g, const Assignment& a, const BackendSet& set, ExecPlan& plan) {
  SplitBuilder(g, a, set, plan).run();
}

}  // namespace weft::detail
