// The executor: its placement description (layers, and head ranges as data)
// and what it runs, against the same model run whole on one device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/executor.h"

namespace {

namespace fs = std::filesystem;
using weft::Executor;
using weft::LayerPlacement;
using weft::Placement;
using weft::PlacementPart;

std::string error_of(const std::function<void()>& f, weft::ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const weft::Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

// Devices only as distinct addresses: a placement's checks read none of them.
class ExecutorPlacement : public ::testing::Test {
 protected:
  std::unique_ptr<weft::Device> a_ = weft::make_cpu_device(1);
  std::unique_ptr<weft::Device> b_ = weft::make_cpu_device(1);
  PlacementPart part(weft::Device* d, const char* label, int64_t first, int64_t last, int64_t h0 = 0, int64_t h1 = 0) {
    return {.device = d, .label = label, .first_layer = first, .last_layer = last, .first_head = h0, .last_head = h1};
  }
};

TEST_F(ExecutorPlacement, ByLayersDescribesEachRun) {
  const std::vector<LayerPlacement> layers{{a_.get(), 0, 10}, {b_.get(), 10, 32}, {b_.get(), 32, 32}};
  Placement pl = Placement::by_layers(layers);
  pl.parts[0].label = "A";
  pl.parts[1].label = "B";
  pl.parts[2].label = "C";
  EXPECT_NO_THROW(pl.check(32, 32, 8));
  EXPECT_FALSE(pl.splits_heads());
  EXPECT_EQ(pl.layer_bounds(), (std::vector<int64_t>{0, 10, 32, 32}));
  EXPECT_EQ(pl.describe(), "layers 0-9 on A; layers 10-31 on B; no layers on C");
}

TEST_F(ExecutorPlacement, HeadRangesAreDataThatDescribeTensorParallelism) {
  // Heads 0-15 of every layer on A, 16-31 on B.
  const Placement tp{{part(a_.get(), "A", 0, 32, 0, 16), part(b_.get(), "B", 0, 32, 16, 32)}};
  EXPECT_NO_THROW(tp.check(32, 32, 8));
  EXPECT_TRUE(tp.splits_heads());
  EXPECT_EQ(tp.describe(), "layers 0-31: heads 0-15 on A, 16-31 on B");
  // Mixed: a pipeline stage of whole layers, then a stage cut by heads.
  const Placement mixed{{part(a_.get(), "A", 0, 4), part(a_.get(), "A", 4, 8, 0, 2), part(b_.get(), "B", 4, 8, 2, 4)}};
  EXPECT_NO_THROW(mixed.check(8, 4, 2));
  EXPECT_EQ(mixed.describe(), "layers 0-3 on A; layers 4-7: heads 0-1 on A, 2-3 on B");
}

TEST_F(ExecutorPlacement, ImpossiblePlacementsAreRefusedByName) {
  const auto refused = [](const Placement& pl, int64_t n_layer, int64_t n_head, int64_t n_head_kv) {
    weft::ErrorKind kind{};
    const std::string e = error_of([&] { pl.check(n_layer, n_head, n_head_kv); }, &kind);
    EXPECT_EQ(kind, weft::ErrorKind::invalid_input) << e;
    return e;
  };
  EXPECT_NE(refused(Placement{}, 4, 4, 4).find("at least one part"), std::string::npos);
  EXPECT_NE(refused(Placement{{part(nullptr, "A", 0, 4)}}, 4, 4, 4).find("part 0 has no device"), std::string::npos);
  // A gap between runs of layers, and one that stops short.
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 2), part(b_.get(), "B", 3, 4)}}, 4, 4, 4)
                .find("(B) [3, 4) does not continue at layer 2"),
            std::string::npos);
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 3)}}, 4, 4, 4).find("ends at layer 3 of 4"), std::string::npos);
  // Heads that leave a gap, overlap, stop short, or split a key/value group
  // (8 heads over 2 kv heads: groups of 4).
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 4, 0, 4), part(b_.get(), "B", 0, 4, 5, 8)}}, 4, 8, 2)
                .find("heads [5, 8) do not continue at head 4"),
            std::string::npos);
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 4, 0, 4), part(b_.get(), "B", 0, 4, 2, 8)}}, 4, 8, 2)
                .find("do not continue"),
            std::string::npos);
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 4, 0, 4)}}, 4, 8, 2).find("heads end at 4 of 8"),
            std::string::npos);
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 4, 0, 2), part(b_.get(), "B", 0, 4, 2, 8)}}, 4, 8, 2)
                .find("split a group of 4"),
            std::string::npos);
  EXPECT_NE(refused(Placement{{part(a_.get(), "A", 0, 0, 0, 4), part(b_.get(), "B", 0, 4)}}, 4, 4, 4)
                .find("cuts heads of no layers"),
            std::string::npos);
}

class ExecutorRun : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("weft_executor_" + std::to_string(::getpid()) + ".gguf")).string();
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 4;
    weft::model::write_demo_model(path_, spec);
    file_ = weft::GgufFile::open(path_);
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
  std::unique_ptr<weft::GgufFile> file_;
  std::unique_ptr<weft::Device> a_ = weft::make_cpu_device(1);
  std::unique_ptr<weft::Device> b_ = weft::make_cpu_device(1);
};

// Two devices of this process cutting every layer by heads (tensor
// parallelism; tests/model/test_tensor_parallel.cpp runs it over workers
// against float64 references) compute what one device does.
TEST_F(ExecutorRun, APlacementCuttingHeadsRunsAsTheWholeModel) {
  const std::vector<int32_t> tokens{1, 300, 301, 302, 303, 304};
  Executor whole(*file_, *a_, 64);
  const std::vector<float> want = whole.eval(tokens, 0);
  const Placement tp{{{.device = a_.get(), .label = "A", .first_layer = 0, .last_layer = 4, .first_head = 0, .last_head = 2},
                      {.device = b_.get(), .label = "B", .first_layer = 0, .last_layer = 4, .first_head = 2, .last_head = 4}}};
  Executor split(*file_, tp, 64);
  EXPECT_EQ(split.placement().describe(), "layers 0-3: heads 0-1 on A, 2-3 on B");
  EXPECT_EQ(split.model().layer_part(3), 0);  // the run's first part holds the layers
  ASSERT_EQ(split.model().layer(3).shards.size(), 2u);
  EXPECT_EQ(split.model().layer(3).shards[1].part, 1);
  const std::vector<float> got = split.eval(tokens, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
}

TEST_F(ExecutorRun, AGeneralPlacementByLayersRunsAsTheWholeModel) {
  const std::vector<int32_t> tokens{1, 300, 301, 302, 303, 304};
  Executor whole(*file_, *a_, 64);
  const std::vector<float> want = whole.eval(tokens, 0);
  const Placement pl{{{.device = a_.get(), .label = "A", .first_layer = 0, .last_layer = 1},
                      {.device = b_.get(), .label = "B", .first_layer = 1, .last_layer = 4}}};
  Executor split(*file_, pl, 64);
  EXPECT_EQ(split.placement().describe(), "layers 0 on A; layers 1-3 on B");
  EXPECT_EQ(split.model().n_parts(), 2);
  EXPECT_EQ(split.model().layer_part(0), 0);
  EXPECT_EQ(split.model().layer_part(3), 1);
  const std::vector<float> got = split.eval(tokens, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
}

}  // namespace
