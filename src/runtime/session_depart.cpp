// Session: workers taken out of the pool on purpose (`weft serve`'s
// workers file re-read without them, docs/recovery.md "Workers added and
// removed while serving"). Lost or not yet placed, a worker is forgotten at
// once; placed, it leaves between requests, the model placed again over the
// devices left before the worker is closed, so no request sees it go.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "seconds_since.h"
#include "weft/core/error.h"
#include "weft/runtime/session.h"

namespace weft {

std::vector<std::string> Session::remove_workers(const std::vector<DeviceSpec>& specs) {
  std::vector<size_t> named;  // places in all_specs_
  for (const DeviceSpec& spec : specs)
    for (size_t i = 0; i < all_specs_.size(); ++i)
      if (all_specs_[i].kind == DeviceSpecKind::rpc && all_specs_[i].text == spec.text &&
          std::find(named.begin(), named.end(), i) == named.end())
        named.push_back(i);
  if (named.empty()) return {};
  if (!all_split_.empty() || !all_experts_split_.empty())
    fail(ErrorKind::invalid_input, options_.name,
         "cannot remove " + all_specs_[named.front()].label() +
             ": --split / --experts-split give a share to every device (restart without it)");
  std::sort(named.begin(), named.end());
  std::vector<std::string> removed;
  for (size_t k = named.size(); k-- > 0;) {
    const size_t i = named[k];
    const std::string label = all_specs_[i].label();
    removed.insert(removed.begin(), label);
    const bool placed =
        std::any_of(specs_.begin(), specs_.end(), [&](const DeviceSpec& s) { return s.text == all_specs_[i].text; });
    if (placed) {
      if (std::find(leaving_devices_.begin(), leaving_devices_.end(), label) == leaving_devices_.end())
        leaving_devices_.push_back(label);
      continue;
    }
    // Lost, or added and not yet taken in: nothing of the model is there.
    if (watch_) watch_->forget(all_specs_[i].endpoint);
    std::erase(lost_devices_, label);
    std::erase(joining_devices_, label);
    if (i < all_speeds_.size()) all_speeds_.erase(all_speeds_.begin() + static_cast<std::ptrdiff_t>(i));
    all_specs_.erase(all_specs_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return removed;
}

int Session::depart_idle() {
  if (leaving_devices_.empty()) return 0;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  RejoinReport report;
  report.idle = report.batched = true;
  std::vector<size_t> going;  // places in specs_ (a leaving worker lost since is simply gone)
  for (size_t i = 0; i < specs_.size(); ++i)
    if (std::find(leaving_devices_.begin(), leaving_devices_.end(), specs_[i].label()) != leaving_devices_.end()) {
      going.push_back(i);
      report.removed.push_back(specs_[i].label());
    }
  const auto forget_leaving = [&] {
    for (const std::string& label : leaving_devices_)
      for (size_t i = all_specs_.size(); i-- > 0;)
        if (all_specs_[i].label() == label) {
          if (watch_) watch_->forget(all_specs_[i].endpoint);
          if (i < all_speeds_.size()) all_speeds_.erase(all_speeds_.begin() + static_cast<std::ptrdiff_t>(i));
          all_specs_.erase(all_specs_.begin() + static_cast<std::ptrdiff_t>(i));
          std::erase(lost_devices_, label);
        }
    leaving_devices_.clear();
  };
  if (going.empty()) {
    forget_leaving();
    return 0;
  }
  if (going.size() == specs_.size()) {
    report.declined = "no device would be left to hold the model";
    leaving_devices_.clear();
    if (options_.on_rejoin) options_.on_rejoin(report);
    return 0;
  }
  // Held aside, not closed, until the placement without them is known to fit.
  const std::vector<DeviceSpec> specs_before = specs_;
  const std::vector<DeviceSpeed> speeds_before = speeds_;
  std::vector<std::unique_ptr<Device>> held;
  for (size_t i : going) held.push_back(std::move(devices_[i]));
  drop_devices(going);
  file_ = GgufFile::open(options_.model);
  report.plan = plan(n_ctx_loaded_);
  if (const std::string problem = report.plan.problem(); !problem.empty()) {
    report.declined = "the devices left cannot hold the model without them: " + problem;
    std::vector<std::unique_ptr<Device>> devices;
    for (size_t j = 0, k = 0, h = 0; j < specs_before.size(); ++j)
      devices.push_back(h < going.size() && going[h] == j ? std::move(held[h++]) : std::move(devices_[k++]));
    devices_ = std::move(devices);
    specs_ = specs_before;
    speeds_ = speeds_before;
    file_.reset();
    leaving_devices_.clear();  // they stay; a later removal asks again
    if (options_.on_rejoin) options_.on_rejoin(report);
    return 0;
  }
  forget_leaving();
  forget_history();  // the slots held the cache; the move empties it
  executor_.reset();
  load(report.plan);
  held.clear();  // their sessions end: the workers free what they held
  report.moved = true;
  report.reload_seconds = seconds_since(t0);
  if (options_.on_rejoin) options_.on_rejoin(report);
  return executor_->batch_slots();
}

}  // namespace weft
