// The scheduler's switches for white-box tests, kept out of the installed
// headers (weft/backend/sched.h names only this struct, as a friend). Tests
// reach this header through the weft_internal interface target.
#pragma once

#include "weft/backend/sched.h"

namespace weft {

struct SchedulerTestAccess {
  // Skips the memory-hazard waits (rule 2, docs/scheduler.md), so that a
  // test can prove it sees the race they prevent.
  static void skip_hazard_waits(Scheduler& scheduler, bool skip);
};

}  // namespace weft
