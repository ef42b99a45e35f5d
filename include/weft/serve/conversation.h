// A chat held in one Session's KV cache (`weft chat`, `weft run -cnv`): each
// turn renders the whole conversation with the model's chat template (the
// renderer `weft serve` uses), but evaluates only what the cache does not
// hold yet -- the end of the previous reply and the new user message -- and
// then generates the reply after it (GenerateOptions::start).
//
//   weft::serve::ChatTemplate tpl = weft::serve::load_chat_template("", "m.gguf", &warning);
//   weft::serve::Conversation chat(session, tpl, {.system = "Be brief."});
//   weft::serve::Reply r = chat.say("Hello!", [](int32_t t) { ...; return true; });  // false: stop the reply
//   if (r.context_full) ...;                       // the conversation cannot go on
//
// How a turn finds what is new: the text the cache holds (the last rendered
// prompt followed by the reply's decoded text) must be a prefix of the new
// rendering; the rest is encoded with the template's markup as special
// tokens (a user's text that spells one stays plain text, as in the
// server's chat_prompt). A template that renders earlier
// turns differently once a reply is added (one that trims or drops the
// assistant's text) breaks that; then the whole conversation is evaluated
// again from position 0 (Reply::reused is 0), which is correct, only slower.
//
// Context full: a turn that does not fit the rest of the context is not
// evaluated and comes back with context_full set; a reply that fills the
// context stops there (StopReason::context_full) with context_full set.
// Either way the conversation is over (no shifting of old turns out).
//
// Not thread-safe; the Session must be loaded and stay alive, and nothing
// else may use its KV cache while the Conversation does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/runtime/generate.h"
#include "weft/runtime/session.h"
#include "weft/serve/chat_template.h"

namespace weft::serve {

struct ConversationOptions {
  std::string system;         // the system message; empty: none
  // Per reply: max_tokens (the reply also stops where the context ends) and
  // the sampler. Turn i samples with sampler.seed + i. start is ignored.
  GenerateOptions generate = [] {
    GenerateOptions g;
    g.max_tokens = 1 << 30;  // until the end of generation or of the context
    return g;
  }();
};

struct Reply {
  std::string text;            // the reply's text (decoded tokens)
  GenerateResult generation;   // its tokens, why it stopped, its timings
  int64_t evaluated = 0;       // prompt tokens this turn evaluated (what the cache lacked)
  int64_t reused = 0;          // positions of earlier turns kept in the cache
  bool context_full = false;   // the context holds no further turn: the conversation is over
};

class Conversation {
 public:
  // Throws Error(invalid_input) when the session is not loaded.
  Conversation(Session& session, const ChatTemplate& tpl, ConversationOptions options);

  // Adds the user's message, evaluates what the cache lacks and generates
  // the reply, calling on_token with each token (false stops the reply
  // there: the reply so far stays in the conversation). A turn that does not
  // fit evaluates nothing and returns context_full (the message is not
  // added). Throws what the template (Error(invalid_input), naming it) or
  // the session throws; after a throw the conversation starts over from
  // position 0 at the next turn.
  Reply say(std::string_view user, const TokenCallback& on_token = {});

  // KV positions holding the conversation, and all there are.
  int64_t positions() const { return static_cast<int64_t>(cached_.size()); }
  int64_t capacity() const;
  // The messages so far (role, content), the system message first.
  const nlohmann::ordered_json& messages() const { return messages_; }
  // The conversation's tokens: those in the cache, then any not evaluated
  // yet (the last reply's last token). A fresh session that evaluates them
  // from position 0 holds what this cache holds.
  std::vector<int32_t> tokens() const;

 private:
  // The tokens of text, its markup as special tokens; a user content that
  // spells a special token as plain text (where the template put it);
  // bos first when first and the model adds one (and the text lacks it).
  std::vector<int32_t> encode_turn(std::string_view text, std::string_view content, bool first) const;
  std::string render(const nlohmann::ordered_json& messages) const;

  Session& session_;
  const ChatTemplate& template_;
  ConversationOptions options_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::vector<int32_t> cached_;   // the tokens in the KV cache, positions 0..
  std::vector<int32_t> pending_;  // the conversation's tokens not evaluated yet
  std::string covered_;           // the text cached_ + pending_ spell
  uint64_t turn_ = 0;
};

// The chat template for a model: source (a template's text) when not
// empty; else the file's tokenizer.chat_template; else, or when the file's
// cannot be parsed (with *warning saying so), the built-in ChatML. What
// `weft serve` and `weft chat` both use. Throws Error(invalid_input) when a
// given source does not parse.
ChatTemplate load_chat_template(const std::string& source, const std::string& model_path, std::string* warning);

}  // namespace weft::serve
