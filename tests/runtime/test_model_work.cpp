// bench/model_work.h: the bytes a generated token reads and the flops a
// prompt costs, on demo models whose shapes give them by hand, and checked
// against the sizes the model's own plan reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "model_work.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/session.h"

namespace weft::bench {
namespace {

namespace fs = std::filesystem;

class ModelWorkTest : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove(path_); }
  // Writes a tiny demo model (3 layers, width 64, 4 heads of 16, 2 KV heads,
  // feed-forward 128, vocabulary 600, q8_0 matrices and f32 norms).
  void write(bool tied, int64_t n_expert = 0, int64_t n_expert_used = 0) {
    model::DemoModelSpec spec = model::tiny_demo_spec();
    spec.n_layer = 3;
    spec.tied = tied;
    spec.n_expert = n_expert;
    spec.n_expert_used = n_expert_used;
    model::write_demo_model(path_, spec);
  }
  LoadPlan plan(std::vector<std::string> devices, std::string split, int64_t n_ctx) {
    Session s({.model = path_, .devices = std::move(devices), .split = std::move(split)});
    return s.plan(n_ctx);
  }
  std::string path_ =
      (fs::temp_directory_path() / ("weft_model_work_" + std::to_string(::getpid()) + ".gguf")).string();
};

constexpr double kLayerParams = 64 * 64 * 2 + 64 * 32 * 2 + 64 * 128 * 3;  // q, o; k, v; gate, up, down
constexpr double kOutputParams = 64 * 600;
constexpr double kQ8Bytes = 34.0 / 32;  // q8_0: 34 bytes per 32 values

TEST_F(ModelWorkTest, OneDeviceReadsEveryWeightOnceAndTheKvRows) {
  write(/*tied=*/false);
  const LoadPlan p = plan({"cpu:1"}, "", 64);
  const ModelWork w = model_work(*GgufFile::open(path_), p);
  EXPECT_EQ(w.host_layers, 3);
  EXPECT_TRUE(w.host_output);
  EXPECT_DOUBLE_EQ(w.layer_matmul_params, 3 * kLayerParams);
  EXPECT_DOUBLE_EQ(w.output_matmul_params, kOutputParams);
  EXPECT_DOUBLE_EQ(w.embd_row_bytes, 64 * kQ8Bytes);
  // Everything the plan holds but the embedding table, of which one row.
  const double embd_bytes = 600 * 64 * kQ8Bytes;
  EXPECT_DOUBLE_EQ(w.layer_weight_bytes + w.output_weight_bytes + embd_bytes,
                   static_cast<double>(p.devices[0].part.weight_bytes));
  // K and V, f16, 2 heads of 16, per position and layer.
  const double kv_row = 2 * 2 * 32;
  EXPECT_DOUBLE_EQ(w.kv_bytes_per_position, 3 * kv_row);
  EXPECT_DOUBLE_EQ(decode_bytes(w, 10) - decode_bytes(w, 1), 9 * 3 * kv_row);
  EXPECT_DOUBLE_EQ(decode_bytes(w, 1), w.layer_weight_bytes + w.output_weight_bytes + w.embd_row_bytes + 3 * kv_row);
  // 2 flops per layer weight per token, per output weight once (the last
  // token's logits); 4 * 64 per visible pair, 8 * 9 / 2 pairs, 3 layers.
  EXPECT_DOUBLE_EQ(prompt_flops(w, 8), 2 * (3 * kLayerParams * 8 + kOutputParams) + 4 * 64 * 36 * 3);
}

TEST_F(ModelWorkTest, ASplitCountsTheHostsShare) {
  write(/*tied=*/false);
  // Layer 0 here, layers 1 and 2 on the second device, which runs the output.
  const LoadPlan p = plan({"cpu:1", "async-copy"}, "1,2", 64);
  ASSERT_EQ(p.devices[0].part.last_layer, 1);
  const ModelWork w = model_work(*GgufFile::open(path_), p);
  EXPECT_EQ(w.host_layers, 1);
  EXPECT_FALSE(w.host_output);
  EXPECT_EQ(w.output_weight_bytes, 0);
  EXPECT_DOUBLE_EQ(w.layer_matmul_params, kLayerParams);
  EXPECT_DOUBLE_EQ(w.output_matmul_params, 0);
  EXPECT_DOUBLE_EQ(w.layer_weight_bytes + 600 * 64 * kQ8Bytes, static_cast<double>(p.devices[0].part.weight_bytes));
  ASSERT_EQ(w.windows.size(), 1u);

  // A tied output runs beside the embedding, on the host.
  write(/*tied=*/true);
  const ModelWork tied = model_work(*GgufFile::open(path_), plan({"cpu:1", "async-copy"}, "1,2", 64));
  EXPECT_TRUE(tied.host_output);
  EXPECT_DOUBLE_EQ(tied.layer_matmul_params, kLayerParams);
  EXPECT_DOUBLE_EQ(tied.output_matmul_params, kOutputParams);
}

TEST_F(ModelWorkTest, ExpertsCountWhatOneTokenUses) {
  write(/*tied=*/false, /*n_expert=*/4, /*n_expert_used=*/2);
  const ModelWork w = model_work(*GgufFile::open(path_), plan({"cpu:1"}, "", 64));
  // Attention, the router [64, 4], and 2 of the 4 experts' gate, up, down.
  const double layer = 64 * 64 * 2 + 64 * 32 * 2 + 64 * 4 + 2 * 64 * 128 * 3;
  EXPECT_DOUBLE_EQ(w.layer_matmul_params, 3 * layer);
  EXPECT_DOUBLE_EQ(w.output_matmul_params, kOutputParams);
}

TEST(ModelWorkFormulas, SlidingWindowsLimitTheRowsAndPairs) {
  ModelWork w;
  w.attn_width = 8;
  w.windows = {0, 4};                // a global layer and one sliding over 4 positions
  w.kv_bytes_per_position = 2 * 10;  // 10 bytes per layer and position
  // 6 tokens: the global layer sees 1+2+...+6 = 21 pairs, the window 1+2+3+4+4+4 = 18.
  EXPECT_DOUBLE_EQ(prompt_flops(w, 6), 4 * 8 * (21 + 18));
  EXPECT_DOUBLE_EQ(prompt_flops(w, 3), 4 * 8 * (6 + 6));
  // At 6 positions: 6 rows of the global layer, 4 of the sliding one.
  EXPECT_DOUBLE_EQ(decode_bytes(w, 6), 10 * (6 + 4));
  EXPECT_DOUBLE_EQ(decode_bytes(w, 2), 10 * (2 + 2));
}

}  // namespace
}  // namespace weft::bench
