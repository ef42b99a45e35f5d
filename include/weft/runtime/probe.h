// A short measurement of one device, for placement by speed
// (weft/runtime/placement.h, docs/placement.md): how long a matrix-vector
// product of the model's shape takes per weight byte, and for a worker the
// link's round trip and bandwidth. Bounded in bytes and time: a fraction of
// a second per device on a working link.
//
//   weft::ProbeOptions o{.weight_type = DType::q8_0, .row_length = 4096};
//   weft::DeviceSpeed s = weft::probe_device(device, o);   // throws on failure
//
// What it allocates on the device (one buffer of at most weight_bytes) is
// freed before it returns. The device's contents and streams are otherwise
// untouched: run it before loading, not while a model computes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/backend/backend.h"
#include "weft/core/dtype.h"
#include "weft/runtime/placement.h"

namespace weft {

struct ProbeOptions {
  DType weight_type = DType::f32;  // the product's weights (the model's layer matrices)
  int64_t row_length = 4096;       // the weight rows' length, a whole number of the dtype's blocks
  // The weights, at most (fewer when the device reports less than four
  // times as much free). As many as the model's layers read per token is
  // right: they come from a cache when the model's would, from memory when
  // not (a Session asks that, up to 32 MiB, at least 1 MiB). This host's
  // first touch of fresh pages is part of the probe's cost.
  size_t weight_bytes = size_t{32} << 20;
  size_t upload_bytes = size_t{4} << 20;  // the bandwidth measurement, at most (a worker)
  // Upload pieces: each below RpcOptions::cache_min_bytes (1 MiB by
  // default), so that the bytes travel rather than a content hash.
  size_t upload_chunk = size_t{256} << 10;
  double seconds = 0.05;  // the upload and the products each take about this long (each runs at least once)
};

// Measures device (a worker through its connection: round trips, then an
// upload, then the product, each timed as seen from here with the round
// trip subtracted). A local device reports no link. Throws
// Error(out_of_memory) when the device reports too little free memory to
// measure, Error(unsupported) when it runs the product in neither the
// given dtype nor f32, and what the device throws (Error(disconnected)).
DeviceSpeed probe_device(Device& device, const ProbeOptions& options = {});

}  // namespace weft
