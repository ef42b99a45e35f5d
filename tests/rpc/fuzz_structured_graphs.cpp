// weft_fuzz_worker's random graph generator (fuzz_structured.h lists the
// parts). build_random_graph: a valid random graph in a conformance
// CaseBuilder: one to three ops with random shapes, dtypes and operand
// layouts (packed, transposed, permuted, strided views), sometimes followed
// by a few cheap ops on the result. Each compared tensor carries the
// conformance tolerance of what produced it (cases.h), so the driver can
// hold the worker's output to the float64 reference. The op constructors
// still check everything: a combination they refuse throws Error and the
// recipe is drawn again. This file draws sizes, shapes and layouts and
// picks the recipes; fuzz_structured_recipes.cpp has the recipes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "fuzz_structured.h"
#include "weft/core/error.h"

namespace weft::rpc::fuzz {
namespace gen {

using conformance::CaseBuilder;
using conformance::Init;
using conformance::Layout;
using conformance::Shape;

int64_t size(Rng& rng, int64_t max) {
  if (chance(rng, 0.2)) return 1;
  if (chance(rng, 0.6)) return pick(rng, 1, std::min<int64_t>(max, 9));
  return pick(rng, 1, max);
}

int64_t row(Rng& rng, DType t, int64_t max) {
  const int64_t block = traits(t).block_size;
  return is_quant(t) ? block * pick(rng, 1, std::max<int64_t>(1, max / block)) : size(rng, max);
}

Shape shape(Rng& rng, int64_t max0, bool zero_ok, DType t) {
  Shape s = {row(rng, t, max0), size(rng, 6), chance(rng, 0.6) ? 1 : pick(rng, 1, 3), chance(rng, 0.8) ? 1 : 2};
  if (zero_ok && chance(rng, 0.08)) s[static_cast<size_t>(pick(rng, 0, 3))] = 0;
  return s;
}

int64_t divisor(Rng& rng, int64_t n) {
  if (n == 0) return pick(rng, 1, 3);
  if (chance(rng, 0.4)) return n;
  if (chance(rng, 0.5)) return 1;
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k) {
    if (n % k == 0) d.push_back(k);
  }
  return d[static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(d.size()) - 1))];
}

Layout layout(Rng& rng, DType t) {
  const int r = static_cast<int>(pick(rng, 0, 9));
  if (r < 5) return Layout::packed;
  if (r < 7) return is_quant(t) ? Layout::strided : Layout::transposed;
  if (r < 9) return Layout::permuted;
  return Layout::strided;
}

std::string lay(Layout l, const char* which) {
  return conformance::layout_suffix(l, which);
}

Init data_init(DType t) {
  return t == DType::i32 ? conformance::indices(1 << 20) : Init{};
}

namespace {

// One recipe, its op family drawn; small: shapes for one small op.
Out recipe(CaseBuilder& b, Rng& rng, bool small, std::string& d) {
  const int64_t max0 = small ? 40 : 300;
  switch (pick(rng, 0, 10)) {
    case 0:
    case 1: return binary(b, rng, max0, d);
    case 2: return unary(b, rng, max0, d);
    case 3:
    case 4: return rows(b, rng, small ? 40 : 200, d);
    case 5: return rope(b, rng, d);
    case 6: return mul_mat(b, rng, small ? 64 : 256, d);
    case 7:
    case 8: return data(b, rng, small ? 64 : 128, d);
    case 9: return attention(b, rng, d);
    default: return views(b, rng, d);
  }
}

}  // namespace
}  // namespace gen

void build_random_graph(conformance::CaseBuilder& b, Rng& rng, bool small, std::string& desc) {
  using namespace gen;
  const int n = small ? 1 : static_cast<int>(pick(rng, 1, 3));
  for (int i = 0; i < n; ++i) {
    for (int attempt = 0;; ++attempt) {
      std::string d;
      try {
        Out o = recipe(b, rng, small, d);
        if (o.dest == nullptr) o.dest = o.root;
        b.output(o.root, o.dest, o.tol);
        const bool floats = o.root == o.dest && o.root->type != DType::i32 && !is_quant(o.root->type);
        try {
          for (int p = 0; floats && p < 2 && chance(rng, 0.35); ++p) {
            std::string pd;
            o = post(b, rng, o, pd);
            b.output(o.root, o.tol);
            d += pd;
          }
        } catch (const Error&) {  // the outputs so far stand
        }
        desc += (desc.empty() ? "" : "; ") + d;
        break;
      } catch (const Error&) {
        if (attempt == 20) throw;  // tensors of the failed try stay unreferenced in the context
      }
    }
  }
}

}  // namespace weft::rpc::fuzz
