// Placement by speed (include/weft/runtime/placement.h): the model of time
// on hand-computed cases, the search against every placement of small
// models, and the cases it exists for, on synthetic devices.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "weft/core/error.h"
#include "weft/runtime/placement.h"

namespace {

using Bounds = std::vector<int64_t>;
using weft::DeviceSpeed;
using weft::PlacementInput;

constexpr DeviceSpeed kHost{.seconds_per_byte = 1e-9};  // local: no link

DeviceSpeed worker(double seconds_per_byte, double latency, double bytes_per_second) {
  return {.seconds_per_byte = seconds_per_byte, .latency_seconds = latency, .bytes_per_second = bytes_per_second};
}

// n_layer layers of read bytes 1e6 and memory 1e6 each; an untied output.
PlacementInput model(int64_t n_layer, std::vector<DeviceSpeed> speeds, std::vector<size_t> free_bytes = {}) {
  PlacementInput in;
  in.n_layer = n_layer;
  in.speeds = std::move(speeds);
  in.free_bytes = free_bytes.empty() ? std::vector<size_t>(in.speeds.size(), 0) : std::move(free_bytes);
  in.costs.layer_bytes.assign(static_cast<size_t>(n_layer), 1000000);
  in.costs.layer_read_bytes.assign(static_cast<size_t>(n_layer), 1000000);
  in.costs.first_bytes = 500000;
  in.costs.last_bytes = 200000;
  in.costs.output_read_bytes = 2000000;
  in.costs.activation_bytes = 4096;
  in.costs.logits_bytes = 4000;
  return in;
}

bool fits(const Bounds& b, const PlacementInput& in) {
  const size_t n = in.speeds.size();
  for (size_t d = 0; d < n; ++d) {
    size_t need = (d == 0 ? in.costs.first_bytes : 0) + (d + 1 == n ? in.costs.last_bytes : 0);
    for (int64_t l = b[d]; l < b[d + 1]; ++l) need += in.costs.layer_bytes[static_cast<size_t>(l)];
    if (in.free_bytes[d] != 0 && need > in.free_bytes[d]) return false;
  }
  return true;
}

// Every nondecreasing placement of n_layer layers over n devices.
void each_placement(Bounds& b, size_t d, int64_t n_layer, const std::function<void(const Bounds&)>& f) {
  if (d + 1 == b.size()) {
    b[d] = n_layer;
    f(b);
    return;
  }
  for (int64_t l = b[d - 1]; l <= n_layer; ++l) {
    b[d] = l;
    each_placement(b, d + 1, n_layer, f);
  }
}

TEST(PlacementSpeed, PredictionAddsComputeAndHops) {
  PlacementInput in = model(4, {kHost, worker(2e-9, 1e-3, 1e9)});
  weft::TimePrediction t = weft::predict_time(Bounds{0, 2, 4}, in);
  ASSERT_EQ(t.compute_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(t.compute_seconds[0], 2e6 * 1e-9);
  EXPECT_DOUBLE_EQ(t.compute_seconds[1], (2e6 + 2e6) * 2e-9);  // its layers and the output product
  EXPECT_DOUBLE_EQ(t.link_seconds[0], 0);                      // the token to this host's CPU
  EXPECT_DOUBLE_EQ(t.link_seconds[1], 1e-3 + 4096 / 1e9);
  EXPECT_DOUBLE_EQ(t.return_seconds, 1e-3 + 4000 / 1e9);  // the logits
  EXPECT_DOUBLE_EQ(t.total(), 2e-3 + 8e-3 + 2 * 1e-3 + 8096 / 1e9);

  // Tied embeddings: the product runs on device 0; the hidden state goes back to it.
  in.costs.output_on_first = true;
  t = weft::predict_time(Bounds{0, 2, 4}, in);
  EXPECT_DOUBLE_EQ(t.compute_seconds[0], (2e6 + 2e6) * 1e-9);
  EXPECT_DOUBLE_EQ(t.compute_seconds[1], 2e6 * 2e-9);
  EXPECT_DOUBLE_EQ(t.link_seconds[0], 1e-3 + 4096 / 1e9);
  EXPECT_DOUBLE_EQ(t.return_seconds, 0);

  // Two workers: the slower link with peer links, both links through the host without.
  in = model(3, {kHost, worker(1e-9, 1e-3, 1e9), worker(1e-9, 2e-3, 5e8)});
  t = weft::predict_time(Bounds{0, 1, 2, 3}, in);
  EXPECT_DOUBLE_EQ(t.link_seconds[2], 2e-3 + 4096 / 5e8);
  in.peer_links = false;
  t = weft::predict_time(Bounds{0, 1, 2, 3}, in);
  EXPECT_DOUBLE_EQ(t.link_seconds[2], 1e-3 + 4096 / 1e9 + 2e-3 + 4096 / 5e8);
  // A worker without layers is not on the way; the last device always is.
  t = weft::predict_time(Bounds{0, 3, 3, 3}, in);
  EXPECT_DOUBLE_EQ(t.link_seconds[1], 0);
  EXPECT_DOUBLE_EQ(t.link_seconds[2], 2e-3 + 4096 / 5e8);

  EXPECT_THROW(weft::predict_time(Bounds{0, 3}, in), weft::Error);        // a bound per device and one
  EXPECT_THROW(weft::predict_time(Bounds{0, 2, 1, 3}, in), weft::Error);  // decreasing
  in.speeds.clear();
  EXPECT_THROW(weft::predict_time(Bounds{0, 1, 2, 3}, in), weft::Error);  // nothing measured
}

// An expert split: every layer on this host, which routes; 8 experts, 6 on
// a worker. Each layer's expert reads (6e5 of its 1e6) are shared 2:6; the
// worker's slice costs each layer a round trip and runs while the host
// computes its own slice: per layer the longest of the two counts.
TEST(PlacementSpeed, PredictionOfAnExpertSplit) {
  PlacementInput in = model(2, {kHost, worker(2e-9, 1e-4, 1e9)});
  in.costs.layer_expert_read_bytes.assign(2, 600000);
  in.costs.n_expert = 8;
  const std::vector<int64_t> experts = {2, 6};
  const weft::TimePrediction t = weft::predict_time(Bounds{0, 2, 2}, in, experts);
  const double host_slice = 1e-9 * 6e5 * 2 / 8, worker_slice = 2e-9 * 6e5 * 6 / 8;
  const double trip = 2 * (1e-4 + 4096 / 1e9);
  EXPECT_DOUBLE_EQ(t.compute_seconds[0], 2 * (4e5 * 1e-9 + host_slice));
  EXPECT_DOUBLE_EQ(t.compute_seconds[1], 2 * worker_slice + 2e6 * 2e-9);  // its slices and the output product
  // The round trips of both layers, then the last hidden state to the output product.
  EXPECT_DOUBLE_EQ(t.link_seconds[1], 2 * trip + 1e-4 + 4096 / 1e9);
  EXPECT_DOUBLE_EQ(t.overlapped_seconds, 2 * std::min(host_slice, worker_slice + trip));
  // The sum of the per-layer critical paths and the rest of the chain.
  const double per_layer = 4e5 * 1e-9 + std::max(host_slice, worker_slice + trip);
  EXPECT_NEAR(t.total(), 2 * per_layer + 2e6 * 2e-9 + (1e-4 + 4096 / 1e9) + (1e-4 + 4000 / 1e9), 1e-15);

  // The host holds no expert: nothing overlaps, every layer waits for the worker.
  const std::vector<int64_t> none_here = {0, 8};
  const weft::TimePrediction u = weft::predict_time(Bounds{0, 2, 2}, in, none_here);
  EXPECT_DOUBLE_EQ(u.overlapped_seconds, 0);
  EXPECT_DOUBLE_EQ(u.compute_seconds[0], 2 * 4e5 * 1e-9);

  const std::vector<int64_t> wrong_sum = {2, 5}, wrong_count = {8};
  EXPECT_THROW(weft::predict_time(Bounds{0, 2, 2}, in, wrong_sum), weft::Error);
  EXPECT_THROW(weft::predict_time(Bounds{0, 2, 2}, in, wrong_count), weft::Error);
  in.costs.n_expert = 0;  // a dense model
  EXPECT_THROW(weft::predict_time(Bounds{0, 2, 2}, in, experts), weft::Error);
}

// A tensor split, computed by hand: this host (1 ns/byte, no link) and a
// worker (2 ns/byte, 100 µs one way, 1 GB/s) with half the heads each of
// two layers reading 1 MB apiece, and half the output's rows (0.5 MB) each.
TEST(PlacementSpeed, PredictionOfATensorSplit) {
  PlacementInput in;
  in.n_layer = 2;
  in.speeds = {DeviceSpeed{1e-9, 0, 0}, DeviceSpeed{2e-9, 1e-4, 1e9}};
  in.costs.layer_bytes = {1, 1};
  in.costs.layer_read_bytes = {1000000, 1000000};
  in.costs.output_read_bytes = 500000;
  in.costs.activation_bytes = 1000;
  in.costs.logits_bytes = 4000;
  const int64_t heads[] = {0, 2, 4};
  const weft::TimePrediction t = weft::predict_tensor_time(heads, 4, in);
  EXPECT_NEAR(t.compute_seconds[0], 1e-3 + 2.5e-4, 1e-12);  // 1 MB of the 2 at 1 ns, a quarter MB of the output
  EXPECT_NEAR(t.compute_seconds[1], 2e-3 + 5e-4, 1e-12);    // the same bytes at 2 ns
  EXPECT_NEAR(t.link_seconds[0], 0, 1e-15);
  EXPECT_NEAR(t.link_seconds[1], 8 * 1.01e-4 + 1.01e-4, 1e-12);  // 2 layers x 2 exchanges x 2 ways, the output's input
  EXPECT_NEAR(t.return_seconds, 1.02e-4, 1e-12);                 // half the logits
  // This host's share of the layers under the worker's, and its output rows under the worker's.
  EXPECT_NEAR(t.overlapped_seconds, 1e-3 + 2.5e-4, 1e-12);
  EXPECT_NEAR(t.total(), 2.808e-3 + 5e-4 + 1.01e-4 + 1.02e-4, 1e-12);
  const int64_t wrong[] = {0, 4};
  EXPECT_THROW((void)weft::predict_tensor_time(wrong, 4, in), weft::Error);
}

// Two workers linked to each other: the second's partials go to the first
// over their peer link (the slower of the two links: 200 µs, 0.5 GB/s) and
// reach this host in the first's one sum; without peer links each worker
// exchanges with this host alone.
TEST(PlacementSpeed, PredictionOfPartialsMeetingOnAWorker) {
  PlacementInput in;
  in.n_layer = 2;
  in.speeds = {DeviceSpeed{1e-9, 0, 0}, DeviceSpeed{1e-9, 1e-4, 1e9}, DeviceSpeed{1e-9, 2e-4, 5e8}};
  in.costs.layer_bytes = {1, 1};
  in.costs.layer_read_bytes = {1000000, 1000000};
  in.costs.output_read_bytes = 0;
  in.costs.activation_bytes = 1000;
  in.costs.logits_bytes = 0;
  const int64_t heads[] = {0, 2, 3, 4};
  const double first = 1e-4 + 1e-6, second = 2e-4 + 2e-6, peer = 2e-4 + 2e-6;
  const weft::TimePrediction met = weft::predict_tensor_time(heads, 4, in);
  EXPECT_NEAR(met.link_seconds[1], 4 * 2 * first + first, 1e-12);  // 2 layers x 2 sums, in and back; the output's input
  EXPECT_NEAR(met.link_seconds[2], 4 * (second + peer + first) + second, 1e-12);
  in.peer_links = false;
  const weft::TimePrediction apart = weft::predict_tensor_time(heads, 4, in);
  EXPECT_NEAR(apart.link_seconds[1], 4 * 2 * first + first, 1e-12);
  EXPECT_NEAR(apart.link_seconds[2], 4 * 2 * second + second, 1e-12);
}

TEST(PlacementSpeed, SearchFindsTheLeastOfEveryPlacement) {
  std::mt19937 rng(7);
  auto uniform = [&rng](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto below = [&rng](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + static_cast<size_t>(below(4));
    const int64_t n_layer = below(7);
    std::vector<DeviceSpeed> speeds;
    for (size_t d = 0; d < n; ++d) {
      const bool remote = d > 0 && below(4) != 0;
      speeds.push_back(remote ? worker(uniform(0.2e-9, 5e-9), uniform(0, 2e-3), uniform(1e7, 1e10))
                              : DeviceSpeed{.seconds_per_byte = uniform(0.2e-9, 5e-9)});
    }
    PlacementInput in = model(n_layer, speeds);
    in.peer_links = below(2) == 0;
    in.costs.output_on_first = below(2) == 0;
    for (size_t l = 0; l < static_cast<size_t>(n_layer); ++l) {
      in.costs.layer_read_bytes[l] = 100000 * (1 + static_cast<size_t>(below(20)));
      in.costs.layer_bytes[l] = in.costs.layer_read_bytes[l] + 1000 * static_cast<size_t>(below(100));
    }
    for (size_t& f : in.free_bytes) f = below(3) == 0 ? 0 : 100000 * static_cast<size_t>(below(60));

    double best = INFINITY;
    Bounds b(n + 1, 0);
    each_placement(b, 1, n_layer, [&](const Bounds& c) {
      if (fits(c, in)) best = std::min(best, weft::predict_time(c, in).total());
    });
    const weft::SpeedPlacement got = weft::place_by_speed(in);
    ASSERT_EQ(got.bounds.size(), n + 1);
    if (best == INFINITY) {
      ++infeasible;
      EXPECT_EQ(got.fallback, "no placement fits every device's free memory") << "trial " << trial;
      continue;
    }
    ++feasible;
    ASSERT_EQ(got.fallback, "") << "trial " << trial;
    EXPECT_TRUE(fits(got.bounds, in)) << "trial " << trial;
    EXPECT_NEAR(weft::predict_time(got.bounds, in).total(), best, 1e-12) << "trial " << trial;
  }
  EXPECT_GT(feasible, 100);  // both kinds of case came up
  EXPECT_GT(infeasible, 10);
}

// Pipelined (several sequences in flight): the slowest stage, brute force
// against the search, untied (a tied output's hop back to device 0 belongs
// to no stage the search builds).
TEST(PlacementSpeed, PipelinedSearchFindsTheLeastSlowestStage) {
  std::mt19937 rng(11);
  auto uniform = [&rng](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto below = [&rng](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + static_cast<size_t>(below(4));
    const int64_t n_layer = below(8);
    std::vector<DeviceSpeed> speeds;
    for (size_t d = 0; d < n; ++d)
      speeds.push_back(d > 0 ? worker(uniform(0.2e-9, 5e-9), uniform(0, 2e-3), uniform(1e7, 1e10))
                             : DeviceSpeed{.seconds_per_byte = uniform(0.2e-9, 5e-9)});
    PlacementInput in = model(n_layer, speeds);
    in.pipelined = true;
    in.peer_links = below(2) == 0;
    for (size_t l = 0; l < static_cast<size_t>(n_layer); ++l)
      in.costs.layer_read_bytes[l] = 100000 * (1 + static_cast<size_t>(below(20)));
    for (size_t& f : in.free_bytes) f = below(3) == 0 ? 0 : 1000000 * static_cast<size_t>(1 + below(10));
    double best = INFINITY;
    Bounds b(n + 1, 0);
    each_placement(b, 1, n_layer, [&](const Bounds& c) {
      if (fits(c, in)) best = std::min(best, weft::stage_seconds(weft::predict_time(c, in)));
    });
    if (best == INFINITY) continue;
    ++checked;
    const weft::SpeedPlacement got = weft::place_by_speed(in);
    ASSERT_EQ(got.fallback, "") << "trial " << trial;
    EXPECT_TRUE(fits(got.bounds, in)) << "trial " << trial;
    EXPECT_NEAR(weft::stage_seconds(weft::predict_time(got.bounds, in)), best, 1e-12) << "trial " << trial;
  }
  EXPECT_GT(checked, 100);
  // Two equal workers: for one sequence a split gains nothing (every
  // layer on either, the same hops: both take part); sequences in flight
  // balance the stages, the output product counting as two layers' reads
  // on the last.
  PlacementInput two = model(6, {worker(1e-9, 1e-4, 1e9), worker(1e-9, 1e-4, 1e9)});
  const Bounds one = weft::place_by_speed(two).bounds;
  EXPECT_TRUE(one[1] == 0 || one[1] == 6) << one[1];
  two.pipelined = true;
  EXPECT_EQ(weft::place_by_speed(two).bounds, (Bounds{0, 4, 6}));
}

TEST(PlacementSpeed, FastDeviceWithLittleMemoryTakesWhatFits) {
  // The worker computes 4x faster but holds 3 layers besides the output norm.
  const PlacementInput in =
      model(8, {DeviceSpeed{.seconds_per_byte = 4e-9}, worker(1e-9, 1e-4, 1e9)}, {size_t{1} << 40, 3200000});
  EXPECT_EQ(weft::place_by_speed(in).bounds, (Bounds{0, 5, 8}));
  // With room for everything, it takes everything.
  const PlacementInput roomy = model(8, {DeviceSpeed{.seconds_per_byte = 4e-9}, worker(1e-9, 1e-4, 1e9)});
  EXPECT_EQ(weft::place_by_speed(roomy).bounds, (Bounds{0, 0, 8}));
}

TEST(PlacementSpeed, EqualDevicesOnSlowLinksKeepTheLayersTogether) {
  // Two equal workers on 10 ms links, the host holding the embedding alone:
  // the last worker takes part anyway (the output norm), layers on the
  // first would add a hop, so they all go to the last.
  // (The last a little faster: with equal speeds, where the first's share
  // ends below would be a tie, which rounding breaks differently per build.)
  const std::vector<DeviceSpeed> two = {kHost, worker(1e-9, 1e-2, 1e7), worker(0.9e-9, 1e-2, 1e7)};
  EXPECT_EQ(weft::place_by_speed(model(6, two, {600000, 0, 0})).bounds, (Bounds{0, 0, 0, 6}));
  // Unless it lacks the memory: then the first takes the rest.
  EXPECT_EQ(weft::place_by_speed(model(6, two, {600000, 0, 4200000})).bounds, (Bounds{0, 0, 2, 6}));
  // Fast links and a slow host: layers spread over the two workers' memory.
  const PlacementInput fast_links =
      model(6, {DeviceSpeed{.seconds_per_byte = 9e-9}, worker(1e-9, 1e-5, 1e10), worker(1e-9, 1e-5, 1e10)},
            {0, 3000000, 3200000});
  EXPECT_EQ(weft::place_by_speed(fast_links).bounds, (Bounds{0, 0, 3, 6}));
}

TEST(PlacementSpeed, FallsBackToFreeMemoryAndSaysWhy) {
  PlacementInput in = model(6, {kHost, worker(1e-9, 1e-3, 1e9)}, {300, 600});
  in.speeds.clear();
  weft::SpeedPlacement s = weft::place_by_speed(in);
  EXPECT_EQ(s.bounds, (Bounds{0, 2, 6}));  // in proportion to free memory
  EXPECT_EQ(s.fallback, "no device speeds");
  in = model(6, {kHost, DeviceSpeed{}});
  EXPECT_EQ(weft::place_by_speed(in).fallback, "a device without a measured speed");
  in = model(6, {kHost, worker(1e-9, 1e-3, 1e9)});
  in.costs = {};
  EXPECT_EQ(weft::place_by_speed(in).fallback, "no model costs");
  in = model(6, {kHost, worker(1e-9, 1e-3, 1e9)}, {100, 100});
  EXPECT_EQ(weft::place_by_speed(in).fallback, "no placement fits every device's free memory");

  const auto policy = weft::split_by_speed();
  EXPECT_EQ(policy->describe(), "by speed");
  in = model(8, {DeviceSpeed{.seconds_per_byte = 4e-9}, worker(1e-9, 1e-4, 1e9)}, {size_t{1} << 40, 3200000});
  EXPECT_EQ(policy->layer_bounds(in), (Bounds{0, 5, 8}));
}

}  // namespace
