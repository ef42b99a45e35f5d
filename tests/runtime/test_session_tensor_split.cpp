// SessionOptions::split_mode tensor (`weft run --split-mode tensor`): the
// plan gives every device every layer's share of heads (by --split's
// weights, or equal), its weights and its share of the KV cache; greedy
// text equals this CPU alone's, over two, three and five devices (more
// than the key/value heads: the fifth takes feed-forward columns only); a
// worker's death recovers onto the devices left with the same text.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "rpc/local_workers.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;
using Mode = weft::SessionOptions::SplitMode;

class SessionTensorSplit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string((fs::temp_directory_path() / ("weft_tp_" + std::to_string(::getpid()) + ".gguf")).string());
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_embd = 128;
    spec.n_head = 8;
    spec.n_head_kv = 4;  // head size 16: a q8_0 attn_output cut every 2 query heads (one key/value head)
    spec.n_layer = 3;
    spec.tied = false;
    weft::model::write_demo_model(*path_, spec);
  }
  static void TearDownTestSuite() {
    fs::remove(*path_);
    delete path_;
  }

  static weft::SessionOptions options(std::vector<std::string> devices, std::string split = "") {
    weft::SessionOptions o{.model = *path_, .devices = std::move(devices), .split = std::move(split)};
    o.probe = false;
    o.split_mode = Mode::tensor;
    o.device_options.cpu_threads = 1;
    return o;
  }
  static std::vector<int32_t> prompt() { return {1, 45, 212, 87, 301, 9, 77}; }
  static weft::GenerateOptions greedy(int n) {
    weft::GenerateOptions g;
    g.max_tokens = n;
    g.stop_at_end_of_generation = false;
    return g;
  }
  static std::vector<int32_t> reference(int n) {
    weft::Session s(options({"cpu:1"}));
    s.load(64);
    return s.generate(prompt(), greedy(n)).tokens;
  }

  static std::string* path_;
  weft::testing::LocalWorkers workers_{2};
};
std::string* SessionTensorSplit::path_ = nullptr;

TEST_F(SessionTensorSplit, PlanCutsEveryLayerByHeadsAndTheTextIsTheSame) {
  const std::vector<int32_t> want = reference(12);
  weft::Session s(options({"cpu:1", "rpc://" + workers_.endpoint(0), "rpc://" + workers_.endpoint(1)}, "2,1,1"));
  const weft::LoadPlan plan = s.plan(64);
  EXPECT_NE(plan.policy.find("tensor split 2,1,1: layers 0-2: heads 0-3 on host, 4-5 on"), std::string::npos)
      << plan.policy;
  ASSERT_EQ(plan.devices.size(), 3u);
  const size_t whole_cache = weft::model::kv_cache_bytes(s.params(), 3, 64);
  EXPECT_EQ(plan.devices[0].part.kv_cache_bytes, whole_cache / 2);
  EXPECT_EQ(plan.devices[1].part.kv_cache_bytes, whole_cache / 4);
  EXPECT_EQ(plan.devices[2].part.kv_cache_bytes, whole_cache / 4);
  for (const weft::DevicePlan& d : plan.devices) {
    EXPECT_EQ(d.part.first_layer, 0);
    EXPECT_EQ(d.part.last_layer, 3);
  }
  EXPECT_EQ(plan.devices[2].part.first_head, 6);
  EXPECT_EQ(plan.devices[2].part.last_head, 8);
  // The workers hold less than this host (it also has the embedding) and
  // the last one the output matrix besides its shards.
  EXPECT_LT(plan.devices[1].part.weight_bytes, plan.devices[0].part.weight_bytes);
  s.load(plan);
  EXPECT_EQ(s.generate(prompt(), greedy(12)).tokens, want);
}

// "1/1,1": this host alone holds the first third of the layers, the two
// workers cut the rest by heads (a pipeline of a whole stage and a cut one).
TEST_F(SessionTensorSplit, GroupsOfDevicesArePipelinedByLayers) {
  const std::vector<int32_t> want = reference(10);
  weft::Session s(options({"cpu:1", "rpc://" + workers_.endpoint(0), "rpc://" + workers_.endpoint(1)}, "1/1,1"));
  const weft::LoadPlan plan = s.plan(64);
  EXPECT_NE(plan.policy.find("layers 0 on host; layers 1-2: heads 0-3 on"), std::string::npos) << plan.policy;
  ASSERT_EQ(plan.devices.size(), 3u);
  EXPECT_EQ(plan.devices[0].part.last_layer, 1);
  EXPECT_EQ(plan.devices[0].part.last_head, 0);  // every head of its layer
  EXPECT_EQ(plan.devices[2].part.first_layer, 1);
  EXPECT_EQ(plan.devices[2].part.first_head, 4);
  s.load(plan);
  EXPECT_EQ(s.generate(prompt(), greedy(10)).tokens, want);
}

