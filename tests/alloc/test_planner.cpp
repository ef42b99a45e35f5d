// The memory planner, checked without allocating memory: reuse and in-place
// happen, and an independent liveness check over random graphs finds no two
// live tensors sharing bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <unordered_map>
#include <vector>

#include "weft/backend/alloc.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

constexpr size_t kAlign = 64;

MemoryPlan plan(const Graph& g, const GraphLayout& layout = {}, int n_buffers = 1) {
  std::vector<size_t> alignments(static_cast<size_t>(n_buffers), kAlign);
  return plan_memory(g, layout, alignments, [](const Tensor& t, int) { return t.nbytes(); });
}

const Tensor* root_of(const Tensor* t) { return t->view_src ? t->view_src : t; }

// Independent liveness: when each planned tensor is born and dies, in node
// positions, worked out from the graph alone.
struct Lifetime {
  int birth = INT_MAX;
  int death = -1;
};

std::unordered_map<const Tensor*, Lifetime> lifetimes(const Graph& g, const GraphLayout& layout,
                                                      const MemoryPlan& p) {
  std::unordered_map<const Tensor*, Lifetime> life;
  for (const auto& [t, slot] : p.slots) {
    Lifetime& l = life[t];
    if (t->op != Op::none) {
      l.birth = static_cast<int>(std::find(g.nodes().begin(), g.nodes().end(), t) - g.nodes().begin());
    } else if (t->has_flag(kFlagInput) || layout.split_of(*t) < 0) {
      l.birth = -1;
    }
  }
  const auto nodes = g.nodes();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const Tensor* n = nodes[static_cast<size_t>(i)];
    if (n->has_flag(kFlagOutput) && life.count(root_of(n))) life[root_of(n)].death = INT_MAX;
    if (op_is_view(n->op)) continue;
    for (const Tensor* s : n->src) {
      if (!s || !life.count(root_of(s))) continue;
      Lifetime& l = life[root_of(s)];
      l.birth = std::min(l.birth, i);  // a lazily placed leaf is born at its first reader
      l.death = std::max(l.death, i);
    }
  }
  for (auto& [t, l] : life) {
    if (l.death < 0 || t->has_flag(kFlagOutput)) l.death = INT_MAX;  // results stay
  }
  return life;
}

// Fails the test if two tensors live at the same time share bytes (the
// in-place case, a node over its dying first source, excepted).
void expect_no_overlap(const Graph& g, const GraphLayout& layout, const MemoryPlan& p) {
  const auto life = lifetimes(g, layout, p);
  std::vector<const Tensor*> planned;
  for (const auto& [t, slot] : p.slots) planned.push_back(t);
  for (size_t i = 0; i < planned.size(); ++i) {
    for (size_t j = i + 1; j < planned.size(); ++j) {
      const Tensor* a = planned[i];
      const Tensor* b = planned[j];
      const Slot& sa = p.slots.at(a);
      const Slot& sb = p.slots.at(b);
      ASSERT_LE(sa.offset + sa.size, p.buffer_sizes[static_cast<size_t>(sa.buffer)]);
      if (sa.buffer != sb.buffer || sa.offset + sa.size <= sb.offset || sb.offset + sb.size <= sa.offset) continue;
      const Lifetime& la = life.at(a);
      const Lifetime& lb = life.at(b);
      if (la.death < lb.birth || lb.death < la.birth) continue;
      auto in_place = [&](const Tensor* dst, const Tensor* src, const Lifetime& ld, const Lifetime& ls) {
        return dst->src[0] == src && op_can_run_in_place(dst->op) && ls.death == ld.birth &&
               p.slots.at(dst).offset == p.slots.at(src).offset;
      };
      if (in_place(a, b, la, lb) || in_place(b, a, lb, la)) continue;
      ADD_FAILURE() << "live tensors overlap: '" << a->name << "' [" << la.birth << "," << la.death << "] @"
                    << sa.offset << "+" << sa.size << " and '" << b->name << "' [" << lb.birth << "," << lb.death
                    << "] @" << sb.offset << "+" << sb.size;
      return;
    }
  }
}

TEST(Planner, ReusesFreedMemoryAlongAChain) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::f32, {256, 256});
  Tensor* x = ctx.new_tensor(DType::f32, {256, 4});
  x->flags |= kFlagInput;
  Tensor* y = x;
  for (int i = 0; i < 8; ++i) y = ops::mul_mat(ctx, w, y);  // never in place
  Graph g;
  g.expand(y);
  const MemoryPlan p = plan(g);
  // w, then two 4 KiB activations alive at once: x is freed after its reader.
  EXPECT_GE(p.reused, 3);
  EXPECT_EQ(p.buffer_sizes[0], w->nbytes() + 2 * x->nbytes());  // y[i+1] reuses y[i-1] (x first)
  expect_no_overlap(g, {}, p);
}

