// What the HTTP handlers share (routes.cpp, routes_completion.cpp): JSON
// replies and bodies, ids, and the guard that turns errors into OpenAI
// error replies.
#pragma once

#include <httplib.h>

#include <string>

#include "serve/openai_api.h"
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

// Runs a handler body, turning ApiError and weft::Error into OpenAI errors.
template <class F>
void guarded(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const Error& e) {
    const int status = e.kind() == ErrorKind::invalid_input   ? 400
                       : e.kind() == ErrorKind::disconnected  ? 503
                       : e.kind() == ErrorKind::out_of_memory ? 413
                                                              : 500;
    send_error(res, ApiError(status, status == 400 ? "invalid_request_error" : "server_error", e.what()));
  }
}

}  // namespace weft::serve
