// What the commands that run a model share: their model and device options
// turned into SessionOptions (session_options.cpp), and the Session's plan,
// loading progress and traffic printed to stderr (session_ui.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_options.h"
#include "weft/runtime/session.h"

namespace weft::tools {

// --model, --threads, --worker/--device, --split, --placement,
// --worker-timeout as the Session's options: this CPU first, then each
// worker's device 0, then each --device spec. what names the command in
// errors.
SessionOptions session_options(const ModelHostArgs& args, const char* what);

// Prints the plan (with two or more devices a line naming the placement
// and the predicted time per token; then one line per device: layers,
// weights, KV cache, free memory, and when probed the stage's predicted
// time and what the probe measured), loads the model with a progress bar
// when stderr is a terminal, then prints how long the weights took.
// Returns the plan it loaded.
LoadPlan load_with_progress(Session& session, int64_t n_ctx);

// What a recovery did (SessionOptions::on_recovery), on stderr: the
// devices lost, the new placement, the seconds it took (docs/recovery.md).
void print_recovery(const RecoveryReport& r);
// "[rejoined] ..." or "[rejoin declined] ...", with the rule's numbers.
void print_rejoin(const RejoinReport& r);

// One line per remote device: bytes sent and received, round trips, waiting.
void print_device_stats(const Session& session);

// With two or more devices, one line per device: the seconds it computed
// per step between two Session::compute_stats() snapshots over `steps`
// evals, beside the plan's predicted time for its stage (when probed).
void print_stage_times(const LoadPlan& plan, const std::vector<DeviceCompute>& before,
                       const std::vector<DeviceCompute>& after, int64_t steps);

// --chat-template NAME (a built-in) or FILE as the template's text; "" for
// "" (the model's own). Error(invalid_input) naming both when it is neither.
std::string chat_template_source(const std::string& spec, const char* what);

}  // namespace weft::tools
