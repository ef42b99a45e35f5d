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

// weft's timings (as llama-server reports them): prompt and decode speed,
// and with speculative rounds the draft tokens judged and kept.
Json timings_of(const Event& f) {
  const int evaluated = f.prompt_tokens - f.cached_tokens;
  Json t{{"prompt_n", evaluated},
         {"prompt_ms", f.prompt_seconds * 1e3},
         {"predicted_n", f.completion_tokens},
         {"predicted_ms", f.decode_seconds * 1e3},
         {"predicted_per_second",
          f.decode_seconds > 0 && f.completion_tokens > 1 ? (f.completion_tokens - 1) / f.decode_seconds : 0.0}};
  if (f.drafted > 0) {
    t["draft_n"] = f.drafted;
    t["draft_n_accepted"] = f.accepted;
  }
  return t;
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
  return engine_reason == "stop" || engine_reason == "tool_calls" ? engine_reason : "length";
}

uint64_t choice_seed(uint64_t seed, int i) {
  if (i == 0) return seed;
  uint64_t z = seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;  // SplitMix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json call = Json::object();
    if (indexed) call["index"] = i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

Json full_response(const CompletionRequest& r, const ResponseMeta& meta, const std::vector<Collected>& choices,
                   const model::Tokenizer& tok) {
  Json out = envelope(r, meta, false);
  out["choices"] = Json::array();
  Event total = choices.at(0).finish;
  for (size_t i = 0; i < choices.size(); ++i) {
    const Collected& c = choices[i];
    if (i > 0) total.completion_tokens += c.finish.completion_tokens;
    Json choice = Json::object();
    choice["index"] = i;
    std::string finish = openai_finish_reason(c.finish.finish_reason);
    if (r.chat) {
      Json message = {{"role", "assistant"}, {"content", c.text}};
      // Only a reply the model ended itself: one cut by max_tokens stays text.
      if (r.tools.parse && finish == "stop") {
        ParsedReply p = parse_tool_calls(r.tool_family, c.text, r.tools.names, r.tools.parallel);
        if (!p.calls.empty()) {
          message["content"] = p.content.find_first_not_of(" \t\r\n") == std::string::npos ? Json(nullptr)
                                                                                           : Json(p.content);
          if (!p.reasoning.empty()) message["reasoning_content"] = p.reasoning;
          message["tool_calls"] = tool_calls_json(p.calls, false);
          finish = "tool_calls";
        }
      }
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = !r.logprobs ? Json(nullptr)
                         : r.chat    ? chat_logprobs(c.chosen, c.top, tok)
                                     : completion_logprobs(c.chosen, c.top, tok, 0);
    choice["finish_reason"] = finish;
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = usage_of(total);
  out["timings"] = timings_of(choices[0].finish);
  return out;
}

Json stream_chunk(const CompletionRequest& r, const ResponseMeta& meta, const Event& e, bool first,
                  const model::Tokenizer& tok, int index, const Json& tool_calls) {
  Json out = envelope(r, meta, true);
  Json choice = Json::object();
  choice["index"] = index;
  if (r.chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!e.text.empty() || (first && !e.finished && tool_calls.is_null())) delta["content"] = e.text;
    if (!tool_calls.is_null()) delta["tool_calls"] = tool_calls;
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

Json usage_chunk(const CompletionRequest& r, const ResponseMeta& meta, const std::vector<Event>& finished) {
  Json out = envelope(r, meta, true);
  out["choices"] = Json::array();
  Event total = finished.at(0);
  for (size_t i = 1; i < finished.size(); ++i) total.completion_tokens += finished[i].completion_tokens;
  out["usage"] = usage_of(total);
  return out;
}

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace weft::serve
