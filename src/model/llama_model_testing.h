// LlamaModel's switches for white-box tests, kept out of the installed
// headers (weft/model/model.h names only this struct, as a friend). Tests
// reach this header through the weft_internal interface target.
#pragma once

#include "weft/model/model.h"

namespace weft::model {

struct LlamaModelTestAccess {
  // Reuse of the last graph (on by default); off, every call builds and
  // allocates its graph (a test compares the two).
  static void set_reuse_graphs(LlamaModel& model, bool on) { model.reuse_graphs_ = on; }
};

}  // namespace weft::model
