// One choice of a streamed completion: its sequence's engine events into
// OpenAI's stream chunks. Text goes out as it becomes final; for a chat
// whose replies are parsed for tool calls, the text from where a call may
// begin (tool_call_hold_from) is held until the reply ends and then goes
// out as tool_calls deltas -- per call its index, id, type and name with
// empty arguments, then the arguments -- with finish_reason "tool_calls",
// or, when it does not parse, as content: never dropped.
//
//   ChoiceStream c(request, /*index=*/i);
//   for (const Json& chunk : c.chunks(event, meta, tok)) send(chunk);  // per event of choice i
//
// Pure (no sockets); not thread-safe; r must outlive it.
#pragma once

#include <string>
#include <vector>

#include "serve/openai_api.h"

namespace weft::serve {

class ChoiceStream {
 public:
  ChoiceStream(const CompletionRequest& r, int index) : r_(&r), index_(index) {}

  // The chunks for e, in order (none while all its text is held back: its
  // tokens' logprobs then go with the next chunk). e.finished gives the
  // last ones, the finish_reason on the very last.
  std::vector<Json> chunks(const Event& e, const ResponseMeta& meta, const model::Tokenizer& tok);

 private:
  bool parses() const { return r_->chat && r_->tools.parse; }
  // A chunk of pending_'s logprobs with text (and tool_calls deltas).
  Json chunk(std::string text, const ResponseMeta& meta, const model::Tokenizer& tok, const Json& tool_calls = Json());

  const CompletionRequest* r_;
  int index_;
  bool first_ = true;
  std::string text_;   // the reply so far (when parsing)
  size_t sent_ = 0;    // bytes of text_ sent as content
  Event pending_;      // logprobs not sent yet
};

}  // namespace weft::serve
