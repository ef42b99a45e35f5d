// The op registry (weft/core/op_registry.h) against the two things it must
// agree with: docs/ops.md, and what the op constructors really build. The
// static_asserts in the header hold the table's own shape; these hold its
// facts.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "conformance/conformance.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/core/op_registry.h"

namespace weft {
namespace {

const char* kind_text(OpKind k) {
  switch (k) {
    case OpKind::leaf: return "leaf";
    case OpKind::compute: return "compute";
    case OpKind::view: return "view";
  }
  return "?";
}

// The row docs/ops.md must hold for r, in its column order.
std::string docs_row(const OpInfo& r) {
  std::ostringstream s;
  s << "| " << static_cast<int>(r.op) << " | `" << r.name << "` | " << kind_text(r.kind) << " | "
    << static_cast<int>(r.min_src);
  if (r.max_src != r.min_src) s << "-" << static_cast<int>(r.max_src);
  s << " | 1." << static_cast<int>(r.minor) << " | " << (r.in_place ? "yes" : "no") << " | ";
  if (r.writes_src < 0) {
    s << "-";
  } else {
    s << "src[" << static_cast<int>(r.writes_src) << "]";
  }
  s << " |";
  return s.str();
}

TEST(OpRegistry, DocsTableMatchesTheRegistry) {
  const std::string path = WEFT_SOURCE_DIR "/docs/ops.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 2 && line[0] == '|' && line[2] >= '0' && line[2] <= '9') rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), static_cast<size_t>(kOpCount)) << path << " lists " << rows.size() << " ops";
  for (int i = 0; i < kOpCount; ++i) {
    EXPECT_EQ(rows[static_cast<size_t>(i)], docs_row(kOpRegistry[static_cast<size_t>(i)])) << "docs/ops.md, op " << i;
  }
}

TEST(OpRegistry, EveryRowIsCompleteAndNamesItsOp) {
  for (const OpInfo& r : kOpRegistry) {
    SCOPED_TRACE(r.name);
    EXPECT_STREQ(op_name(r.op), r.name);
    EXPECT_EQ(op_is_view(r.op), r.kind == OpKind::view);
    // A leaf is never rebuilt nor priced; a view is rebuilt and costs
    // nothing; a computing op has both.
    EXPECT_EQ(r.rebuild != nullptr, r.kind != OpKind::leaf);
    EXPECT_EQ(r.cost != nullptr, r.kind == OpKind::compute);
    if (r.kind == OpKind::leaf) continue;
    ASSERT_NE(r.rebuild, nullptr);
    // With no sources at all, the constructor refuses the node by name.
    Context ctx;
    const int32_t params[kMaxOpParams] = {};
    const int64_t ne[kMaxDims] = {1, 1, 1, 1};
    const uint64_t nb[kMaxDims] = {4, 4, 4, 4};
    Tensor* const src[kMaxSrc] = {};
    try {
      r.rebuild(ctx, OpArgs{params, ne, nb, 0, src});
      ADD_FAILURE() << "built with no sources";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find(std::string("[") + r.name + "]"), std::string::npos) << e.what();
    }
  }
  EXPECT_STREQ(op_name(static_cast<Op>(kOpCount)), "unknown");
  EXPECT_FALSE(op_is_view(static_cast<Op>(kOpCount)));
}

// The minor column against the protocol's history (docs/rpc-protocol.md,
// "Op numbers by minor version"): ops 0-29 at 1.0, 30-33 at 1.2, 34 at 1.3,
// 35 at 1.7, 36 at 1.9.
TEST(OpRegistry, OpsKnownAtEachMinorFollowTheProtocolHistory) {
  const int expected[] = {30, 30, 34, 35, 35, 35, 35, 36, 36, 37};
  for (int minor = 0; minor < static_cast<int>(std::size(expected)); ++minor) {
    EXPECT_EQ(ops_known_at(minor), expected[minor]) << "minor " << minor;
  }
}

// Wraps the CPU executor and looks at every node the conformance suite
// builds: what the constructors really make, held to each op's row.
class RowChecker : public conformance::Executor {
 public:
  explicit RowChecker(Device& dev) : inner_(conformance::make_backend_executor(dev, 1)) {}
  std::string name() const override { return "row-checker"; }
  void allocate(Graph& g) override {
    for (Tensor* t : g.nodes()) check(*t);
    inner_->allocate(g);
  }
  void set(Tensor& t, const void* data, size_t size) override { inner_->set(t, data, size); }
  void compute(Graph& g) override { inner_->compute(g); }
  void get(const Tensor& t, void* data, size_t size) override { inner_->get(t, data, size); }
  void release() override { inner_->release(); }

  std::set<Op> seen;

 private:
  void check(const Tensor& t) {
    const OpInfo& r = op_info(t.op);
    seen.insert(t.op);
    for (int k = 0; k < kMaxSrc; ++k) {
      if (k < r.min_src) {
        EXPECT_NE(t.src[k], nullptr) << r.name << " src[" << k << "] is required";
      }
      if (k >= r.max_src) {
        EXPECT_EQ(t.src[k], nullptr) << r.name << " src[" << k << "] is past max_src";
      }
    }
    if (r.kind != OpKind::compute) return;
    // A node writing into a source is a view of that source's memory; no other computing node aliases.
    if (r.writes_src >= 0) {
      const Tensor* dst = t.src[r.writes_src];
      EXPECT_EQ(t.view_src, dst->view_src != nullptr ? dst->view_src : dst) << r.name;
    } else {
      EXPECT_EQ(t.view_src, nullptr) << r.name;
    }
    // In place: one output element per element of src[0], in its dtype.
    if (r.in_place) {
      EXPECT_TRUE(same_shape(t, *t.src[0]) && t.type == t.src[0]->type) << r.name << " " << shape_string(t);
    }
    // The rebuild adapter passes every parameter and source through: rebuilt
    // from the node's own fields it gives the same node.
    Context ctx;
    uint64_t nb[kMaxDims];
    for (int d = 0; d < kMaxDims; ++d) nb[d] = t.nb[d];
    Tensor* const* src = t.src;
    Tensor* again = r.rebuild(ctx, OpArgs{t.op_params, t.ne, nb, t.view_offs, src});
    EXPECT_EQ(again->op, t.op);
    EXPECT_TRUE(same_shape(*again, t) && again->type == t.type) << r.name;
    for (int k = 0; k < kMaxOpParams; ++k) EXPECT_EQ(again->op_params[k], t.op_params[k]) << r.name << " param " << k;
    for (int k = 0; k < kMaxSrc; ++k) EXPECT_EQ(again->src[k], t.src[k]) << r.name << " src " << k;
  }

  std::unique_ptr<conformance::Executor> inner_;
};

TEST(OpRegistry, RowsAgreeWithWhatTheConstructorsBuild) {
  auto dev = make_cpu_device(1);
  RowChecker checker(*dev);
  std::ostringstream log;
  const conformance::Summary s = conformance::run_suite(checker, log, "", true);
  EXPECT_EQ(s.failed, 0) << log.str();
  for (const OpInfo& r : kOpRegistry) {
    if (r.kind == OpKind::compute) {
      EXPECT_TRUE(checker.seen.count(r.op)) << r.name << " is in no conformance case";
    }
  }
}

}  // namespace
}  // namespace weft
