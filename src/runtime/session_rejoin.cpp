// Session: taking back workers that answer again after a loss
// (SessionOptions::on_rejoin, docs/recovery.md "Rejoin"). The watch probes
// the lost endpoints in the background; at a token boundary, when every lost
// worker answers, the rule (RejoinEstimate) weighs the time per token won
// back against the cost of the move, and a move places the model over the
// devices as constructed, loads it and re-evaluates the history.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "seconds_since.h"
#include "weft/core/error.h"
#include "weft/runtime/session.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

// Decoded tokens measured on the placement without the lost workers before
// the rule is weighed: one token's time alone is too noisy.
constexpr int64_t kMinMeasuredTokens = 2;
// The weight of the newest token's time in the moving average: 1/4.
constexpr double kDecodeAverage = 4;

}  // namespace

void Session::note_decode_seconds(double seconds) {
  // A moving average weighted to the last few tokens: a link that turned
  // slow shows within a few tokens.
  decode_seconds_ = decode_tokens_ == 0 ? seconds : decode_seconds_ + (seconds - decode_seconds_) / kDecodeAverage;
  ++decode_tokens_;
}

RejoinEstimate Session::rejoin_estimate(int64_t remaining) const {
  RejoinEstimate e;
  e.seconds_per_token_now = decode_seconds_;
  e.seconds_per_token_with = full_seconds_per_token_;
  e.remaining_tokens = remaining;
  // The last recovery moved the same model over one placement change: its
  // reload, and its re-prefill per token times the history now. An upper
  // bound for the upload: a returning worker that kept its weights sends
  // only their hashes.
  e.move_seconds = last_reload_seconds_;
  if (last_reprefill_tokens_ > 0)
    e.move_seconds += last_reprefill_seconds_ * static_cast<double>(history_.size()) /
                      static_cast<double>(last_reprefill_tokens_);
  return e;
}

bool Session::try_rejoin(int64_t remaining, std::vector<float>& logits) {
  if (!watch_ || !history_known_ || specs_.size() == all_specs_.size()) return false;
  RejoinReport report;
  const std::vector<size_t> back = missing_devices();
  for (size_t i : back) {
    if (!watch_->answered(all_specs_[i].endpoint)) return false;  // all of them: the rule's time is theirs together
    report.rejoined.push_back(all_specs_[i].label());
  }
  if (full_seconds_per_token_ >= 0 && decode_tokens_ < kMinMeasuredTokens) return false;  // measure first
  // Weighed at every token while they answer (times change: a link turns
  // slow); a decline is reported once, a move whenever it comes.
  report.estimate = rejoin_estimate(remaining);
  if (full_seconds_per_token_ < 0)
    report.declined = "no time per token was measured with every device (the loss came before the second token)";
  else if (!report.estimate.pays())
    report.declined = "the time it would save does not exceed the cost of the move";
  else
    report.moved = move_back(report, back);
  if (!report.moved && rejoin_noted_) return false;
  rejoin_noted_ = !report.moved;
  if (report.moved) {
    ++rejoins_;
    const Clock::time_point t1 = Clock::now();
    executor_->eval(history_, 0, logits, model::LogitRows::last);
    report.reprefill_seconds = seconds_since(t1);
    report.tokens_reevaluated = static_cast<int64_t>(history_.size());
  }
  if (options_.on_rejoin) options_.on_rejoin(report);
  return report.moved;
}

bool Session::every_lost_worker_answers() const {
  if (!watch_ || specs_.size() == all_specs_.size()) return false;
  const std::vector<size_t> missing = missing_devices();
  return std::all_of(missing.begin(), missing.end(),
                     [&](size_t i) { return watch_->answered(all_specs_[i].endpoint); });
}

int Session::rejoin_batched(const RejoinEstimate* running) {
  if (!watch_ || specs_.size() == all_specs_.size()) return 0;
  if (running && !every_lost_worker_answers()) return 0;  // the rule's time is theirs together
  RejoinReport report;
  report.idle = running == nullptr;
  report.batched = true;
  std::vector<size_t> back;  // idle: each that answers, the others left out still
  for (size_t i : missing_devices()) {
    if (!watch_->answered(all_specs_[i].endpoint)) continue;
    back.push_back(i);
    report.rejoined.push_back(all_specs_[i].label());
  }
  if (back.empty()) return 0;
  if (running) {
    report.estimate = *running;
    if (running->seconds_per_token_with < 0)
      report.declined = "no time per step was measured with every device (the loss came before the second step)";
    else if (!running->pays())
      report.declined = "the time it would save does not exceed the cost of the move";
  }
  if (report.declined.empty()) {
    forget_history();  // the batch's slots held the cache; the move empties it
    report.moved = move_back(report, back);
  }
  if (!report.moved && rejoin_noted_) return 0;
  rejoin_noted_ = !report.moved;
  if (report.moved) ++rejoins_;
  if (options_.on_rejoin) options_.on_rejoin(report);
  return report.moved ? executor_->batch_slots() : 0;
}

