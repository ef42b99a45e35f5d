// A graph as it travels (docs/rpc-protocol.md section 4), one plain record
// per tensor, for tests that write graphs field by field to break them on
// purpose: test_worker_hostile.cpp builds them, the structure-aware fuzzer
// parses valid ones and mutates them.
//
//   WG g;
//   g.t.push_back(packed_f32(8, 4, handle, 0));    // referred to as 1
//   g.t.push_back(packed_f32(8, 4, handle, 128));  // as 2
//   WT sum = packed_f32(8, 4, handle, 256);
//   sum.op = static_cast<uint8_t>(Op::add);
//   sum.src[0] = 1;  // src and view_src count from 1; 0 is none
//   sum.src[1] = 2;
//   g.t.push_back(sum);
//   g.nodes = {2};  // node indices count from 0
//   const Bytes bytes = encode_wg(g);
#pragma once

#include <cstdint>
#include <vector>

#include "protocol/graph_codec.h"
#include "protocol/wire.h"

namespace weft::rpc::wtest {

// One tensor record: the wire fields in wire order (protocol/graph_codec.h).
using WT = WireTensor;

struct WG {
  std::vector<WT> t;
  std::vector<uint32_t> nodes;
};

// A packed f32 [n0, n1] leaf at offset of buffer handle.
inline WT packed_f32(int64_t n0, int64_t n1, uint64_t handle, uint64_t offset) {
  WT w;
  w.ne[0] = n0;
  w.ne[1] = n1;
  w.nb[0] = 4;
  w.nb[1] = 4 * static_cast<uint64_t>(n0);
  w.nb[2] = w.nb[3] = w.nb[1] * static_cast<uint64_t>(n1);
  w.buffer = handle;
  w.offset = offset;
  return w;
}

inline std::vector<uint8_t> encode_wg(const WG& g) {
  Writer w;
  w.u32(static_cast<uint32_t>(g.t.size()));
  for (const WT& t : g.t) t.encode(w);
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (uint32_t n : g.nodes) w.u32(n);
  return w.data();
}

// The records of an encoded graph, checked for framing only (Error on a
// short or long payload), not for meaning: the inverse of encode_wg.
inline WG parse_wg(const std::vector<uint8_t>& bytes) {
  Reader r(bytes, "wire graph");
  WG g;
  const uint32_t n = r.u32("n_tensors");
  if (n > r.remaining() / WT::kBytes) r.bytes(size_t{n} * WT::kBytes, "tensors");  // throws: too short
  g.t.resize(n);
  for (WT& t : g.t) t = WT::decode(r);
  g.nodes.resize(r.u32());
  for (uint32_t& n : g.nodes) n = r.u32();
  r.expect_end();
  return g;
}

}  // namespace weft::rpc::wtest
