// The completion routes (/v1/completions, /v1/chat/completions and their
// short spellings): a request parsed, submitted to the engine, and answered
// whole or streamed as server-sent events.
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>

#include "serve/peer_probe.h"
#include "serve/route_helpers.h"
#include "serve/server_impl.h"

namespace weft::serve {
namespace {

// One call of a stream's content provider: the next event as SSE lines, or
// a check that the client is still there when none came. False ends the
// stream (the client left, or it is complete).
bool stream_step(Request& request, const CompletionRequest& r, const ResponseMeta& meta, bool& first,
                 const model::Tokenizer& tok, const PeerAddress& peer, httplib::DataSink& sink) {
  std::optional<Event> e = request.next(std::chrono::milliseconds(100));
  if (!e) {  // nothing to write (queued, or a long prompt): is anyone there?
    if ((sink.is_writable && !sink.is_writable()) || !peer_connected(peer)) {
      request.cancel();
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
  // a complete reply.
  const bool failed = e->finished && (e->finish_reason == "error" || e->finish_reason == "cancelled");
  if (failed) {
    if (!e->text.empty()) {
      Event piece = *e;
      piece.finished = false;
      ok = send(stream_chunk(r, meta, piece, first, tok));
    }
    const ApiError err = e->finish_reason == "error"
                             ? ApiError(500, "server_error", "generation failed: " + e->error)
                             : ApiError(503, "unavailable_error", "the request was cancelled: the server is stopping");
    ok = ok && send(err.body());
  } else {
    ok = send(stream_chunk(r, meta, *e, first, tok));
    if (ok && e->finished && r.include_usage) ok = send(usage_chunk(r, meta, *e));
  }
  first = false;
  if (ok && e->finished) {
    static const std::string done = "data: [DONE]\n\n";
    ok = sink.write(done.data(), done.size());
    sink.done();
  }
  if (!ok) request.cancel();
  return ok;
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
    std::shared_ptr<Request> request = engine->submit(r.job);
    if (!request) {
      res.set_header("Retry-After", "1");
      throw ApiError(429, "rate_limit_error", "the server is busy: every slot and queue place is taken", "",
                     "rate_limit_exceeded");
    }
    const ResponseMeta meta{random_id(chat ? "chatcmpl-" : "cmpl-"), static_cast<int64_t>(std::time(nullptr)),
                            model_name};
    const model::Tokenizer& tok = session->tokenizer();
    if (!r.stream) {
      send_json(res, 200, full_response(r, meta, collect_reply(*request, peer), tok));
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream",
        [request, r, meta, first, &tok, peer](size_t, httplib::DataSink& sink) {
          // Runs on cpp-httplib's thread outside any handler: nothing may
          // escape (std::terminate); a failure ends this stream alone.
          try {
            return stream_step(*request, r, meta, *first, tok, peer, sink);
          } catch (...) {
            request->cancel();
            return false;
          }
        },
        [request](bool success) {
          if (!success) request->cancel();
        });
  });
}

}  // namespace weft::serve
