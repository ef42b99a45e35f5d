// The plan, progress and stats lines of the commands that run a model.
#include "session_ui.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace weft::tools {
namespace {

double mib(size_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// Draws "loading weights [####    ]  52%  55.1/106.0 MiB" on a terminal,
// redrawn when the percentage changes; prints nothing elsewhere.
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO) != 0) {}
  void update(size_t done, size_t total) {
    if (!tty_ || total == 0) return;
    const int percent = static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\rloading weights [%.*s%*s] %3d%%  %.1f/%.1f MiB", filled, "##############################",
                 kWidth - filled, "", percent, mib(done), mib(total));
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool tty_;
  int last_percent_ = -1;
};

// "0.412 ms" (three significant digits).
std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  return buf;
}

// ", predicted 0.412 ms/token + 0.105 ms link; measured: matvec 9.61 GB/s,
// round trip 0.21 ms, link 2.13 GB/s": what the probe gave for a device.
std::string prediction(const DevicePlan& d) {
  if (!d.speed.measured()) return {};
  std::string s = ", predicted " + ms(d.predicted_seconds) + "/token";
  if (d.predicted_link_seconds > 0) s += " + " + ms(d.predicted_link_seconds) + " link";
  char buf[128];
  std::snprintf(buf, sizeof buf, "; measured: matvec %.3g GB/s", 1e-9 / d.speed.seconds_per_byte);
  s += buf;
  if (d.speed.bytes_per_second > 0) {
    std::snprintf(buf, sizeof buf, ", round trip %s, link %.3g GB/s", ms(2 * d.speed.latency_seconds).c_str(),
                  d.speed.bytes_per_second * 1e-9);
    s += buf;
  }
  return s;
}

}  // namespace





