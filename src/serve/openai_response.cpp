// Engine events into OpenAI's response bodies and stream chunks
// (openai_api.h).
#include "serve/openai_api.h"

namespace weft::serve {

namespace {

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs}]}.
Json chat_logprobs(const std::vector<TokenLogprob>& chosen, const std::vector<std::vector<TokenLogprob>>& top,
                   const model::Tokenizer& tok) {
  Json content = Json::array();
  for (size_t i = 0; i < chosen.size(); ++i) {
    const std::string piece = tok.decode_token(chosen[i].token);
    Json alternatives = Json::array();
    for (const TokenLogprob& t : top[i]) {
      const std::string p = tok.decode_token(t.token);
      alternatives.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
    }
    content.push_back(
        {{"token", piece}, {"logprob", chosen[i].logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", alternatives}});
  }
  return Json{{"content", content}};
}

// Legacy completion logprobs: parallel arrays, top_logprobs as maps.
Json completion_logprobs(const std::vector<TokenLogprob>& chosen, const std::vector<std::vector<TokenLogprob>>& top,
                         const model::Tokenizer& tok, size_t text_offset) {
  Json tokens = Json::array(), logprobs = Json::array(), tops = Json::array(), offsets = Json::array();
  for (size_t i = 0; i < chosen.size(); ++i) {
    const std::string piece = tok.decode_token(chosen[i].token);
    tokens.push_back(piece);
    logprobs.push_back(chosen[i].logprob);
    Json m = Json::object();
    for (const TokenLogprob& t : top[i]) m[tok.decode_token(t.token)] = t.logprob;
    tops.push_back(m);
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return Json{{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Json usage_of(const Event& f) {
  return Json{{"prompt_tokens", f.prompt_tokens},
              {"completion_tokens", f.completion_tokens},
              {"total_tokens", f.prompt_tokens + f.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", f.cached_tokens}}}};
}

// weft's timings (as llama-server reports them): prompt and decode speed.
Json timings_of(const Event& f) {
  const int evaluated = f.prompt_tokens - f.cached_tokens;
  return Json{{"prompt_n", evaluated},
              {"prompt_ms", f.prompt_seconds * 1e3},
              {"predicted_n", f.completion_tokens},
              {"predicted_ms", f.decode_seconds * 1e3},
              {"predicted_per_second", f.decode_seconds > 0 && f.completion_tokens > 1
                                           ? (f.completion_tokens - 1) / f.decode_seconds
                                           : 0.0}};
}

Json envelope(const CompletionRequest& r, const ResponseMeta& meta, bool chunk) {
  return Json{{"id", meta.id},
              {"object", r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", "weft"}};
}

}  // namespace

void Collected::add(const Event& e) {
  text += e.text;
  tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
  chosen.insert(chosen.end(), e.chosen.begin(), e.chosen.end());
  top.insert(top.end(), e.top.begin(), e.top.end());
  if (e.finished) finish = e;
}

std::string openai_finish_reason(const std::string& engine_reason) {
  return engine_reason == "stop" ? "stop" : "length";
}

Json full_response(const CompletionRequest& r, const ResponseMeta& meta, const Collected& c,
                   const model::Tokenizer& tok) {
  Json out = envelope(r, meta, false);
  Json choice = Json::object();
  choice["index"] = 0;
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  else
    choice["text"] = c.text;
  choice["logprobs"] = !r.logprobs ? Json(nullptr)
                       : r.chat    ? chat_logprobs(c.chosen, c.top, tok)
                                   : completion_logprobs(c.chosen, c.top, tok, 0);
  choice["finish_reason"] = openai_finish_reason(c.finish.finish_reason);
  out["choices"] = Json::array({choice});
  out["usage"] = usage_of(c.finish);
  out["timings"] = timings_of(c.finish);
  return out;
}

Json stream_chunk(const CompletionRequest& r, const ResponseMeta& meta, const Event& e, bool first,
                  const model::Tokenizer& tok) {
  Json out = envelope(r, meta, true);
  Json choice = Json::object();
  choice["index"] = 0;
  if (r.chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!e.text.empty() || (first && !e.finished)) delta["content"] = e.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = e.text;
  }
  choice["logprobs"] = !r.logprobs || e.chosen.empty() ? Json(nullptr)
                       : r.chat                         ? chat_logprobs(e.chosen, e.top, tok)
                                                        : completion_logprobs(e.chosen, e.top, tok, 0);
  choice["finish_reason"] = e.finished ? Json(openai_finish_reason(e.finish_reason)) : Json(nullptr);
  out["choices"] = Json::array({choice});
  if (e.finished) out["timings"] = timings_of(e);
  return out;
}

Json usage_chunk(const CompletionRequest& r, const ResponseMeta& meta, const Event& finished) {
  Json out = envelope(r, meta, true);
  out["choices"] = Json::array();
  out["usage"] = usage_of(finished);
  return out;
}

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace weft::serve
