// Graphs on the wire (docs/rpc-protocol.md section 4): the client encodes,
// the worker decodes and validates by rebuilding every tensor through the
// op constructors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "protocol/wire.h"
#include "weft/backend/backend.h"
#include "weft/core/context.h"
#include "weft/core/graph.h"

namespace weft::rpc {

// The most elements a tensor may span, zero dims counted as 1. It bounds
// the work one node can ask of a worker (a zero-stride view needs almost no
// memory however large its shape) while leaving room for any real model
// tensor (a 150k x 8192 embedding is 1.2e9 elements). The client checks it
// before sending (client/remote_support.cpp), the worker on decoding.
inline constexpr int64_t kMaxNominalElements = int64_t{1} << 32;

// Where a tensor with memory of its own lives on the worker.
struct RemoteLocation {
  uint64_t handle = 0;  // 0: none (views and tensors writing into another's memory)
  uint64_t offset = 0;
};

// One tensor record of section 4, its fields in wire order. encode and
// decode move the fields only (decode throws Error(invalid_input) on a short
// payload); what they mean is decode_graph's to check. Tests build records
// by hand with it (tests/rpc/wire_graph.h).
struct WireTensor {
  // dtype u8, op u8, flags u16, ne 4 x i64, nb 4 x u64, op_params 16 x i32,
  // src 4 x u32, view_src u32, view_offs u64, buffer u64, offset u64.
  static constexpr size_t kBytes = 1 + 1 + 2 + 32 + 32 + 64 + 16 + 4 + 8 + 8 + 8;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint16_t flags = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};
  uint64_t nb[kMaxDims] = {};
  int32_t op_params[kMaxOpParams] = {};
  uint32_t src[kWireSrc] = {};  // 0 none, else 1 + the index of an earlier tensor
  uint32_t view_src = 0;       // likewise
  uint64_t view_offs = 0;
  uint64_t buffer = 0;  // handle; 0: no memory of its own
  uint64_t offset = 0;
  void encode(Writer& w) const;
  static WireTensor decode(Reader& r);
};

// Encodes what a worker needs to run g: its computing nodes (not views, which
// compute nothing), in g's order, and every tensor they read, each after its
// sources. Views are sent only where a node reads them; tensors g does not
// contain go as leafs (or as plain views of their root). location() is asked
// for each sent tensor that is not a view (view_src == nullptr) and must give
// a handle; handle 0 there throws Error(invalid_input).
void encode_graph(Writer& w, const Graph& g, const std::function<RemoteLocation(const Tensor&)>& location);

struct DecodedGraph {
  Context ctx;
  Graph graph;  // nodes to compute, in order
};

// Decodes and validates a graph. buffer_of(handle) returns the session's live
// buffer or nullptr; supports(t) says whether the device computes t (asked
// for each listed node). Tensors are bound to their buffers' memory. The
// graph holds the leafs (op none), then the listed nodes in the order sent,
// each after the unlisted views it reads; other unlisted tensors are data
// already in memory and are not computed. Throws Error(invalid_input) whose
// message starts "[rpc graph]" and names the tensor (or node) index and the
// field. Reads only the graph: the caller checks the payload's end.
// Host bytes a DecodedGraph of n tensors holds (its Context and Graph), with
// the decoder's transient tables: what a worker charges to the session's
// memory before decoding. tests/rpc/test_graph_codec.cpp checks it against
// the heap a real decode takes.
size_t decoded_graph_bytes(size_t n_tensors);
// The most tensors an encoded graph of n payload bytes can hold.
size_t max_graph_tensors_in(size_t payload_bytes);

// The op's constructor (weft/core/ops.h) applied to sources and sent
// parameters: what the decoder, and op_query.h for SUPPORTS_OP, rebuild every
// non-leaf tensor with. ne, nb and view_offs are read only by the view ops.
// Throws the constructor's Error (its message names the op); op none throws
// Error(internal) (leafs are not built by an op).
Tensor* rebuild_op(Context& ctx, Op op, const int32_t (&params)[kMaxOpParams], const int64_t (&ne)[kMaxDims],
                   const uint64_t (&nb)[kMaxDims], uint64_t view_offs, Tensor* const (&src)[kMaxSrc]);

std::unique_ptr<DecodedGraph> decode_graph(Reader& r, const std::function<Buffer*(uint64_t)>& buffer_of,
                                           const std::function<bool(const Tensor&)>& supports);

}  // namespace weft::rpc