LoadPlan load_with_progress(Session& session, int64_t n_ctx) {
  if (const std::string& w = session.tokenizer().warning(); !w.empty()) std::fprintf(stderr, "weft: warning: %s\n", w.c_str());
  const LoadPlan plan = session.plan(n_ctx);
  if (plan.devices.size() > 1) {
    std::string line = "placement: " + plan.policy;
    if (plan.predicted_seconds > 0) {
      double compute = 0, links = plan.predicted_seconds + plan.predicted_overlap_seconds;
      for (const DevicePlan& d : plan.devices) compute += d.predicted_seconds;
      links -= compute;
      line += "; predicted " + ms(plan.predicted_seconds) + "/token (" + ms(compute) + " compute, " + ms(links) +
              " links" + (plan.predicted_overlap_seconds > 0 ? ", " + ms(plan.predicted_overlap_seconds) + " of it at once" : std::string()) + ")";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  size_t total = 0;
  bool expert_split = false;
  for (const DevicePlan& d : plan.devices) expert_split = expert_split || d.part.n_experts > 0;
  for (const DevicePlan& d : plan.devices) {
    total += d.part.weight_bytes;
    std::string experts =
        expert_split ? ", " + std::to_string(d.part.n_experts) + " experts of each layer" : std::string();
    if (d.part.last_head > d.part.first_head)  // a tensor split: its heads of every layer
      experts += ", heads [" + std::to_string(d.part.first_head) + ", " + std::to_string(d.part.last_head) + ")";
    const std::string ring = plan.sliding_ring_rows > 0
                                 ? "; sliding layers " + std::to_string(plan.sliding_ring_rows) + " in a ring"
                                 : std::string();
    std::fprintf(stderr, "%s (%s): layers [%lld, %lld)%s, %s weights + %s %s KV cache (%lld positions%s), %s free%s\n",
                 d.label.c_str(), d.device_name.c_str(), static_cast<long long>(d.part.first_layer),
                 static_cast<long long>(d.part.last_layer), experts.c_str(), format_bytes(d.part.weight_bytes).c_str(),
                 format_bytes(d.part.kv_cache_bytes).c_str(), std::string(dtype_name(plan.cache_type)).c_str(),
                 static_cast<long long>(n_ctx), ring.c_str(), format_bytes(d.free_bytes).c_str(), prediction(d).c_str());
  }
  ProgressBar bar;
  const auto t0 = std::chrono::steady_clock::now();
  session.load(plan, [&bar](size_t done, size_t all) { bar.update(done, all); });  // the plan just printed
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t mapped = session.mapped_weight_bytes();
  std::fprintf(stderr, "loaded %s of weights in %.2f s (%.0f MiB/s%s%s)\n", format_bytes(total).c_str(), s,
               s > 0 ? mib(total) / s : 0.0, mapped > 0 ? "; used in place from the file: " : "",
               mapped > 0 ? format_bytes(mapped).c_str() : "");
  return plan;
}

void print_stage_times(const LoadPlan& plan, const std::vector<DeviceCompute>& before,
                       const std::vector<DeviceCompute>& after, int64_t steps) {
  if (plan.devices.size() < 2 || before.size() != plan.devices.size() || after.size() != before.size() || steps <= 0)
    return;
  for (size_t i = 0; i < before.size(); ++i) {
    const DevicePlan& d = plan.devices[i];
    std::string line = "stage " + d.label + ": ";
    if (before[i].seconds < 0 || after[i].seconds < 0) {
      line += "compute time not reported (a worker older than protocol 1.6, or another kind of device)";
    } else {
      const double per_step = (after[i].seconds - before[i].seconds) / static_cast<double>(steps);
      line += "measured " + ms(per_step) + "/token computing (" +
              std::to_string(after[i].graphs - before[i].graphs) + " graphs)";
      if (d.predicted_seconds > 0) line += ", predicted " + ms(d.predicted_seconds);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void print_recovery(const RecoveryReport& r) {
  std::string lost, left;
  for (const std::string& l : r.lost) lost += (lost.empty() ? "" : ", ") + l;
  for (const DevicePlan& d : r.plan.devices)
    left += (left.empty() ? "" : ", ") + d.label + " layers " + std::to_string(d.part.first_layer) + "-" +
            std::to_string(d.part.last_layer);
  if (r.tokens_reevaluated == 0) {  // a batched step's: each sequence re-evaluates its own next
    std::fprintf(stderr, "\n[recovered] lost %s; now %s; reloaded in %.2f s; each sequence re-evaluates its tokens\n",
                 lost.c_str(), left.c_str(), r.reload_seconds);
    return;
  }
  std::fprintf(stderr, "\n[recovered] lost %s; now %s; reloaded in %.2f s, %lld tokens re-evaluated in %.2f s\n",
               lost.c_str(), left.c_str(), r.reload_seconds, static_cast<long long>(r.tokens_reevaluated),
               r.reprefill_seconds);
}

namespace {

// A worker taken out of the pool (Session::depart_idle): the placement
// without it, or why it stays.
void print_departure(const RejoinReport& r) {
  std::string gone, now;
  for (const std::string& l : r.removed) gone += (gone.empty() ? "" : ", ") + l;
  if (!r.moved) {
    std::fprintf(stderr, "\n[removal declined] %s stays: %s\n", gone.c_str(), r.declined.c_str());
    return;
  }
  for (const DevicePlan& d : r.plan.devices)
    now += (now.empty() ? "" : ", ") + d.label + " layers " + std::to_string(d.part.first_layer) + "-" +
           std::to_string(d.part.last_layer);
  std::fprintf(stderr, "\n[removed] %s; now %s; reloaded in %.2f s\n", gone.c_str(), now.c_str(), r.reload_seconds);
}

}  // namespace

void print_rejoin(const RejoinReport& r) {
  if (!r.removed.empty()) return print_departure(r);
  std::string back, now;
  for (const std::string& l : r.rejoined) back += (back.empty() ? "" : ", ") + l;
  const RejoinEstimate& e = r.estimate;
  char rule[200] = "idle: no request in flight";  // `weft serve` between requests: no rule weighed
  const char* unit = r.batched ? "round" : "token";  // a round: each sequence's next token
  if (!r.idle)
    std::snprintf(rule, sizeof rule, "%.1f ms/%s now, %.1f ms with it, %lld %ss left: saves %.2f s, move %.2f s",
                  1e3 * e.seconds_per_token_now, unit, 1e3 * e.seconds_per_token_with,
                  static_cast<long long>(e.remaining_tokens), unit, e.gain_seconds(), e.move_seconds);
  if (!r.moved) {
    std::fprintf(stderr, "\n[rejoin declined] %s answers again; stays out: %s (%s)\n", back.c_str(), r.declined.c_str(),
                 rule);
    return;
  }
  for (const DevicePlan& d : r.plan.devices)
    now += (now.empty() ? "" : ", ") + d.label + " layers " + std::to_string(d.part.first_layer) + "-" +
           std::to_string(d.part.last_layer);
  char again[120] = "the sequences re-evaluate what they had in the next steps";
  if (!r.batched)
    std::snprintf(again, sizeof again, "%lld tokens re-evaluated in %.2f s",
                  static_cast<long long>(r.tokens_reevaluated), r.reprefill_seconds);
  std::fprintf(stderr, "\n[rejoined] %s back; now %s; reloaded in %.2f s, %s (%s)\n", back.c_str(), now.c_str(),
               r.reload_seconds, again, rule);
}

void print_device_stats(const Session& session) {
  if (session.options().recover)
    std::fprintf(stderr, "recovery: %d recoveries, %d rejoins\n", session.recoveries(), session.rejoins());
  for (const DeviceStats& d : session.stats()) {
    if (!d.remote) continue;
    const RpcStats& s = d.rpc;
    std::fprintf(stderr, "worker %s: %s sent, %s received, %llu round trips, %.3f s waiting, %llu op-support queries\n",
                 d.label.c_str(), format_bytes(s.bytes_sent).c_str(), format_bytes(s.bytes_received).c_str(),
                 static_cast<unsigned long long>(s.round_trips), s.wait_seconds,
                 static_cast<unsigned long long>(s.support_queries));
    if (!s.peer_link_failure.empty())
      std::fprintf(stderr, "worker %s: copies through this host: %s\n", d.label.c_str(), s.peer_link_failure.c_str());
  }
}


}  // namespace weft::tools
