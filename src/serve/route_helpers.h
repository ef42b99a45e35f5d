// What the HTTP handlers share (routes*.cpp, route_relay.cpp): JSON
// replies and bodies, ids, the guard that turns errors into error replies,
// and a request's reply collected or relayed as a stream.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "serve/openai_api.h"
#include "serve/peer_probe.h"
#include "serve/server_impl.h"
#include "weft/core/error.h"

namespace weft::serve {

// res gets status and body as application/json.
void send_json(httplib::Response& res, int status, const Json& body);
// The request's body as JSON; ApiError(400) when it is not JSON or is nested
// deeper than 64 levels (checked before the parser sees it).
Json parse_body(const httplib::Request& req);
// prefix and 24 random hex digits: "chatcmpl-…".
std::string random_id(const char* prefix);

// Runs a handler body, turning ApiError and weft::Error into error replies:
// OpenAI's shape, or shape's (Ollama's, Anthropic's) when given.
template <class F>
void guarded(httplib::Response& res, F&& f, Json (*shape)(const ApiError&) = nullptr) {
  auto send = [&](const ApiError& e) { shape ? send_json(res, e.status(), shape(e)) : send_error(res, e); };
  try {
    f();
  } catch (const ApiError& e) {
    send(e);
  } catch (const Error& e) {
    const int status = e.kind() == ErrorKind::invalid_input   ? 400
                       : e.kind() == ErrorKind::disconnected  ? 503
                       : e.kind() == ErrorKind::out_of_memory ? 413
                                                              : 500;
    send(ApiError(status, status == 400 ? "invalid_request_error" : "server_error", e.what()));
  }
}

// An error in the shape the API at path speaks: Ollama's under /api/,
// Anthropic's at /v1/messages, else OpenAI's (route_relay.cpp).
void send_error_for(const std::string& path, httplib::Response& res, const ApiError& e);

// A cancel check for rendering a request's chat template (RenderControl):
// whether its client has left.
std::function<bool()> client_gone(const PeerAddress& peer);

// The whole reply of a request that is not streamed. The engine ends every
// request (finish, deadline, shutdown, or the cancel when the client has
// gone). Throws ApiError 500 when generation failed, 503 when cancelled.
Collected collect_reply(Request& request, const PeerAddress& peer);

// Streams a submitted request as res's chunked body of content_type:
// format turns each event, in order, into the bytes to write (it sees the
// finished event last, failures included). Ends when the finished event
// is written; cancels the request when the client leaves.
void relay_stream(httplib::Response& res, std::shared_ptr<Request> request, const PeerAddress& peer,
                  const char* content_type, std::function<std::string(const Event&)> format);

// Submits job with its deadline; throws ApiError 429 (with Retry-After in
// res) when every slot and queue place is taken.
std::shared_ptr<Request> submit_or_busy(Engine& engine, Job job, std::chrono::steady_clock::time_point deadline,
                                        httplib::Response& res);

// The engine once the model is loaded; else throws ApiError 503 (loading)
// or 500 (failed).
Engine& loaded_engine(Server::Impl& s);

// The routes of the other APIs (routes_ollama.cpp, routes_anthropic.cpp,
// and the embeddings of both OpenAI's and Ollama's).
void add_ollama_routes(Server::Impl& s);
void add_anthropic_routes(Server::Impl& s);
void add_embedding_routes(Server::Impl& s);  // routes_embeddings.cpp

}  // namespace weft::serve
