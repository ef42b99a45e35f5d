// Layer placement (include/weft/runtime/placement.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "weft/core/error.h"
#include "weft/runtime/placement.h"

namespace {

using Bounds = std::vector<int64_t>;

TEST(Placement, WeightsGiveProportionalRanges) {
  EXPECT_EQ(weft::layer_bounds({1, 1, 1}, 12), (Bounds{0, 4, 8, 12}));
  EXPECT_EQ(weft::layer_bounds({1, 2, 1}, 8), (Bounds{0, 2, 6, 8}));
  EXPECT_EQ(weft::layer_bounds({1, 0, 1}, 5), (Bounds{0, 3, 3, 5}));  // 2.5 rounds up; the empty part stays empty
  EXPECT_EQ(weft::layer_bounds({0, 1}, 7), (Bounds{0, 0, 7}));
  EXPECT_EQ(weft::layer_bounds({5}, 3), (Bounds{0, 3}));
  EXPECT_EQ(weft::layer_bounds({1, 1, 1}, 0), (Bounds{0, 0, 0, 0}));
  // Boundaries never decrease, whatever the rounding.
  const Bounds b = weft::layer_bounds({1e-9, 1, 1e-9, 1e-9, 3}, 2);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LE(b[i - 1], b[i]);
  EXPECT_EQ(b.back(), 2);
}

TEST(Placement, ImpossibleWeightsAreRefused) {
  EXPECT_THROW(weft::layer_bounds({}, 4), weft::Error);
  EXPECT_THROW(weft::layer_bounds({0, 0}, 4), weft::Error);
  EXPECT_THROW(weft::layer_bounds({1, -1}, 4), weft::Error);
  EXPECT_THROW(weft::layer_bounds({1, NAN}, 4), weft::Error);
  EXPECT_THROW(weft::layer_bounds({1, INFINITY}, 4), weft::Error);
  EXPECT_THROW(weft::layer_bounds({1}, -1), weft::Error);
}

TEST(Placement, ParseSplitNamesTheBadItem) {
  EXPECT_EQ(weft::parse_split("1,2.5,0", 3), (std::vector<double>{1, 2.5, 0}));
  try {
    weft::parse_split("1,x", 2);
    FAIL() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x' is not a weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(weft::parse_split("1,2", 3), weft::Error);   // one weight per device
  EXPECT_THROW(weft::parse_split("0,0", 2), weft::Error);   // not all zero
  EXPECT_THROW(weft::parse_split("1,-2", 2), weft::Error);
  EXPECT_THROW(weft::parse_split("1,,2", 3), weft::Error);
  EXPECT_THROW(weft::parse_split("", 1), weft::Error);
}

TEST(Placement, FreeMemoryPolicyFollowsFreeBytes) {
  const auto p = weft::split_by_free_memory();
  EXPECT_EQ(p->layer_bounds({.n_layer = 10, .free_bytes = {300, 100, 600}}), (Bounds{0, 3, 4, 10}));
  // Nobody reports memory: equal shares.
  EXPECT_EQ(p->layer_bounds({.n_layer = 9, .free_bytes = {0, 0, 0}}), (Bounds{0, 3, 6, 9}));
  EXPECT_THROW(p->layer_bounds({.n_layer = 9, .free_bytes = {}}), weft::Error);
  EXPECT_EQ(p->describe(), "by free memory");
}

TEST(Placement, WeightsPolicyChecksTheDeviceCount) {
  const auto p = weft::split_by_weights({1, 3});
  EXPECT_EQ(p->layer_bounds({.n_layer = 8, .free_bytes = {5, 5}}), (Bounds{0, 2, 8}));
  EXPECT_THROW(p->layer_bounds({.n_layer = 8, .free_bytes = {5, 5, 5}}), weft::Error);
  EXPECT_EQ(p->describe(), "split 1,3");
  EXPECT_THROW(weft::split_by_weights({0, 0}), weft::Error);
}

}  // namespace
