// The Executor's switches for white-box tests, kept out of the installed
// headers (weft/runtime/executor.h names only this struct, as a friend).
// Tests reach this header through the weft_internal interface target.
#pragma once

#include "runtime/executor_state.h"
#include "weft/runtime/executor.h"

namespace weft {

struct ExecutorTestAccess {
  // Reuse of the last graph (on by default); off, every call builds and
  // allocates its graph (a test compares the two).
  static void set_reuse_graphs(Executor& executor, bool on) { executor.state_->reuse_graphs_ = on; }
};

}  // namespace weft