TEST_F(SessionTensorSplit, AWorkersDeathRecoversWithTheSameText) {
  const std::vector<int32_t> want = reference(12);
  weft::SessionOptions o = options({"cpu:1", "rpc://" + workers_.endpoint(0), "rpc://" + workers_.endpoint(1)});
  o.recover = true;
  std::vector<weft::RecoveryReport> reports;
  o.on_recovery = [&reports](const weft::RecoveryReport& r) { reports.push_back(r); };
  weft::Session s(o);
  s.load(64);
  int seen = 0;
  const weft::GenerateResult r = s.generate(prompt(), greedy(12), [&](int32_t) {
    if (++seen == 5) workers_.worker(0).stop();
    return true;
  });
  EXPECT_EQ(r.tokens, want);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].lost.at(0), workers_.endpoint(0));
  ASSERT_EQ(reports[0].plan.devices.size(), 2u);  // still cut by heads, over the two left
  EXPECT_EQ(reports[0].plan.devices[1].part.first_head, 4);
}

// --split-mode auto: the probe's speeds predict both ways; the plan names
// both predictions and takes the smaller, and the text is the same either way.
TEST_F(SessionTensorSplit, AutoPicksThePredictedFasterWay) {
  const std::vector<int32_t> want = reference(8);
  weft::SessionOptions o = options({"cpu:1", "rpc://" + workers_.endpoint(0)});
  o.probe = true;
  o.split_mode = Mode::automatic;
  weft::Session s(o);
  const weft::LoadPlan plan = s.plan(64);
  const size_t at = plan.policy.find("(auto: predicted ");
  ASSERT_NE(at, std::string::npos) << plan.policy;
  double by_layers = 0, by_heads = 0;
  ASSERT_EQ(std::sscanf(plan.policy.c_str() + at, "(auto: predicted %lf ms/token by layers, %lf by heads)", &by_layers,
                        &by_heads),
            2)
      << plan.policy;
  EXPECT_GT(by_layers, 0);
  EXPECT_GT(by_heads, 0);
  const bool cut = plan.devices[1].part.last_head > 0;
  EXPECT_EQ(cut, by_heads < by_layers) << plan.policy;
  EXPECT_NEAR(plan.predicted_seconds * 1e3, std::min(by_layers, by_heads), 1e-3 + 1e-3 * by_layers);
  s.load(plan);
  EXPECT_EQ(s.generate(prompt(), greedy(8)).tokens, want);
}

// Five devices over four key/value heads: the first four one each, the
// fifth the feed-forward only (PlacementPart::ffn_share, the weights of
// --split for every device's columns), no cache; the text is this CPU
// alone's. A split of more weights than devices is refused naming both.
TEST_F(SessionTensorSplit, DevicesBeyondTheKeyValueHeadsTakeTheFeedForwardOnly) {
  const std::vector<int32_t> want = reference(8);
  weft::testing::LocalWorkers more(2);
  weft::Session s(options({"cpu:1", "rpc://" + workers_.endpoint(0), "rpc://" + workers_.endpoint(1),
                           "rpc://" + more.endpoint(0), "rpc://" + more.endpoint(1)}));
  try {
    weft::Session groups(options({"cpu:1", "rpc://" + workers_.endpoint(0)}, "1,1/1"));
    ADD_FAILURE() << "a split of 3 weights for 2 devices";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'1,1/1' has 3 weights for 2 devices"), std::string::npos) << e.what();
  }
  const weft::LoadPlan plan = s.plan(64);
  EXPECT_NE(plan.policy.find("feed-forward only on"), std::string::npos) << plan.policy;
  ASSERT_EQ(plan.devices.size(), 5u);
  EXPECT_EQ(plan.devices[4].part.kv_cache_bytes, 0u);
  EXPECT_EQ(plan.devices[4].part.first_head, plan.devices[4].part.last_head);
  EXPECT_GT(plan.devices[4].part.weight_bytes, 0u);
  EXPECT_EQ(plan.devices[3].part.kv_cache_bytes, weft::model::kv_cache_bytes(s.params(), 3, 64) / 4);
  s.load(plan);
  EXPECT_EQ(s.generate(prompt(), greedy(8)).tokens, want);
}

}  // namespace
