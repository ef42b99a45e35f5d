// Link times for the models of time (placement_speed.cpp, placement_tensor.cpp):
// what a device's measured link (DeviceSpeed) costs to carry bytes.
#pragma once

#include <cstddef>

#include "weft/runtime/placement.h"

namespace weft::detail {

constexpr int kHost = -1;  // this host, in a chain of hops

// Whether the device is reached over a link (a worker), not this host's own.
bool has_link(const DeviceSpeed& s);
// One way over the device's link to this host.
double one_link(const DeviceSpeed& s, size_t bytes);
// The hop from one device (or kHost) to another, carrying bytes: over a
// peer link when both are workers and in.peer_links (the slower of their
// two links), else through this host (both links).
double hop(const PlacementInput& in, int from, int to, size_t bytes);

}  // namespace weft::detail
