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

// Where a tensor with memory of its own lives on the worker.
struct RemoteLocation {
  uint64_t handle = 0;  // 0: none (views and tensors writing into another's memory)
  uint64_t offset = 0;
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

std::unique_ptr<DecodedGraph> decode_graph(Reader& r, const std::function<Buffer*(uint64_t)>& buffer_of,
                                           const std::function<bool(const Tensor&)>& supports);

}  // namespace weft::rpc
