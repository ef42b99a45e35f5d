// One streamed choice's chunks (choice_stream.h).
#include "serve/choice_stream.h"

namespace weft::serve {

Json ChoiceStream::chunk(std::string text, const ResponseMeta& meta, const model::Tokenizer& tok,
                         const Json& tool_calls) {
  Event e = std::move(pending_);
  pending_ = Event{};
  e.text = std::move(text);
  e.finished = false;
  Json out = stream_chunk(*r_, meta, e, first_, tok, index_, tool_calls);
  first_ = false;
  return out;
}

std::vector<Json> ChoiceStream::chunks(const Event& e, const ResponseMeta& meta, const model::Tokenizer& tok) {
  std::vector<Json> out;
  if (!parses()) {
    out.push_back(stream_chunk(*r_, meta, e, first_, tok, index_));
    first_ = false;
    return out;
  }
  pending_.chosen.insert(pending_.chosen.end(), e.chosen.begin(), e.chosen.end());
  pending_.top.insert(pending_.top.end(), e.top.begin(), e.top.end());
  text_ += e.text;
  if (!e.finished) {
    const size_t hold = tool_call_hold_from(r_->tool_family, text_);
    if (hold > sent_) {
      out.push_back(chunk(text_.substr(sent_, hold - sent_), meta, tok));
      sent_ = hold;
    } else if (!pending_.chosen.empty() && first_) {
      out.push_back(chunk("", meta, tok));  // the role (and logprobs) at once
    }
    return out;
  }
  Event last = e;
  last.text.clear();
  last.chosen.clear();
  last.top.clear();
  // As a whole reply: only one the model ended itself is parsed.
  ParsedReply p;
  if (e.finish_reason == "stop")
    p = parse_tool_calls(r_->tool_family, text_, r_->tools.names, r_->tools.parallel);
  if (p.calls.empty()) {
    last.text = text_.substr(sent_);
    last.chosen = std::move(pending_.chosen);
    last.top = std::move(pending_.top);
    out.push_back(stream_chunk(*r_, meta, last, first_, tok, index_));
    first_ = false;
    return out;
  }
  // What of the content was not sent yet (the content starts with the text
  // before the first call, which is all that was sent).
  if (p.content.size() > sent_ && p.content.compare(0, sent_, text_, 0, sent_) == 0)
    out.push_back(chunk(p.content.substr(sent_), meta, tok));
  const Json calls = tool_calls_json(p.calls, true);
  for (const Json& call : calls) {
    Json head = call;
    head["function"]["arguments"] = "";
    out.push_back(chunk("", meta, tok, Json::array({head})));
    out.push_back(chunk("", meta, tok,
                        Json::array({{{"index", call["index"]}, {"function", {{"arguments", call["function"]["arguments"]}}}}})));
  }
  last.finish_reason = "tool_calls";
  out.push_back(stream_chunk(*r_, meta, last, first_, tok, index_));
  return out;
}

}  // namespace weft::serve
