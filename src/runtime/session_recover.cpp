// Session: going on after a worker's death (SessionOptions::recover,
// docs/recovery.md). The lost devices leave the session; the model is
// placed and loaded again over the rest, from the file, as load() would
// place it; the tokens so far are evaluated again to rebuild the KV cache.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "seconds_since.h"
#include "weft/core/error.h"
#include "weft/rpc/client.h"
#include "weft/runtime/session.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

// spec ("a,b,c", one weight per device; with groups, "a,b/c": see
// parse_split_groups) without the entries at lost; a group left empty goes.
std::string without(const std::string& spec, size_t n_parts, const std::vector<size_t>& lost, const char* flag,
                    bool groups) {
  if (spec.empty()) return spec;
  const std::vector<std::vector<double>> weights =
      groups ? parse_split_groups(spec, n_parts, flag) : std::vector<std::vector<double>>{parse_split(spec, n_parts, flag)};
  std::string out;
  size_t i = 0;
  for (const std::vector<double>& group : weights) {
    std::string kept;
    for (double w : group) {
      if (std::find(lost.begin(), lost.end(), i++) != lost.end()) continue;
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", w);
      if (!kept.empty()) kept += ',';
      kept += buf;
    }
    if (kept.empty()) continue;
    if (!out.empty()) out += '/';
    out += kept;
  }
  return out;
}

}  // namespace

void Session::drop_devices(const std::vector<size_t>& lost) {
  const size_t n = devices_.size();
  options_.split = without(options_.split, n, lost, "--split", options_.split_mode == SessionOptions::SplitMode::tensor);
  options_.experts_split = without(options_.experts_split, n, lost, "--experts-split", false);
  const bool with_speeds = speeds_.size() == n;  // asked once: each erase below shortens it
  for (size_t k = lost.size(); k-- > 0;) {
    const auto at = static_cast<std::ptrdiff_t>(lost[k]);
    devices_.erase(devices_.begin() + at);
    specs_.erase(specs_.begin() + at);
    if (with_speeds) speeds_.erase(speeds_.begin() + at);
  }
}

bool Session::replace_lost(const Error& cause, RecoveryReport& report) {
  const std::string& where = options_.name;
  const Clock::time_point t0 = Clock::now();
  // Which workers are gone: those whose connection no longer answers. A
  // survivor may have reported the loss (its peer link ended) while the
  // dead one was never spoken to since, so each is asked.
  std::vector<size_t> lost;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].kind != DeviceSpecKind::rpc || rpc_alive(specs_[i].endpoint)) continue;
    lost.push_back(i);
    report.lost.push_back(specs_[i].label());
  }
  if (lost.empty()) return false;
  std::string names;
  for (const std::string& l : report.lost) names += (names.empty() ? "" : ", ") + l;
  report.cause = cause.what();
  lost_devices_.insert(lost_devices_.end(), report.lost.begin(), report.lost.end());
  const int64_t n_ctx = executor_ ? executor_->n_ctx() : n_ctx_loaded_;  // none when a rejoin's load failed
  if (full_seconds_per_token_ < 0 && specs_.size() == all_specs_.size() && decode_tokens_ > 0)
    full_seconds_per_token_ = decode_seconds_;  // what a rejoin would win back
  if (!watch_) watch_ = std::make_unique<RejoinWatch>(options_.device_options.rpc);
  for (size_t i : lost) watch_->watch(specs_[i].endpoint);
  rejoin_noted_ = false;
  executor_.reset();  // its buffers on the survivors are freed; the lost ones' with their sessions
  drop_devices(lost);
  if (devices_.empty())
    fail(ErrorKind::disconnected, where, "every device holding the model was lost (" + names + "): " + cause.what());
  file_ = GgufFile::open(options_.model);
  report.plan = plan(n_ctx);
  if (const std::string problem = report.plan.problem(); !problem.empty())
    fail(ErrorKind::out_of_memory, where,
         "after losing " + names + ", the devices left cannot hold the model: " + problem);
  load(report.plan);
  report.reload_seconds = seconds_since(t0);
  last_reload_seconds_ = report.reload_seconds;  // what a move back is predicted from
  return true;
}

bool Session::recover(const Error& cause, std::span<const int32_t> history, std::vector<float>& logits) {
  RecoveryReport report;
  if (!replace_lost(cause, report)) return false;
  const Clock::time_point t1 = Clock::now();
  executor_->eval(history, 0, logits, model::LogitRows::last);
  report.reprefill_seconds = seconds_since(t1);
  report.tokens_reevaluated = static_cast<int64_t>(history.size());
  last_reprefill_seconds_ = report.reprefill_seconds;
  last_reprefill_tokens_ = report.tokens_reevaluated;
  ++recoveries_;
  if (options_.on_recovery) options_.on_recovery(report);
  return true;
}

int Session::recover_batched(const std::exception& cause) {
  const auto* error = dynamic_cast<const Error*>(&cause);
  // No executor: a rejoin's load failed part-way; the last load's context is placed again.
  if (!options_.recover || n_ctx_loaded_ <= 0 || !error || error->kind() != ErrorKind::disconnected) return 0;
  RecoveryReport report;  // the engine re-evaluates each sequence: no tokens here
  if (!replace_lost(*error, report)) return 0;
  ++recoveries_;
  if (options_.on_recovery) options_.on_recovery(report);
  return executor_->batch_slots();
}

}  // namespace weft
