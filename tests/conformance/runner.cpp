// run_suite: builds each case's graph, runs it through the Executor and the
// reference, and compares.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "conformance/cases.h"
#include "conformance/conformance.h"
#include "conformance/reference.h"
#include "weft/core/error.h"

namespace weft::conformance {
namespace {

// FNV-1a of the case name: a fixed seed per case, independent of the order
// or the filter.
uint64_t seed_of(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Bytes of leaf t (packed) holding values converted to t's dtype.
std::vector<uint8_t> encode(const Tensor& t, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(t.nbytes());
  if (t.type == DType::i32) {
    for (size_t i = 0; i < values.size(); ++i) {
      const auto v = static_cast<int32_t>(values[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  } else {
    from_f32(t.type, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
  }
  return bytes;
}

struct Verdict {
  bool ok = true;
  double err = 0.0;
  double tol = 0.0;
  bool exact = false;  // i32: err counts mismatches
};

Verdict compare(const Tensor& t, const std::vector<double>& out, const std::vector<double>& ref, double tol) {
  Verdict v;
  v.tol = tol;
  if (t.type == DType::i32) {
    v.exact = true;
    for (size_t i = 0; i < ref.size(); ++i) v.err += out[i] != ref[i] ? 1.0 : 0.0;
    v.ok = v.err == 0.0;
    return v;
  }
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  v.err = num / std::max(den, 1e-30);
  v.ok = v.err <= tol;  // false for NaN
  return v;
}

std::string format_err(const Verdict& v) {
  char buf[96];
  if (v.exact) {
    std::snprintf(buf, sizeof buf, "err=%.0f (tol 0: i32 elements that differ)", v.err);
  } else {
    std::snprintf(buf, sizeof buf, "err=%.3g (tol %.3g)", v.err, v.tol);
  }
  return buf;
}

// The prefix of run_case's answer for a case the executor does not run.
constexpr std::string_view kSkip = "skip: ";

// Runs one case; returns "" on success, the failure text, or kSkip and the
// op of a node the executor does not run.
std::string run_case(Executor& ex, const Case& c) {
  Context ctx;
  CaseBuilder b(ctx);
  c.build(b);
  Graph g;
  for (Tensor* root : b.roots()) g.expand(root);
  for (const Tensor* node : g.nodes())
    if (!ex.runs(*node)) return std::string(kSkip) + ex.name() + " does not run this " + op_name(node->op);

  struct Release {
    Executor& ex;
    bool armed = false;
    ~Release() {
      if (armed) ex.release();
    }
  } release{ex, true};
  ex.allocate(g);

  Rng rng(seed_of(c.name));
  Reference ref;
  for (Tensor* leaf : g.leafs()) {
    if (!leaf->is_contiguous())
      fail(ErrorKind::internal, "conformance", "leaf " + shape_string(*leaf) + " is not packed");
    std::vector<float> values(static_cast<size_t>(leaf->nelements()));
    const Init* init = b.init_for(leaf);
    if (init != nullptr) {
      (*init)(*leaf, rng, values);
    } else {
      uniform(-1.0f, 1.0f)(*leaf, rng, values);
    }
    const std::vector<uint8_t> bytes = encode(*leaf, values);
    ex.set(*leaf, bytes.data(), bytes.size());
    ref.load_leaf(*leaf, bytes.data(), bytes.size());
  }
  ex.compute(g);
  ref.run(g);

  std::string failure;
  for (const CaseBuilder::Compared& cmp : b.compared()) {
    std::vector<uint8_t> bytes(cmp.t->nbytes());
    ex.get(*cmp.t, bytes.data(), bytes.size());
    const std::vector<double> out = decode_tensor(*cmp.t, bytes.data(), bytes.size());
    const Verdict v = compare(*cmp.t, out, ref.values(*cmp.t), cmp.tol);
    if (!v.ok) {
      if (!failure.empty()) failure += "; ";
      if (b.compared().size() > 1) failure += (cmp.t->name.empty() ? shape_string(*cmp.t) : cmp.t->name) + " ";
      failure += format_err(v);
    }
  }
  return failure;
}

}  // namespace

Summary run_suite(Executor& ex, std::ostream& out, std::string_view filter, bool quiet) {
  Summary s;
  for (const Case& c : all_cases()) {
    if (c.name.find(filter) == std::string::npos) continue;
    std::string failure;
    try {
      failure = run_case(ex, c);
    } catch (const Error& e) {
      failure = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      failure = std::string("error: ") + e.what();
    }
    if (failure.empty()) {
      ++s.passed;
      if (!quiet) out << c.name << ": OK\n";
    } else if (failure.starts_with(kSkip)) {
      ++s.skipped;
      out << c.name << ": SKIP (" << failure.substr(kSkip.size()) << ")\n";
    } else {
      ++s.failed;
      out << c.name << ": FAIL " << failure << "\n";
    }
    out.flush();
  }
  out << s.passed << " passed, " << s.failed << " failed";
  if (s.skipped > 0) out << ", " << s.skipped << " skipped";
  out << "\n";
  return s;
}

}  // namespace weft::conformance
