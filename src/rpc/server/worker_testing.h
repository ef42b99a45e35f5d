// The worker's hooks for white-box tests, kept out of the installed headers
// (weft/rpc/worker.h names only this struct, as a friend). Tests reach this
// header through the weft_rpc_internal interface target.
#pragma once

#include <vector>

#include "transport/stream.h"
#include "weft/core/tensor.h"
#include "weft/rpc/worker.h"

namespace weft::rpc {

struct WorkerTestAccess {
  // Ops every device of worker is to report as unsupported (SUPPORTS_OP
  // answers 0 and a graph with such a node is refused), as a device that
  // lacks them would: tests show that a client places what the worker
  // refuses elsewhere. Call before start().
  static void refuse_ops(Worker& worker, const std::vector<Op>& ops);
  // Serves one already-connected stream on the calling thread until it ends
  // (in-memory tests). Never throws.
  static void serve(Worker& worker, Stream& stream);
  // How many sessions of worker are inside a compute or a PEER_WAIT now (the
  // flag its disconnect monitor watches). Nothing on the wire tells a session
  // blocked in a wait from one that has not read the request yet: a test
  // that must act on the blocked wait polls this instead of sleeping.
  static int busy_sessions(Worker& worker);
};

}  // namespace weft::rpc
