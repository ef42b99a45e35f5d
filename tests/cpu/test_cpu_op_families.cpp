// The CPU backend's op family table: every Op has a family, and each
// family's support rule, scratch size and kernel agree. Every op is built
// with every dtype pair its constructor accepts, packed and with strided
// operands; a node the family supports must run on 1 and 3 threads inside
// exactly the scratch the family sized (and with no scratch given at all),
// and a node it refuses must be refused by the backend before anything runs.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cpu/bind_graph.h"
#include "kernels.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft {
namespace {

constexpr int64_t K = 256;  // one K-quant super-block: a row every dtype can form

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

// A tensor of shape ne; when strided (and not quantized) a view taking every
// other element of each row of a twice-wider tensor, so nb[0] is two units.
Tensor* operand(Context& ctx, DType t, std::initializer_list<int64_t> ne, bool strided) {
  if (!strided || traits(t).quantized) return ctx.new_tensor(t, ne);
  std::vector<int64_t> wide(ne);
  wide[0] *= 2;
  Tensor* base = ctx.new_tensor(t, std::span<const int64_t>(wide));
  std::vector<size_t> nb(base->nb, base->nb + ne.size());
  nb[0] *= 2;
  return ops::view(ctx, base, std::span<const int64_t>(ne.begin(), ne.size()), nb, 0);
}

// The op on tiny operands of dtypes ta and tb (the first two operands; other
// operands take the dtype the op requires). nullptr for views and Op::none,
// and for ops of one operand when tb is not f32 (each case built once).
Tensor* build(Context& ctx, Op op, DType ta, DType tb, bool s) {
  const DType i32 = DType::i32;
  const bool repeat = tb != DType::f32;  // a one-operand op was built with tb == f32
  switch (op) {
    case Op::none:
    case Op::view:
    case Op::reshape:
    case Op::permute:
    case Op::transpose: return nullptr;
    case Op::add: return ops::add(ctx, operand(ctx, ta, {K, 3, 2}, s), operand(ctx, tb, {K, 1, 2}, s));
    case Op::sub: return ops::sub(ctx, operand(ctx, ta, {K, 3, 2}, s), operand(ctx, tb, {1, 3, 1}, s));
    case Op::mul: return ops::mul(ctx, operand(ctx, ta, {K, 3, 2}, s), operand(ctx, tb, {K, 3, 2}, s));
    case Op::div: return ops::div(ctx, operand(ctx, ta, {K, 3, 2}, s), operand(ctx, tb, {K, 1, 1}, s));
    case Op::scale: return repeat ? nullptr : ops::scale(ctx, operand(ctx, ta, {K, 3}, s), 0.5f);
    case Op::sqr: return repeat ? nullptr : ops::sqr(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::sqrt: return repeat ? nullptr : ops::sqrt(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::silu: return repeat ? nullptr : ops::silu(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::gelu: return repeat ? nullptr : ops::gelu(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::gelu_erf: return repeat ? nullptr : ops::gelu_erf(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::sigmoid: return repeat ? nullptr : ops::sigmoid(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::softcap: return repeat ? nullptr : ops::softcap(ctx, operand(ctx, ta, {K, 3}, s), 30.0f);
    case Op::swiglu: return ops::swiglu(ctx, operand(ctx, ta, {K, 3}, s), operand(ctx, tb, {K, 3}, s));
    case Op::swiglu_oai:
      return ops::swiglu_oai(ctx, operand(ctx, ta, {K, 3}, s), operand(ctx, tb, {K, 3}, s), 1.702f, 7.0f);
    case Op::rms_norm: return repeat ? nullptr : ops::rms_norm(ctx, operand(ctx, ta, {K, 3}, s), 1e-5f);
    case Op::norm: return repeat ? nullptr : ops::norm(ctx, operand(ctx, ta, {K, 3}, s), 1e-5f);
    case Op::soft_max: return ops::soft_max(ctx, operand(ctx, ta, {K, 3, 2}, s), operand(ctx, tb, {K, 4}, s), 0.5f);
    case Op::rope:
      return ops::rope(ctx, operand(ctx, ta, {8, 2, 3}, s), operand(ctx, tb, {3}, s), 6, RopeMode::neox, 1e4f);
    case Op::rope_ext:  // factors must be packed
      return ops::rope_ext(ctx, operand(ctx, ta, {8, 2, 3}, s), operand(ctx, tb, {3}, s),
                           operand(ctx, DType::f32, {3}, false), 6, RopeMode::normal, 1e4f, {0.5f, 1.2f});
    case Op::sum_rows: return repeat ? nullptr : ops::sum_rows(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::argmax: return repeat ? nullptr : ops::argmax(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::argsort:
      return repeat ? nullptr : ops::argsort(ctx, operand(ctx, ta, {K, 3}, s), SortOrder::descending);
    case Op::top_k: return repeat ? nullptr : ops::top_k(ctx, operand(ctx, ta, {K, 3}, s), 4);
    case Op::mul_mat: return ops::mul_mat(ctx, operand(ctx, ta, {K, 5, 2}, s), operand(ctx, tb, {K, 3, 4}, s));
    case Op::mul_mat_id:
      return ops::mul_mat_id(ctx, operand(ctx, ta, {K, 5, 4}, s), operand(ctx, tb, {K, 2, 3}, s),
                             operand(ctx, i32, {2, 3}, s));
    case Op::get_rows: return ops::get_rows(ctx, operand(ctx, ta, {K, 4, 2}, s), operand(ctx, tb, {3, 2}, s));
    case Op::set_rows:
      return ops::set_rows(ctx, operand(ctx, ta, {K, 4, 2}, s), operand(ctx, tb, {K, 3, 2}, s),
                           operand(ctx, i32, {3, 2}, s));
    case Op::routed_rows:  // ids of dtype tb
      return ops::routed_rows(ctx, operand(ctx, ta, {K, 3}, s), operand(ctx, tb, {2, 3}, s), 1, 2);
    case Op::cpy: return ops::cpy(ctx, operand(ctx, ta, {K, 3}, s), operand(ctx, tb, {K, 3}, s));
    case Op::cont: return repeat ? nullptr : ops::cont(ctx, operand(ctx, ta, {K, 3}, s));
    case Op::concat: return ops::concat(ctx, operand(ctx, ta, {K, 3}, s), operand(ctx, tb, {K, 2}, s), 1);
    case Op::flash_attn:  // q of dtype ta, k and v of dtype tb, an f32 mask
      return ops::flash_attn(ctx, operand(ctx, ta, {K, 3, 4}, s), operand(ctx, tb, {K, 5, 2}, s),
                             operand(ctx, tb, {K, 5, 2}, s), operand(ctx, DType::f32, {5, 3}, false), 0.5f, 2.0f,
                             operand(ctx, DType::f32, {4}, false));
  }
  return nullptr;
}

// Runs node's kernel on nth threads one after another, each with exactly
// scratch_bytes(node) bytes of its own (a heap block of that size, so a
// sanitizer sees any write past it), or with none when no_scratch.
void run_node(Tensor& node, int nth, bool no_scratch) {
  const size_t bytes = cpu::scratch_bytes(node, nth);
  for (int ith = 0; ith < nth; ++ith) {
    std::unique_ptr<uint8_t[]> scratch(no_scratch ? nullptr : new uint8_t[bytes > 0 ? bytes : 1]);
    const cpu::KernelContext kc{ith, nth, scratch.get(), no_scratch ? 0 : bytes};
    cpu::compute_node(kc, node);
  }
}

std::string case_name(Op op, DType ta, DType tb, bool strided) {
  return std::string(op_name(op)) + "(" + dtype_str(ta) + ", " + dtype_str(tb) + (strided ? ", strided)" : ")");
}

TEST(CpuOpFamilies, EveryOpHasOneFamily) {
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const cpu::OpFamily& f = cpu::op_family(op);
    ASSERT_NE(f.name, nullptr) << op_name(op);
    EXPECT_NE(std::string(f.name), "") << op_name(op);
    EXPECT_NE(f.supports, nullptr) << op_name(op);
    EXPECT_NE(f.scratch_bytes, nullptr) << op_name(op);
    EXPECT_NE(f.compute, nullptr) << op_name(op);
    const bool computes = !(op_is_view(op) || op == Op::none);
    EXPECT_EQ(&f != &cpu::kNoComputeFamily, computes) << op_name(op) << " is in family " << f.name;
  }
  Tensor bad;
  bad.op = static_cast<Op>(kOpCount);
  EXPECT_FALSE(cpu::supports(bad));
  EXPECT_THROW(cpu::op_family(bad.op), Error);
}

TEST(CpuOpFamilies, SupportScratchAndKernelAgreeForEveryOpAndDtype) {
  std::unique_ptr<Device> cpu = make_cpu_device(2);
  std::unique_ptr<Backend> backend = cpu->create_backend();
  std::vector<std::string> packed_refused;  // accepted by the constructor, packed, yet refused
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (op_is_view(op) || op == Op::none) continue;
    int supported = 0;
    for (int a = 0; a < kDTypeCount; ++a) {
      for (int b = 0; b < kDTypeCount; ++b) {
        for (bool strided : {false, true}) {
          const auto ta = static_cast<DType>(a), tb = static_cast<DType>(b);
          Context ctx;
          Tensor* node = nullptr;
          try {
            node = build(ctx, op, ta, tb, strided);
          } catch (const Error&) {
            continue;  // the constructor refuses this combination
          }
          if (node == nullptr) continue;
          ASSERT_EQ(node->op, op);
          const std::string name = case_name(op, ta, tb, strided);
          EXPECT_EQ(&cpu::op_family(op), &cpu::op_family(node->op));
          Graph g;
          g.expand(node);
          std::unique_ptr<Buffer> buffer = weft::testing::bind_graph(*cpu, g);
          EXPECT_EQ(cpu->supports_op(*node), cpu::supports(*node)) << name;
          if (!cpu::supports(*node)) {
            if (!strided) packed_refused.push_back(name);
            try {
              backend->compute(g);
              ADD_FAILURE() << name << ": refused by supports() yet computed";
            } catch (const Error& e) {
              EXPECT_EQ(e.kind(), ErrorKind::unsupported) << name << ": " << e.what();
            }
            continue;
          }
          ++supported;
          for (Tensor* n : g.nodes()) {
            if (op_is_view(n->op)) continue;
            ASSERT_TRUE(cpu::supports(*n)) << name << ": " << op_name(n->op);
            EXPECT_NO_THROW(run_node(*n, 1, false)) << name;
            EXPECT_NO_THROW(run_node(*n, 3, false)) << name;
            EXPECT_NO_THROW(run_node(*n, 2, true)) << name << " without scratch";
          }
          EXPECT_NO_THROW(backend->compute(g)) << name;
        }
      }
    }
    EXPECT_GT(supported, 0) << op_name(op) << ": no dtype combination is supported";
  }
  // The CPU supports everything the constructors accept with packed operands
  // (docs/architecture.md, the support matrix).
  std::string list;
  for (const std::string& s : packed_refused) list += "\n  " + s;
  EXPECT_TRUE(packed_refused.empty()) << "refused:" << list;
}

// Nodes the constructors would not make, edited by hand into dtypes a
// family does not handle: supports() must say no, and the backend must
// refuse the graph before running anything.
TEST(CpuOpFamilies, UnsupportedCombinationsAreRefused) {
  std::unique_ptr<Device> cpu = make_cpu_device(1);
  std::unique_ptr<Backend> backend = cpu->create_backend();
  struct Case {
    const char* what;
    Tensor* (*make)(Context& ctx);
  };
  const Case cases[] = {
      {"add of i32", [](Context& c) {
         Tensor* n = ops::add(c, c.new_tensor(DType::f32, {4}), c.new_tensor(DType::f32, {4}));
         n->src[0] = c.new_tensor(DType::i32, {4});
         return n;
       }},
      {"sqr into another dtype", [](Context& c) {
         Tensor* n = ops::sqr(c, c.new_tensor(DType::f32, {4}));
         n->type = DType::f16;
         return n;
       }},
      {"swiglu of q8_0", [](Context& c) {
         Tensor* n = ops::swiglu(c, c.new_tensor(DType::f32, {32}), c.new_tensor(DType::f32, {32}));
         n->src[1] = c.new_tensor(DType::q8_0, {32});
         return n;
       }},
      {"rms_norm of f16", [](Context& c) {
         Tensor* n = ops::rms_norm(c, c.new_tensor(DType::f32, {4}), 1e-5f);
         n->src[0] = c.new_tensor(DType::f16, {4});
         return n;
       }},
      {"soft_max with an i32 mask", [](Context& c) {
         Tensor* n = ops::soft_max(c, c.new_tensor(DType::f32, {4, 2}), c.new_tensor(DType::f32, {4, 2}), 1.0f);
         n->src[1] = c.new_tensor(DType::i32, {4, 2});
         return n;
       }},
      {"rope with f32 positions", [](Context& c) {
         Tensor* n = ops::rope(c, c.new_tensor(DType::f32, {4, 1, 2}), c.new_tensor(DType::i32, {2}), 4,
                               RopeMode::normal, 1e4f);
         n->src[1] = c.new_tensor(DType::f32, {2});
         return n;
       }},
      {"rope_ext with f16 factors", [](Context& c) {
         Tensor* n = ops::rope_ext(c, c.new_tensor(DType::f32, {4, 1, 2}), c.new_tensor(DType::i32, {2}),
                                   c.new_tensor(DType::f32, {2}), 4, RopeMode::neox, 1e4f);
         n->src[2] = c.new_tensor(DType::f16, {2});
         return n;
       }},
      {"softcap into another dtype", [](Context& c) {
         Tensor* n = ops::softcap(c, c.new_tensor(DType::f32, {4}), 2.0f);
         n->type = DType::bf16;
         return n;
       }},
      {"sigmoid of i32", [](Context& c) {
         Tensor* n = ops::sigmoid(c, c.new_tensor(DType::f32, {4}));
         n->src[0] = c.new_tensor(DType::i32, {4});
         n->type = DType::i32;
         return n;
       }},
      {"argsort of bf16", [](Context& c) {
         Tensor* n = ops::argsort(c, c.new_tensor(DType::f32, {4}), SortOrder::ascending);
         n->src[0] = c.new_tensor(DType::bf16, {4});
         return n;
       }},
      {"sum_rows of i32", [](Context& c) {
         Tensor* n = ops::sum_rows(c, c.new_tensor(DType::f32, {4}));
         n->src[0] = c.new_tensor(DType::i32, {4});
         return n;
       }},
      {"mul_mat of f16 activations", [](Context& c) {
         Tensor* n = ops::mul_mat(c, c.new_tensor(DType::f32, {32, 2}), c.new_tensor(DType::f32, {32, 3}));
         n->src[1] = c.new_tensor(DType::f16, {32, 3});
         return n;
       }},
      {"mul_mat of i32 weights", [](Context& c) {
         Tensor* n = ops::mul_mat(c, c.new_tensor(DType::f32, {32, 2}), c.new_tensor(DType::f32, {32, 3}));
         n->src[0] = c.new_tensor(DType::i32, {32, 2});
         return n;
       }},
      {"mul_mat_id with f32 ids", [](Context& c) {
         Tensor* n = ops::mul_mat_id(c, c.new_tensor(DType::f32, {32, 2, 3}), c.new_tensor(DType::f32, {32, 1, 2}),
                                     c.new_tensor(DType::i32, {1, 2}));
         n->src[2] = c.new_tensor(DType::f32, {1, 2});
         return n;
       }},
      {"get_rows with f32 indices", [](Context& c) {
         Tensor* n = ops::get_rows(c, c.new_tensor(DType::f32, {4, 3}), c.new_tensor(DType::i32, {2}));
         n->src[1] = c.new_tensor(DType::f32, {2});
         return n;
       }},
      {"set_rows into i32", [](Context& c) {
         Tensor* n = ops::set_rows(c, c.new_tensor(DType::f32, {4, 3}), c.new_tensor(DType::f32, {4, 2}),
                                   c.new_tensor(DType::i32, {2}));
         n->type = DType::i32;
         return n;
       }},
      {"cpy from q8_0 into f16", [](Context& c) {
         Tensor* n = ops::cpy(c, c.new_tensor(DType::f32, {32}), c.new_tensor(DType::f16, {32}));
         n->src[0] = c.new_tensor(DType::q8_0, {32});
         return n;
       }},
      {"concat of f32 and f16", [](Context& c) {
         Tensor* n = ops::concat(c, c.new_tensor(DType::f32, {4, 2}), c.new_tensor(DType::f32, {4, 3}), 1);
         n->src[1] = c.new_tensor(DType::f16, {4, 3});
         return n;
       }},
      {"concat of q8_0", [](Context& c) {
         Tensor* n = ops::concat(c, c.new_tensor(DType::f32, {32, 2}), c.new_tensor(DType::f32, {32, 3}), 1);
         n->src[0] = c.new_tensor(DType::q8_0, {32, 2});
         n->src[1] = c.new_tensor(DType::q8_0, {32, 3});
         return n;
       }},
  };
  for (const Case& c : cases) {
    Context ctx;
    Tensor* node = c.make(ctx);
    EXPECT_FALSE(cpu::supports(*node)) << c.what;
    EXPECT_FALSE(cpu->supports_op(*node)) << c.what;
    Graph g;
    g.expand(node);
    std::unique_ptr<Buffer> buffer = weft::testing::bind_graph(*cpu, g);
    try {
      backend->compute(g);
      ADD_FAILURE() << c.what << ": computed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::unsupported) << c.what << ": " << e.what();
    }
  }
}

// cpy from a quantized tensor into f32 (the q8_0 crossings of a tensor
// split) dequantizes each packed row: for q8_0 the values are d * q, with d
// the block's f16 scale, read here from the bytes themselves; a row split
// over threads gives the same floats.
TEST(CpuOpFamilies, CpyDequantizesQ8_0Rows) {
  std::unique_ptr<Device> cpu = make_cpu_device(2);
  std::unique_ptr<Backend> backend = cpu->create_backend();
  constexpr int64_t kCols = 96, kRows = 5;
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::q8_0, {kCols, kRows});
  Tensor* out = ops::cpy(ctx, q, ctx.new_tensor(DType::f32, {kCols, kRows}));
  Graph g;
  g.expand(out);
  std::unique_ptr<Buffer> buffer = weft::testing::bind_graph(*cpu, g);
  std::vector<float> values(static_cast<size_t>(kCols * kRows));
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  from_f32(DType::q8_0, values.data(), q->data, kCols * kRows);
  backend->compute(g);
  const auto* blocks = static_cast<const BlockQ8_0*>(q->data);
  const auto* got = static_cast<const float*>(out->data);
  for (int64_t i = 0; i < kCols * kRows; ++i) {
    const BlockQ8_0& b = blocks[i / kQuantBlock];
    const double want = static_cast<double>(f16_to_f32(b.d)) * b.q[i % kQuantBlock];
    ASSERT_EQ(static_cast<double>(got[i]), want) << "element " << i;
    EXPECT_NEAR(got[i], values[static_cast<size_t>(i)], 3.0 / 127) << "element " << i;
  }
  // Into anything but a packed f32 tensor of its shape: refused by the constructor.
  EXPECT_THROW(ops::cpy(ctx, q, ctx.new_tensor(DType::f16, {kCols, kRows})), Error);
  EXPECT_THROW(ops::cpy(ctx, q, ctx.new_tensor(DType::f32, {kCols * kRows})), Error);
  EXPECT_THROW(ops::cpy(ctx, q, ctx.new_tensor(DType::q8_0, {kCols, kRows})), Error);
}

}  // namespace
}  // namespace weft