TEST(Planner, ComputesInPlaceOverASourceWithNoOtherReader) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::f32, {64, 64});
  Tensor* x = ctx.new_tensor(DType::f32, {64, 2});
  x->flags |= kFlagInput;
  Tensor* a = ops::mul_mat(ctx, w, x);
  Tensor* b = ops::silu(ctx, a);      // a has one reader: in place
  Tensor* c = ops::scale(ctx, b, 2);  // b is read twice (here and below): not in place
  Tensor* d = ops::add(ctx, c, b);
  Tensor* e = ops::silu(ctx, x);      // x is an input: never overwritten
  Graph g;
  g.expand(d);
  g.expand(e);
  const MemoryPlan p = plan(g);
  EXPECT_EQ(p.slots.at(b).offset, p.slots.at(a).offset);
  EXPECT_NE(p.slots.at(c).offset, p.slots.at(b).offset);
  EXPECT_NE(p.slots.at(e).offset, p.slots.at(x).offset);
  EXPECT_GE(p.in_place, 1);
  expect_no_overlap(g, {}, p);
}

TEST(Planner, InputsAndOutputsAreNeverReused) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {1024});
  x->flags |= kFlagInput;
  Tensor* a = ops::sqr(ctx, ops::scale(ctx, ops::cont(ctx, ops::reshape(ctx, x, {32, 32})), 2));
  a->flags |= kFlagOutput;
  Tensor* b = ops::silu(ctx, ops::transpose(ctx, a));
  Tensor* c = ops::cont(ctx, b);
  Graph g;
  g.expand(c);
  const MemoryPlan p = plan(g);
  // a's source chain ran in place over a's bytes before a existed; nothing
  // computed after a may touch them. x is placed before any node runs.
  const Slot& sa = p.slots.at(a);
  for (const Tensor* t : {b, c}) {
    const Slot& s = p.slots.at(t);
    EXPECT_TRUE(s.offset >= sa.offset + sa.size || s.offset + s.size <= sa.offset) << shape_string(*t);
  }
  EXPECT_EQ(p.slots.at(x).offset, 0u);
  expect_no_overlap(g, {}, p);
}

TEST(Planner, RecordsHazardsBetweenSplitsThatShareBytes) {
  // Split 0 reads x and frees it; split 1 has no inputs and writes a tensor
  // where x was: it must wait for split 0 (the seed-003 race).
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {256});
  Tensor* a = ops::silu(ctx, ops::cont(ctx, x));  // split 0
  a->flags |= kFlagOutput;
  Tensor* k = ctx.new_tensor(DType::f32, {256});
  k->flags |= kFlagInput;
  Tensor* b = ops::cont(ctx, ops::reshape(ctx, k, {16, 16}));  // split 1
  Graph g;
  g.expand(a);
  g.expand(b);
  GraphLayout layout;
  layout.split_of = [&](const Tensor& t) {
    if (&t == x) return 0;  // written by split 0 (an input copy)
    if (&t == k) return -1;
    return t.src[0] && root_of(t.src[0]) == k ? 1 : 0;
  };
  const MemoryPlan p = plan(g, layout);
  ASSERT_EQ(p.hazards.size(), 2u);
  EXPECT_TRUE(p.hazards[0].empty());
  // Split 1's cont output was placed over bytes split 0 used (x's or the first cont's).
  EXPECT_EQ(p.hazards[1], std::vector<int>{0});
  expect_no_overlap(g, layout, p);
}

TEST(Planner, AWriterWaitsForEveryReaderOfTheMemoryItReuses) {
  // t is written in split 0 and read in splits 1 and 2 (readers on two
  // backends do not wait for each other); u reuses t's bytes in split 3 and
  // must wait for both readers, not only the last.
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::f32, {64});
  x->flags |= kFlagInput;
  Tensor* t = ops::scale(ctx, x, 2.0f);
  Tensor* r1 = ops::sqr(ctx, t);
  Tensor* r2 = ops::sum_rows(ctx, t);
  Tensor* u = ops::cont(ctx, x);
  for (Tensor* out : {r1, r2, u}) out->flags |= kFlagOutput;
  Graph g;
  for (Tensor* out : {r1, r2, u}) g.expand(out);
  GraphLayout layout;
  layout.split_of = [&](const Tensor& n) { return &n == x ? -1 : &n == t ? 0 : &n == r1 ? 1 : &n == r2 ? 2 : 3; };
  const MemoryPlan p = plan(g, layout);
  ASSERT_EQ(p.slots.at(u).offset, p.slots.at(t).offset);  // the reuse under test
  ASSERT_EQ(p.hazards.size(), 4u);
  EXPECT_EQ(p.hazards[3], (std::vector<int>{0, 1, 2}));
  expect_no_overlap(g, layout, p);
}

