// weft_fuzz_worker's mutated graphs (fuzz_structured.h lists the parts).
//
// mutate_graph: an encoded graph (docs/rpc-protocol.md section 4) with 1-3
//   fields changed (dtype, op, flags, ne, nb, op params, src, view_src,
//   view_offs, buffer, offset, the node list, n_tensors) or its bytes cut,
//   extended or flipped. The result may still be valid: the worker must
//   then run it.
// run_mutated: a small valid graph, its inputs uploaded (or junk), sent
//   mutated on a fresh session and sometimes run again by id; the worker
//   must run it, defer an error or refuse it (settle), never crash or hang.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "conformance/reference.h"
#include "fuzz_structured.h"
#include "protocol/wire.h"
#include "wire_graph.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using namespace wtest;

void run_mutated(Rng& rng, std::string& desc) {
  auto p = make_graph(rng, true);
  auto c = env->fresh();
  const uint64_t size = p->bytes + 64 * static_cast<uint64_t>(pick(rng, 0, 2));
  const uint64_t h = c->alloc(0, size);
  if (chance(rng, 0.5)) {
    conformance::Reference ref;
    upload(*c, h, *p, rng, ref);
  } else if (size > 0) {  // any bytes: NaNs, indices out of range
    const Bytes junk = random_bytes(rng, size);
    c->set(h, 0, junk.data(), junk.size());
  }
  const Bytes valid = p->encode(h);
  std::string m;
  const Bytes bad = mutate_graph(valid, rng, env->good->handle(), m);
  desc += p->desc + " | " + m;
  set_case_line(desc);
  const uint64_t id = static_cast<uint64_t>(pick(rng, 0, 3));
  c->compute(0, id, &bad);
  if (settle(*c, desc) != Outcome::refused && chance(rng, 0.5)) {
    c->compute(0, id, nullptr);  // stored (or not: then refused)
    settle(*c, desc + " | run again by id");
  }
}

namespace {

// A value near the edges of what the field means, or near its current value.
uint64_t interesting(Rng& rng, uint64_t cur) {
  switch (pick(rng, 0, 13)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return UINT64_MAX;  // -1
    case 3: return cur + 1;
    case 4: return cur - 1;
    case 5: return cur * 2;
    case 6: return cur / 2;
    case 7: return cur + static_cast<uint64_t>(pick(rng, 2, 64));
    case 8: return static_cast<uint64_t>(INT64_MAX);
    case 9: return static_cast<uint64_t>(INT64_MIN);
    case 10: return uint64_t{1} << pick(rng, 8, 63);
    case 11: return (uint64_t{1} << 32) + static_cast<uint64_t>(pick(rng, -2, 2));
    case 12: return static_cast<uint64_t>(pick(rng, 0, 4096));
    default: return rng();
  }
}

int32_t interesting_param(Rng& rng, int32_t cur) {
  constexpr float kFloats[] = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               1e30f,
                               -1e-30f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               1e-45f};
  if (chance(rng, 0.4)) {
    const float f = one_of(rng, kFloats);
    int32_t v;
    std::memcpy(&v, &f, 4);
    return v;
  }
  constexpr int32_t kInts[] = {0, 1, 2, 3, 4, -1, -2, 31, 32, 33, 64, INT32_MAX, INT32_MIN, 1 << 20};
  return chance(rng, 0.7) ? one_of(rng, kInts) : static_cast<int32_t>(cur + pick(rng, -3, 3));
}

// A reference to a tensor: 0 (none), nearby indices, itself, later ones, huge.
uint32_t interesting_ref(Rng& rng, uint32_t self, size_t n) {
  switch (pick(rng, 0, 5)) {
    case 0: return 0;
    case 1: return static_cast<uint32_t>(pick(rng, 1, static_cast<int64_t>(n)));  // any tensor, maybe later
    case 2: return self + 1;                                                      // itself
    case 3: return static_cast<uint32_t>(n + 1);                                  // past the end
    case 4: return UINT32_MAX;
    default: return self > 0 ? static_cast<uint32_t>(pick(rng, 1, self)) : 1;  // an earlier one
  }
}

}  // namespace

