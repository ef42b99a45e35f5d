// weft_fuzz_worker's valid graphs (fuzz_structured.h lists the parts):
// a random graph (or a conformance case) uploaded with each leaf's inputs,
// computed by the worker and held to the conformance suite's float64
// reference, sometimes run again by graph id on new inputs. The other
// scenarios use make_graph and upload for graphs of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conformance/cases.h"
#include "conformance/reference.h"
#include "fuzz_structured.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using namespace wtest;

namespace {

// Bytes of packed leaf t holding values (conformance runner's conversion).
Bytes leaf_bytes(const Tensor& t, const std::vector<float>& values) {
  Bytes bytes(t.nbytes());
  if (t.type == DType::i32) {
    for (size_t i = 0; i < values.size(); ++i) {
      const auto v = static_cast<int32_t>(values[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  } else if (!values.empty()) {
    from_f32(t.type, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
  }
  return bytes;
}

}  // namespace

std::unique_ptr<Placed> make_graph(Rng& rng, bool small) {
  static const std::vector<conformance::Case> kCases = conformance::all_cases();
  for (int tries = 0;; ++tries) {
    auto p = std::make_unique<Placed>();
    if (!small && chance(rng, 0.15)) {
      const conformance::Case& c = kCases[static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(kCases.size()) - 1))];
      c.build(p->b);
      p->desc = "conformance case " + c.name;
    } else {
      build_random_graph(p->b, rng, small, p->desc);
    }
    p->finish();
    // A node reading a source past the wire's kWireSrc (flash_attn with
    // sinks) is one the client keeps on the host by design: the graph
    // codec refuses it, so such a case cannot be sent whole.
    bool supported = true;
    for (Tensor* t : p->g.nodes()) {
      if (!op_is_view(t->op) && !env->cpu0->supports_op(*t)) supported = false;
      for (int k = kWireSrc; k < kMaxSrc; ++k) supported = supported && t->src[k] == nullptr;
    }
    if (supported || tries == 50) return p;
    ++g_stats.unsupported_graphs;
  }
}

void upload(Conn& c, uint64_t h, Placed& p, Rng& rng, conformance::Reference& ref) {
  for (Tensor* leaf : p.g.leafs()) {
    std::vector<float> v(static_cast<size_t>(leaf->nelements()));
    const conformance::Init* init = p.b.init_for(leaf);
    if (init != nullptr) {
      (*init)(*leaf, rng, v);
    } else {
      conformance::uniform(-1.0f, 1.0f)(*leaf, rng, v);
    }
    const Bytes bytes = leaf_bytes(*leaf, v);
    if (!bytes.empty()) c.set(h, p.offset(*leaf), bytes.data(), bytes.size());
    ref.load_leaf(*leaf, bytes.data(), bytes.size());
  }
}

// Reads every compared tensor and holds it to ref: the normalized error of
// conformance/cases.h (i32 exact). Returns "" or what differed. One change:
// a float output of under 8 elements (random shapes make them) is instead
// held per element to max(1%, 3 sqrt(tol)) of max(1, |ref|), as one tiny
// value made by cancellation (a short dot product, gelu at -3) has a
// relative error that f32 arithmetic cannot bound; exact stays exact.
std::string check_outputs(Conn& c, uint64_t h, Placed& p, conformance::Reference& ref) {
  std::string failure;
  for (const auto& cmp : p.b.compared()) {
    const Tensor& t = *cmp.t;
    const Bytes got = c.get(h, p.where(t), t.nbytes());
    if (got.size() != t.nbytes())
      return "GET_TENSOR of " + shape_string(t) + " gave " + std::to_string(got.size()) + " bytes";
    const std::vector<double> out = conformance::decode_tensor(t, got.data(), got.size());
    const std::vector<double> want = ref.values(t);
    const bool exact = t.type == DType::i32 || cmp.tol == 0.0;
    const bool tiny = !exact && want.size() < 8;
    const double tiny_rel = std::max(1e-2, 3.0 * std::sqrt(cmp.tol));
    double num = 0.0, den = 0.0, diff = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = out[i] - want[i];
      num += d * d;
      den += want[i] * want[i];
      if (!(tiny ? std::fabs(d) <= tiny_rel * std::max(1.0, std::fabs(want[i])) : out[i] == want[i])) diff += 1.0;
    }
    const double err = t.type == DType::i32 || tiny ? diff : num / std::max(den, 1e-30);
    if (!(err <= (t.type == DType::i32 || tiny ? 0.0 : cmp.tol))) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s %s: err=%.3g (tol %.3g%s)", failure.empty() ? "" : ";",
                    shape_string(t).c_str(), err, cmp.tol,
                    t.type == DType::i32 ? ", i32 elements that differ"
                    : tiny               ? ", tiny: elements off"
                                         : "");
      failure += buf;
    }
  }
  return failure;
}

void run_valid(Conn& c, Rng& rng, bool small, std::string& desc) {
  auto p = make_graph(rng, small);
  desc += p->desc;
  set_case_line(desc);
  const uint64_t h = c.alloc(0, p->bytes);
  if (h == 0) return;  // the failure is recorded
  conformance::Reference ref;
  upload(c, h, *p, rng, ref);
  const uint64_t id = rng();
  const Bytes encoded = p->encode(h);
  c.compute(0, id, &encoded);
  if (chance(rng, 0.3)) c.synchronize(0);
  ref.run(p->g);
  std::string f = check_outputs(c, h, *p, ref);
  if (!f.empty()) ADD_FAILURE() << "valid graph [" << desc << "] differs from the reference:" << f;
  if (f.empty() && chance(rng, 0.3)) {  // the stored graph, by id, on new inputs
    conformance::Reference again;
    upload(c, h, *p, rng, again);
    c.compute(0, id, nullptr);
    again.run(p->g);
    f = check_outputs(c, h, *p, again);
    if (!f.empty()) ADD_FAILURE() << "valid graph [" << desc << "] run again by id differs:" << f;
  }
  c.free_buffer(h);
}

}  // namespace weft::rpc::fuzz
