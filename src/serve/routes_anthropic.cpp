// Anthropic's Messages route (docs/serve.md): POST /v1/messages answered
// whole or streamed as Anthropic's server-sent events.
#include <chrono>

#include "serve/anthropic_api.h"
#include "serve/route_helpers.h"

namespace weft::serve {

namespace {

void post_messages(Server::Impl& s, const httplib::Request& req, httplib::Response& res) {
  guarded(
      res,
      [&] {
        Engine& engine = loaded_engine(s);
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(static_cast<int64_t>(s.options.request_timeout_seconds * 1e3));
        const PeerAddress peer{req.remote_addr, req.remote_port, s.port};
        const MessagesRequest r = parse_messages(parse_body(req), s.api, RenderControl{deadline, client_gone(peer)});
        std::shared_ptr<Request> request = submit_or_busy(engine, r.job, deadline, res);
        const MessagesMeta meta{random_id("msg_"), r.model.empty() ? s.model_name : r.model};
        const model::Tokenizer& tok = s.session->tokenizer();
        if (!r.stream) {
          send_json(res, 200, message_response(r, meta, collect_reply(*request, peer), tok));
          return;
        }
        auto stream = std::make_shared<MessagesStream>(r, meta, tok);
        relay_stream(res, request, peer, "text/event-stream", [stream](const Event& e) { return stream->events(e); });
      },
      anthropic_error);
}

}  // namespace

void add_anthropic_routes(Server::Impl& s) {
  s.http.Post("/v1/messages", [&s](const httplib::Request& req, httplib::Response& res) {
    s.begin(req);
    post_messages(s, req, res);
  });
}

}  // namespace weft::serve
