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

#include "protocol/wire.h"

namespace weft::rpc::wtest {

// One tensor record: the wire fields in wire order.
struct WT {
  uint8_t dtype = 0, op = 0;
  uint16_t flags = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nb[4] = {};
  int32_t params[16] = {};
  uint32_t src[4] = {};
  uint32_t view_src = 0;
  uint64_t view_offs = 0, buffer = 0, offset = 0;
};

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
  for (const WT& t : g.t) {
    w.u8(t.dtype);
    w.u8(t.op);
    w.u16(t.flags);
    for (int64_t n : t.ne) w.i64(n);
    for (uint64_t n : t.nb) w.u64(n);
    for (int32_t p : t.params) w.i32(p);
    for (uint32_t s : t.src) w.u32(s);
    w.u32(t.view_src);
    w.u64(t.view_offs);
    w.u64(t.buffer);
    w.u64(t.offset);
  }
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (uint32_t n : g.nodes) w.u32(n);
  return w.data();
}

// The records of an encoded graph, checked for framing only (Error on a
// short or long payload), not for meaning: the inverse of encode_wg.
inline WG parse_wg(const std::vector<uint8_t>& bytes) {
  Reader r(bytes, "wire graph");
  WG g;
  g.t.resize(r.u32());
  for (WT& t : g.t) {
    t.dtype = r.u8();
    t.op = r.u8();
    t.flags = r.u16();
    for (int64_t& n : t.ne) n = r.i64();
    for (uint64_t& n : t.nb) n = r.u64();
    for (int32_t& p : t.params) p = r.i32();
    for (uint32_t& s : t.src) s = r.u32();
    t.view_src = r.u32();
    t.view_offs = r.u64();
    t.buffer = r.u64();
    t.offset = r.u64();
  }
  g.nodes.resize(r.u32());
  for (uint32_t& n : g.nodes) n = r.u32();
  r.expect_end();
  return g;
}

}  // namespace weft::rpc::wtest