// A random graph of f32 ops over a few shapes, with random inputs, outputs,
// buffers and splits.
struct RandomGraph {
  Context ctx;
  Graph graph;
  std::unordered_map<const Tensor*, int> buffer, split;
};

void build_random(RandomGraph& rg, std::mt19937& rng, int n_ops) {
  Context& ctx = rg.ctx;
  std::vector<Tensor*> pool;
  auto pick = [&] { return pool[rng() % pool.size()]; };
  const int64_t widths[] = {8, 16, 48};
  for (int i = 0; i < 4; ++i) {
    Tensor* leaf = ctx.new_tensor(DType::f32, {widths[rng() % 3], 6});
    if (rng() % 2) leaf->flags |= kFlagInput;
    leaf->name = "leaf" + std::to_string(i);
    pool.push_back(leaf);
  }
  int split = 0;
  for (int i = 0; i < n_ops; ++i) {
    Tensor* a = pick();
    Tensor* r = nullptr;
    switch (rng() % 9) {
      case 0: r = ops::silu(ctx, a); break;
      case 1: r = ops::scale(ctx, a, 0.5f); break;
      case 2: r = ops::rms_norm(ctx, a, 1e-5f); break;
      case 3: r = ops::add(ctx, a, ops::view_1d(ctx, a, 1, 0)); break;
      case 4: r = ops::cont(ctx, ops::transpose(ctx, a)); break;
      case 5: r = ops::mul(ctx, a, a); break;
      case 6: {
        Tensor* b = pick();
        if (same_shape(*a, *b)) {
          r = ops::sub(ctx, a, b);
        } else if (a->ne[0] == b->ne[0]) {
          r = ops::concat(ctx, a, ops::cont(ctx, b), 1);
        } else {
          r = ops::div(ctx, b, ops::view_1d(ctx, a, 1, 0));
        }
        break;
      }
      case 7: r = ops::sum_rows(ctx, ops::view_2d(ctx, a, a->ne[0], std::max<int64_t>(1, a->ne[1] / 2), a->nb[1], 0)); break;
      default: r = ops::soft_max(ctx, a, nullptr, 1.0f); break;
    }
    if (r->ne[0] * r->ne[1] > 4096) r = ops::scale(ctx, ops::view_1d(ctx, r, 64, 0), 1.0f);
    r->name = "op" + std::to_string(i);
    if (rng() % 7 == 0) r->flags |= kFlagOutput;
    pool.push_back(r);
    rg.graph.expand(r);
  }
  for (Tensor* n : rg.graph.nodes()) {
    if (rng() % 5 == 0) ++split;  // splits are contiguous runs of nodes
    rg.split[n] = split;
    rg.buffer[n] = static_cast<int>(rng() % 2);
  }
  // A leaf is either set before compute (-1) or, like the scheduler's input
  // copies, written at the start of the split that first reads it.
  for (Tensor* l : rg.graph.leafs()) {
    rg.buffer[l] = static_cast<int>(rng() % 2);
    rg.split[l] = -1;
    if (l->has_flag(kFlagInput) || rng() % 2) continue;
    for (Tensor* n : rg.graph.nodes()) {
      if (std::find(std::begin(n->src), std::end(n->src), l) != std::end(n->src)) {
        rg.split[l] = rg.split[n];
        break;
      }
    }
  }
}

TEST(Planner, RandomGraphsNeverOverlapLiveTensors) {
  std::mt19937 rng(1234);
  int total_reused = 0, total_in_place = 0;
  for (int iter = 0; iter < 300; ++iter) {
    RandomGraph rg;
    build_random(rg, rng, 5 + static_cast<int>(rng() % 40));
    GraphLayout layout;
    layout.buffer_of = [&](const Tensor& t) { return rg.buffer.at(&t); };
    layout.split_of = [&](const Tensor& t) { return rg.split.at(&t); };
    const MemoryPlan p = plan(rg.graph, layout, 2);
    total_reused += p.reused;
    total_in_place += p.in_place;
    for (size_t s = 0; s < p.hazards.size(); ++s) {
      for (int h : p.hazards[s]) ASSERT_LT(h, static_cast<int>(s));  // only earlier splits
    }
    expect_no_overlap(rg.graph, layout, p);
    if (HasFailure()) {
      ADD_FAILURE() << "in random graph " << iter;
      return;
    }
  }
  EXPECT_GT(total_reused, 100);
  EXPECT_GT(total_in_place, 20);
}

}  // namespace
}  // namespace weft
