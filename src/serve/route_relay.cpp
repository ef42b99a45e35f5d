// A submitted request's reply, whole or streamed, for every API's routes
// (route_helpers.h); errors in the shape of the API a path belongs to.
#include <chrono>
#include <optional>

#include "serve/anthropic_api.h"
#include "serve/ollama_api.h"
#include "serve/route_helpers.h"

namespace weft::serve {

// Rendering looks every few thousand steps; the socket is probed at most
// every 200 ms (a probe reads /proc), and not in a render's first 200 ms,
// which is all that nearly every render takes.
std::function<bool()> client_gone(const PeerAddress& peer) {
  return
      [peer, next_probe = std::chrono::steady_clock::now() + std::chrono::milliseconds(200), gone = false]() mutable {
        const auto now = std::chrono::steady_clock::now();
        if (!gone && now >= next_probe) {
          gone = !peer_connected(peer);
          next_probe = now + std::chrono::milliseconds(200);
        }
        return gone;
      };
}

Collected collect_reply(Request& request, const PeerAddress& peer) {
  Collected c;
  auto next_probe = std::chrono::steady_clock::now();
  for (;;) {
    if (std::chrono::steady_clock::now() >= next_probe && !request.cancelled()) {
      if (!peer_connected(peer)) request.cancel();
      next_probe += std::chrono::milliseconds(200);
    }
    std::optional<Event> e = request.next(std::chrono::milliseconds(100));
    if (!e) continue;
    c.add(*e);
    if (e->finished) break;
  }
  if (c.finish.finish_reason == "error") throw ApiError(500, "server_error", "generation failed: " + c.finish.error);
  if (c.finish.finish_reason == "cancelled")
    throw ApiError(503, "unavailable_error", "the request was cancelled: its client left or the server is stopping");
  return c;
}

void relay_stream(httplib::Response& res, std::shared_ptr<Request> request, const PeerAddress& peer,
                  const char* content_type, std::function<std::string(const Event&)> format) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      content_type,
      [request, peer, format = std::move(format)](size_t, httplib::DataSink& sink) {
        // Runs on cpp-httplib's thread outside any handler: nothing may
        // escape (std::terminate); a failure ends this stream alone.
        try {
          std::optional<Event> e = request->next(std::chrono::milliseconds(100));
          if (!e) {  // nothing to write (queued, or a long prompt): is anyone there?
            if ((sink.is_writable && !sink.is_writable()) || !peer_connected(peer)) {
              request->cancel();
              return false;
            }
            return true;
          }
          const std::string bytes = format(*e);
          if (!bytes.empty() && !sink.write(bytes.data(), bytes.size())) {
            request->cancel();
            return false;
          }
          if (e->finished) sink.done();
          return true;
        } catch (...) {
          request->cancel();
          return false;
        }
      },
      [request](bool success) {
        if (!success) request->cancel();
      });
}

std::shared_ptr<Request> submit_or_busy(Engine& engine, Job job, std::chrono::steady_clock::time_point deadline,
                                        httplib::Response& res) {
  job.deadline = deadline;
  std::shared_ptr<Request> request = engine.submit(std::move(job));
  if (!request) {
    res.set_header("Retry-After", "1");
    throw ApiError(429, "rate_limit_error", "the server is busy: every slot and queue place is taken", "",
                   "rate_limit_exceeded");
  }
  return request;
}

Engine& loaded_engine(Server::Impl& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.state == ServerState::ready) return *s.engine;
  if (s.state == ServerState::loading)
    throw ApiError(503, "unavailable_error", "the model is loading", "", "model_loading");
  throw ApiError(500, "server_error", "the model failed to load: " + s.load_error);
}

void send_error_for(const std::string& path, httplib::Response& res, const ApiError& e) {
  if (path.rfind("/api/", 0) == 0)
    send_json(res, e.status(), ollama_error(e));
  else if (path == "/v1/messages")
    send_json(res, e.status(), anthropic_error(e));
  else
    send_error(res, e);
}

}  // namespace weft::serve
