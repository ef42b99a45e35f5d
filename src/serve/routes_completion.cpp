// The completion routes (/v1/completions, /v1/chat/completions and their
// short spellings): a request parsed, submitted to the engine, and answered
// whole or streamed as server-sent events.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>

#include "serve/choice_stream.h"
#include "serve/peer_probe.h"
#include "serve/route_helpers.h"
#include "serve/server_impl.h"

namespace weft::serve {
namespace {

// A streamed request's state between calls of its content provider: its
// choices' sequences, their chunk builders and finishing events.
struct StreamState {
  std::vector<std::shared_ptr<Request>> requests;
  std::vector<ChoiceStream> choices;
  std::vector<std::optional<Event>> finished;
  size_t next = 0;  // the choice polled first next time (round robin)

  void cancel() {
    for (auto& r : requests) r->cancel();
  }
  bool done() const {
    return std::all_of(finished.begin(), finished.end(), [](const auto& f) { return f.has_value(); });
  }
  // The next event of any choice still running, and its index: each is
  // asked without waiting, then the first one running for up to 100 ms.
  std::optional<Event> next_event(size_t& which) {
    const size_t n = requests.size();
    for (size_t k = 0; k < n; ++k) {
      which = (next + k) % n;
      if (finished[which]) continue;
      if (std::optional<Event> e = requests[which]->next(std::chrono::milliseconds(0))) {
        next = which + 1;
        return e;
      }
    }
    which = 0;
    while (which < n && finished[which]) ++which;
    return which < n ? requests[which]->next(std::chrono::milliseconds(n == 1 ? 100 : 10)) : std::nullopt;
  }
};

// One call of a stream's content provider: the next event as SSE lines, or
// a check that the client is still there when none came. False ends the
// stream (the client left, or it is complete).
bool stream_step(StreamState& s, const CompletionRequest& r, const ResponseMeta& meta, const model::Tokenizer& tok,
                 const PeerAddress& peer, httplib::DataSink& sink) {
  size_t which = 0;
  std::optional<Event> e = s.next_event(which);
  if (!e) {  // nothing to write (queued, or a long prompt): is anyone there?
    if ((sink.is_writable && !sink.is_writable()) || !peer_connected(peer)) {
      s.cancel();
      return false;
    }
    return true;
  }
  auto send = [&](const Json& j) {
    const std::string line = "data: " + dump_json(j) + "\n\n";
    return sink.write(line.data(), line.size());
  };
  bool ok = true;
  // A stream cut short (generation failed, or the server is stopping) ends
  // with an error event rather than a finish_reason clients would take for
  // a complete reply; the other choices end with it.
  const bool failed = e->finished && (e->finish_reason == "error" || e->finish_reason == "cancelled");
  if (failed) {
    if (!e->text.empty()) {
      Event piece = *e;
      piece.finished = false;
      for (const Json& c : s.choices[which].chunks(piece, meta, tok)) ok = ok && send(c);
    }
    const ApiError err = e->finish_reason == "error"
                             ? ApiError(500, "server_error", "generation failed: " + e->error)
                             : ApiError(503, "unavailable_error", "the request was cancelled: the server is stopping");
    ok = ok && send(err.body());
    s.cancel();
  } else {
    for (const Json& c : s.choices[which].chunks(*e, meta, tok)) ok = ok && send(c);
    if (e->finished) s.finished[which] = *e;
    if (ok && s.done() && r.include_usage) {
      std::vector<Event> ends;
      for (const auto& f : s.finished) ends.push_back(*f);
      ok = send(usage_chunk(r, meta, ends));
    }
  }
  if (ok && (failed || s.done())) {
    static const std::string done = "data: [DONE]\n\n";
    ok = sink.write(done.data(), done.size());
    sink.done();
  }
  if (!ok) s.cancel();
  return ok;
}

// The whole replies of a request's choices (they run together; each is
// waited for in turn). A choice that failed fails the request.
std::vector<Collected> collect_replies(const std::vector<std::shared_ptr<Request>>& requests, const PeerAddress& peer) {
  std::vector<Collected> out;
  for (const auto& request : requests) {
    out.push_back(collect_reply(*request, peer));
    const Event& f = out.back().finish;
    if (f.finish_reason == "error" || f.finish_reason == "cancelled") {
      for (const auto& other : requests) other->cancel();
      if (f.finish_reason == "error") throw ApiError(500, "server_error", "generation failed: " + f.error);
      throw ApiError(503, "unavailable_error",
                     "the request was cancelled: its client left or the server is stopping");
    }
  }
  return out;
}

}  // namespace

void Server::Impl::post_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  guarded(res, [&] {
    Engine* engine = ready_engine(res);
    if (!engine) return;
    // The request's time runs from its arrival: rendering the chat
    // template counts, and stops early when the client leaves.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(options.request_timeout_seconds * 1e3));
    const PeerAddress peer{req.remote_addr, req.remote_port, port};
    CompletionRequest r = parse_completion(parse_body(req), chat, api, RenderControl{deadline, client_gone(peer)});
    r.job.deadline = deadline;
    // n choices: n sequences, each with its own seed, queued together or not at all.
    std::vector<Job> jobs(static_cast<size_t>(r.n), r.job);
    for (int i = 0; i < r.n; ++i) jobs[static_cast<size_t>(i)].sampler.seed = choice_seed(r.job.sampler.seed, i);
    auto state = std::make_shared<StreamState>();
    state->requests = engine->submit_group(std::move(jobs));
    if (state->requests.empty()) {
      res.set_header("Retry-After", "1");
      throw ApiError(429, "rate_limit_error",
                     r.n > 1 ? "the server is busy: fewer slots and queue places are free than the " + std::to_string(r.n) +
                                   " choices asked for"
                             : "the server is busy: every slot and queue place is taken",
                     "", "rate_limit_exceeded");
    }
    const ResponseMeta meta{random_id(chat ? "chatcmpl-" : "cmpl-"), static_cast<int64_t>(std::time(nullptr)),
                            model_name};
    const model::Tokenizer& tok = session->tokenizer();
    if (!r.stream) {
      send_json(res, 200, full_response(r, meta, collect_replies(state->requests, peer), tok));
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    // The chunk builders point at the request: both live in the provider.
    auto request = std::make_shared<const CompletionRequest>(std::move(r));
    for (int i = 0; i < request->n; ++i) state->choices.emplace_back(*request, i);
    state->finished.resize(static_cast<size_t>(request->n));
    res.set_chunked_content_provider(
        "text/event-stream",
        [state, request, meta, &tok, peer](size_t, httplib::DataSink& sink) {
          // Runs on cpp-httplib's thread outside any handler: nothing may
          // escape (std::terminate); a failure ends this stream alone.
          try {
            return stream_step(*state, *request, meta, tok, peer, sink);
          } catch (...) {
            state->cancel();
            return false;
          }
        },
        [state](bool success) {
          if (!success) state->cancel();
        });
  });
}

}  // namespace weft::serve