std::vector<uint8_t> mutate_graph(const std::vector<uint8_t>& encoded, Rng& rng, uint64_t foreign_handle,
                                  std::string& desc) {
  WG g = parse_wg(encoded);
  const int n = static_cast<int>(pick(rng, 1, 3));
  enum Byte { none, truncate, extend, flip, count };
  std::vector<std::pair<Byte, uint64_t>> byte_edits;  // applied after encoding
  for (int m = 0; m < n; ++m) {
    if (!desc.empty()) desc += "; ";
    const auto nt = static_cast<uint32_t>(g.t.size());
    // Nodes are the interesting tensors half the time.
    uint32_t i = static_cast<uint32_t>(pick(rng, 0, nt - 1));
    if (!g.nodes.empty() && chance(rng, 0.5)) i = g.nodes[static_cast<size_t>(pick(rng, 0, g.nodes.size() - 1))];
    if (i >= nt) i = 0;
    WT& t = g.t[i];
    std::string at = "t";  // (not "t" + ...: a GCC 12 -Wrestrict false positive)
    at += std::to_string(i);
    const int d = static_cast<int>(pick(rng, 0, 3));
    const WT& other = g.t[static_cast<size_t>(pick(rng, 0, nt - 1))];
    switch (pick(rng, 0, 19)) {
      case 0:
        t.dtype = chance(rng, 0.8) ? static_cast<uint8_t>(pick(rng, 0, kDTypeCount)) : 255;
        desc += at + ".dtype=" + std::to_string(t.dtype);
        break;
      case 1:
        t.op = chance(rng, 0.8) ? static_cast<uint8_t>(pick(rng, 0, kOpCount)) : 255;
        desc += at + ".op=" + std::to_string(t.op);
        break;
      case 2:
        t.flags = static_cast<uint16_t>(rng());
        desc += at + ".flags=" + std::to_string(t.flags);
        break;
      case 3:
      case 4:
        t.ne[d] = static_cast<int64_t>(interesting(rng, static_cast<uint64_t>(t.ne[d])));
        desc += at + ".ne[" + std::to_string(d) + "]=" + std::to_string(t.ne[d]);
        break;
      case 5:
      case 6:
        t.nb[d] = interesting(rng, t.nb[d]);
        desc += at + ".nb[" + std::to_string(d) + "]=" + std::to_string(t.nb[d]);
        break;
      case 7:
      case 8: {
        const int p = chance(rng, 0.7) ? static_cast<int>(pick(rng, 0, 3)) : static_cast<int>(pick(rng, 0, 15));
        t.op_params[p] = interesting_param(rng, t.op_params[p]);
        desc += at + ".op_params[" + std::to_string(p) + "]=" + std::to_string(t.op_params[p]);
        break;
      }
      case 9:
        t.src[d] = interesting_ref(rng, i, nt);
        desc += at + ".src[" + std::to_string(d) + "]=" + std::to_string(t.src[d]);
        break;
      case 10:
        t.view_src = interesting_ref(rng, i, nt);
        desc += at + ".view_src=" + std::to_string(t.view_src);
        break;
      case 11:
        t.view_offs = interesting(rng, t.view_offs);
        desc += at + ".view_offs=" + std::to_string(t.view_offs);
        break;
      case 12: {
        const uint64_t own = t.buffer;
        const uint64_t choices[] = {0, own + 1, own - 1, foreign_handle, UINT64_MAX, own == 0 ? 1 : own};
        t.buffer = one_of(rng, choices);
        desc += at + ".buffer=" + (t.buffer == foreign_handle ? "foreign" : std::to_string(t.buffer));
        break;
      }
      case 13:
        t.offset =
            chance(rng, 0.5) ? t.offset + static_cast<uint64_t>(pick(rng, -8, 8)) * 2 : interesting(rng, t.offset);
        desc += at + ".offset=" + std::to_string(t.offset);
        break;
      case 14: {
        const int k = static_cast<int>(pick(rng, 0, 4));
        const size_t nn = g.nodes.size();
        if (k == 0 && nn > 0) {
          g.nodes.erase(g.nodes.begin() + pick(rng, 0, nn - 1));
          desc += "nodes: one dropped";
        } else if (k == 1 && nn > 0) {
          g.nodes.insert(g.nodes.begin() + pick(rng, 0, nn), g.nodes[static_cast<size_t>(pick(rng, 0, nn - 1))]);
          desc += "nodes: one listed twice";
        } else if (k == 2) {
          const uint32_t v = chance(rng, 0.5) ? static_cast<uint32_t>(pick(rng, 0, nt)) : UINT32_MAX;
          g.nodes.push_back(v);
          desc += "nodes: +" + std::to_string(v);
        } else if (k == 3) {
          std::reverse(g.nodes.begin(), g.nodes.end());
          desc += "nodes: reversed";
        } else {
          g.nodes.clear();
          desc += "nodes: none";
        }
        break;
      }
      case 15: {  // two tensor records swapped, or one duplicated at the end
        const auto j = static_cast<uint32_t>(pick(rng, 0, nt - 1));
        if (chance(rng, 0.5)) {
          std::swap(g.t[i], g.t[j]);
          desc += at + "<->t" + std::to_string(j);
        } else {
          g.t.push_back(g.t[j]);
          std::string dup = "t";  // (as at, for the same GCC 12 false positive)
          dup += std::to_string(j);
          desc += dup + " duplicated as t" + std::to_string(nt);
        }
        break;
      }
      case 16: {
        const Byte e = static_cast<Byte>(pick(rng, 1, 4));
        byte_edits.push_back({e, rng()});
        desc += e == truncate ? "bytes: truncated"
                : e == extend ? "bytes: extended"
                : e == flip   ? "bytes: flipped"
                              : "bytes: n_tensors";
        break;
      }
      case 17:  // another tensor's shape and strides: plausible, usually wrong
        std::copy(std::begin(other.ne), std::end(other.ne), std::begin(t.ne));
        std::copy(std::begin(other.nb), std::end(other.nb), std::begin(t.nb));
        desc += at + " shaped as another";
        break;
      case 18:  // another tensor's memory: a node writing over its own input
        t.buffer = other.buffer;
        t.offset = other.offset;
        desc += at + " placed on another (offset " + std::to_string(t.offset) + ")";
        break;
      default:  // a leaf turned into a view of an earlier tensor, or a view into a leaf
        if (t.view_src != 0) {
          t.view_src = 0;
          t.op = 0;
          desc += at + " view->leaf";
        } else {
          t.view_src = i > 0 ? static_cast<uint32_t>(pick(rng, 1, i)) : 1;
          t.buffer = 0;
          desc += at + ".view_src=" + std::to_string(t.view_src) + " buffer=0";
        }
        break;
    }
  }
  std::vector<uint8_t> out = encode_wg(g);
  for (const auto& [e, r] : byte_edits) {
    if (out.empty()) break;
    if (e == truncate) {
      out.resize(r % out.size());
    } else if (e == extend) {
      for (uint64_t k = 0; k < 1 + r % 16; ++k) out.push_back(static_cast<uint8_t>(r >> (8 * (k % 8))));
    } else if (e == flip) {
      out[r % out.size()] ^= static_cast<uint8_t>(1u << (r >> 32) % 8);
    } else if (out.size() >= 4) {
      const uint32_t choices[] = {0,
                                  1,
                                  UINT32_MAX,
                                  kMaxGraphTensors,
                                  kMaxGraphTensors + 1,
                                  static_cast<uint32_t>(g.t.size() + 1),
                                  static_cast<uint32_t>(g.t.size() - 1)};
      const uint32_t v = choices[(r >> 8) % std::size(choices)];
      for (int k = 0; k < 4; ++k) out[static_cast<size_t>(k)] = static_cast<uint8_t>(v >> (8 * k));
    }
  }
  return out;
}

}  // namespace weft::rpc::fuzz
