// The node a SUPPORTS_OP request describes (docs/rpc-protocol.md section
// 3a), rebuilt on the worker so that its device's own supports_op can be
// asked about it. Nothing is computed and no memory is bound: the sources
// are bare tensors with the sent dtype, ne and nb (data stays null).
//
//   auto req = parse<SupportsOpRequest>(payload);
//   std::unique_ptr<QueriedNode> q = rebuild_queried_node(req);   // throws on a bad node
//   bool yes = device.supports_op(*q->node);
#pragma once

#include <memory>

#include "protocol/messages.h"
#include "weft/core/context.h"

namespace weft::rpc {

struct QueriedNode {
  Context ctx;             // owns the node and its sources
  Tensor* node = nullptr;  // built by its op's constructor from the sources
};

// Validates q as section 4 validates a received tensor, then rebuilds it:
// op and dtypes known; the op computes (a view or none is never asked);
// ne non-negative and at most 2^32 elements (zero dims counted as 1); every
// source's strides a multiple of its element alignment and its byte extent
// under 2^62 (overflow-safe); the node rebuilt by its op's constructor from
// the sources and op_params, and the result's dtype, ne and nb equal to the
// ones sent. Anything else throws Error(invalid_input, "[rpc SUPPORTS_OP]
// ...") naming the field and value, or the constructor's message.
std::unique_ptr<QueriedNode> rebuild_queried_node(const SupportsOpRequest& q);

}  // namespace weft::rpc