std::vector<std::string> Session::add_workers(const std::vector<DeviceSpec>& specs) {
  std::vector<const DeviceSpec*> fresh;
  for (const DeviceSpec& spec : specs) {
    if (spec.kind != DeviceSpecKind::rpc)
      fail(ErrorKind::invalid_input, options_.name, "'" + spec.text + "' is not a worker");
    const bool known = std::any_of(all_specs_.begin(), all_specs_.end(), [&](const DeviceSpec& s) { return s.text == spec.text; }) ||
                       std::any_of(fresh.begin(), fresh.end(), [&](const DeviceSpec* s) { return s->text == spec.text; });
    if (!known) fresh.push_back(&spec);
  }
  if (!fresh.empty() && (!all_split_.empty() || !all_experts_split_.empty()))
    fail(ErrorKind::invalid_input, options_.name,
         "cannot add " + fresh.front()->label() + ": --split / --experts-split give a share to every device "
         "(restart with its share)");
  if (!fresh.empty() && !watch_) watch_ = std::make_unique<RejoinWatch>(options_.device_options.rpc);
  std::vector<std::string> added;
  for (const DeviceSpec* spec : fresh) {
    all_specs_.push_back(*spec);
    if (!all_speeds_.empty()) all_speeds_.push_back(DeviceSpeed{});  // probed when it joins
    joining_devices_.push_back(spec->label());
    watch_->watch(spec->endpoint);
    added.push_back(spec->label());
  }
  return added;
}

std::vector<size_t> Session::missing_devices() const {
  std::vector<size_t> missing;
  size_t k = 0;  // specs_ is all_specs_ less the lost, in order
  for (size_t i = 0; i < all_specs_.size(); ++i) {
    if (k < specs_.size() && specs_[k].text == all_specs_[i].text)
      ++k;
    else
      missing.push_back(i);
  }
  return missing;
}

bool Session::move_back(RejoinReport& report, const std::vector<size_t>& back) {
  const Clock::time_point t0 = Clock::now();
  // The returning devices are opened first: one gone again changes nothing.
  std::vector<std::unique_ptr<Device>> opened;
  for (size_t i : back) {
    try {
      opened.push_back(open_device(all_specs_[i], options_.device_options));
    } catch (const Error& e) {
      report.declined = "it could not be reached again: " + std::string(e.what());
      watch_->watch(all_specs_[i].endpoint);  // back to probing
      return false;
    }
  }
  // The devices as constructed, a gap for each still missing, then the
  // gaps dropped again: drop_devices cuts the shares and speeds to match.
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<size_t> still_missing;
  size_t k = 0, o = 0;
  for (size_t i = 0; i < all_specs_.size(); ++i) {
    if (k < specs_.size() && specs_[k].text == all_specs_[i].text) {
      devices.push_back(std::move(devices_[k++]));
    } else if (o < back.size() && back[o] == i) {
      devices.push_back(std::move(opened[o++]));
    } else {
      devices.push_back(nullptr);
      still_missing.push_back(i);
    }
  }
  devices_ = std::move(devices);
  specs_ = all_specs_;
  speeds_ = all_speeds_;
  options_.split = all_split_;
  options_.experts_split = all_experts_split_;
  drop_devices(still_missing);
  std::vector<size_t> returned;  // the places of back in devices_ now
  for (size_t i : back)
    returned.push_back(i - static_cast<size_t>(std::count_if(still_missing.begin(), still_missing.end(),
                                                             [i](size_t m) { return m < i; })));
  file_ = GgufFile::open(options_.model);
  probe_joined(returned);  // a worker added since construction has no speed yet
  report.plan = plan(n_ctx_loaded_);
  // Free memory is asked while the model is still loaded where it is: a
  // plan that fits only once that is freed is not tried.
  if (const std::string problem = report.plan.problem(); !problem.empty()) {
    report.declined = "the placement with them does not fit now: " + problem;
    drop_devices(returned);
    file_.reset();
    return false;
  }
  for (size_t i : back) {
    watch_->forget(all_specs_[i].endpoint);
    const std::string label = all_specs_[i].label();
    std::erase(lost_devices_, label);  // missing no more (`weft serve`'s /health)
    std::erase(joining_devices_, label);
  }
  all_speeds_ = speeds_.empty() ? speeds_ : all_speeds_;  // a failed probe of a new worker: none kept
  for (size_t j = 0; j < back.size() && !speeds_.empty(); ++j) all_speeds_[back[j]] = speeds_[returned[j]];
  executor_.reset();
  load(report.plan);
  report.reload_seconds = seconds_since(t0);
  return true;
}

}  // namespace weft
