// SessionOptions::experts_split (`weft run --experts-split`): the plan keeps
// every layer on this host and gives each device its share of each layer's
// experts; generation over a worker equals this CPU alone; bad shares and a
// dense model are refused naming the option.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "rpc/local_workers.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;

class SessionExperts : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("weft_session_experts_" + std::to_string(::getpid()) + ".gguf")).string();
    weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
    spec.n_layer = 2;
    spec.n_expert = 4;
    spec.n_expert_used = 2;
    weft::model::write_demo_model(path_, spec);
  }
  void TearDown() override { fs::remove(path_); }

  weft::SessionOptions options(std::vector<std::string> devices, std::string experts = "") const {
    weft::SessionOptions o{.model = path_, .devices = std::move(devices)};
    o.experts_split = std::move(experts);
    return o;
  }

  static std::vector<int32_t> greedy(weft::Session& s, int n) {
    const std::vector<int32_t> prompt = s.tokenizer().encode(weft::model::kDemoPrompt, true);
    s.load(static_cast<int64_t>(prompt.size()) + n);
    weft::GenerateOptions o{.max_tokens = n, .stop_at_end_of_generation = false};
    return s.generate(prompt, o).tokens;
  }

  std::string path_;
  weft::testing::LocalWorkers workers_{1};
};

TEST_F(SessionExperts, PlanAndTokensOverAWorker) {
  weft::Session local(options({"cpu:1"}));
  const std::vector<int32_t> want = greedy(local, 8);
  ASSERT_EQ(want.size(), 8u);

  weft::Session split(options({"cpu:1", "rpc://" + workers_.endpoint(0)}, "1,3"));
  const weft::LoadPlan plan = split.plan(64);
  EXPECT_NE(plan.policy.find("layers on host; experts 1 + 3 of 4 per layer (--experts-split 1,3)"),
            std::string::npos)
      << plan.policy;
  ASSERT_EQ(plan.devices.size(), 2u);
  EXPECT_EQ(plan.devices[0].part.last_layer, 2);
  EXPECT_EQ(plan.devices[1].part.first_layer, 2);  // no layers: experts only
  EXPECT_EQ(plan.devices[0].part.n_experts, 1);
  EXPECT_EQ(plan.devices[1].part.n_experts, 3);
  EXPECT_EQ(plan.devices[1].part.kv_cache_bytes, 0u);
  EXPECT_GT(plan.devices[1].part.weight_bytes, plan.devices[0].part.weight_bytes / 2);
  // The prediction (placement.h): both devices compute a share of the
  // slices, the worker's costing a round trip per layer, part of it at once.
  EXPECT_GT(plan.predicted_seconds, 0.0);
  EXPECT_GT(plan.devices[0].predicted_seconds, 0.0);
  EXPECT_GT(plan.devices[1].predicted_seconds, 0.0);
  EXPECT_GT(plan.devices[1].predicted_link_seconds, 0.0);
  EXPECT_GT(plan.predicted_overlap_seconds, 0.0);
  EXPECT_LT(plan.predicted_overlap_seconds,
            plan.devices[0].predicted_seconds + plan.devices[1].predicted_seconds);
  const std::vector<weft::DeviceCompute> before = split.compute_stats();
  EXPECT_EQ(greedy(split, 8), want);
  // Each device says what it computed: the worker a slice of both layers
  // for the prompt and every token but the last (sampled, not evaluated).
  const std::vector<weft::DeviceCompute> after = split.compute_stats();
  ASSERT_EQ(after.size(), 2u);
  EXPECT_GE(after[0].seconds, before[0].seconds);
  EXPECT_GE(after[1].graphs - before[1].graphs, 2u * 8u);
  EXPECT_GT(after[1].seconds, before[1].seconds);
  const std::vector<weft::DeviceStats> stats = split.stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_GT(stats[1].rpc.round_trips, 8u);  // a round trip per layer and token
}

TEST_F(SessionExperts, BadSharesAreRefused) {
  const std::string worker = "rpc://" + workers_.endpoint(0);
  for (const char* bad : {"1", "1,x", "0,0", "1,-1"}) {
    try {
      weft::Session s(options({"cpu:1", worker}, bad));
      ADD_FAILURE() << "accepted --experts-split " << bad;
    } catch (const weft::Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--experts-split '") + bad + "'"), std::string::npos) << e.what();
    }
  }
  weft::model::write_demo_model(path_, weft::model::tiny_demo_spec());  // dense
  weft::Session dense(options({"cpu:1", worker}, "1,1"));
  try {
    (void)dense.plan(16);
    ADD_FAILURE() << "planned an expert split of a dense model";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no experts"), std::string::npos) << e.what();
  }
}

}  // namespace
