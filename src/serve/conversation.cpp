// A chat held in the KV cache between turns (include/weft/serve/conversation.h).
#include "weft/serve/conversation.h"

#include <algorithm>

#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft::serve {
namespace {

constexpr const char* kConversationWhere = "chat";

nlohmann::ordered_json message(const char* role, std::string_view content) {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  m["role"] = role;
  m["content"] = std::string(content);
  return m;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.substr(0, prefix.size()) == prefix;
}

}  // namespace

Conversation::Conversation(Session& session, const ChatTemplate& tpl, ConversationOptions options)
    : session_(session), template_(tpl), options_(std::move(options)) {
  if (!session_.loaded()) fail(ErrorKind::invalid_input, kConversationWhere, "the session's model is not loaded");
  if (!options_.system.empty()) messages_.push_back(message("system", options_.system));
}

int64_t Conversation::capacity() const { return session_.n_ctx(); }

std::vector<int32_t> Conversation::tokens() const {
  std::vector<int32_t> all = cached_;
  all.insert(all.end(), pending_.begin(), pending_.end());
  return all;
}

std::string Conversation::render(const nlohmann::ordered_json& messages) const {
  const model::Tokenizer& tok = session_.tokenizer();
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  vars["messages"] = messages;
  vars["add_generation_prompt"] = true;
  vars["bos_token"] = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  vars["eos_token"] = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  try {
    return template_.render(vars);
  } catch (const Error& e) {
    fail(e.kind(), kConversationWhere, std::string("the chat template: ") + e.what());
  }
}

std::vector<int32_t> Conversation::encode_turn(std::string_view text, std::string_view content, bool first) const {
  const model::Tokenizer& tok = session_.tokenizer();
  std::vector<int32_t> ids;
  if (first && tok.add_bos() && tok.bos() >= 0 && !starts_with(text, tok.token_text(tok.bos())))
    ids.push_back(tok.bos());
  auto append = [&](std::string_view part, bool special) {
    if (part.empty()) return;
    const std::vector<int32_t> p = tok.encode(part, false, special);
    ids.insert(ids.end(), p.begin(), p.end());
  };
  // Only the template's markup may become control tokens. Most messages
  // spell none: the text encodes in one piece (as the server encodes a
  // chat). One that does is encoded as plain text where the template put
  // it verbatim (its last occurrence), the markup around it apart.
  const bool spells_special = !content.empty() && tok.encode(content, false, true) != tok.encode(content, false, false);
  const size_t at = spells_special ? text.rfind(content) : std::string_view::npos;
  if (spells_special && at == std::string_view::npos)
    fail(ErrorKind::invalid_input, kConversationWhere,
         "the message spells a special token in text the chat template rewrites");
  if (at == std::string_view::npos) {
    append(text, true);
  } else {
    append(text.substr(0, at), true);
    append(content, false);
    append(text.substr(at + content.size()), true);
  }
  return ids;
}

Reply Conversation::say(std::string_view user, const TokenCallback& on_token) {
  Reply reply;
  nlohmann::ordered_json next = messages_;
  next.push_back(message("user", user));
  const std::string prompt = render(next);

  // What is new: the rendering past the text the cache (and pending_) spell;
  // else everything again from position 0.
  std::vector<int32_t> fresh;
  const bool restart = covered_.empty() || !starts_with(prompt, covered_);
  if (restart) {
    fresh = encode_turn(prompt, user, true);
  } else {
    fresh = pending_;
    const std::vector<int32_t> more = encode_turn(std::string_view(prompt).substr(covered_.size()), user, false);
    fresh.insert(fresh.end(), more.begin(), more.end());
  }
  if (fresh.empty())
    fail(ErrorKind::invalid_input, kConversationWhere, "the chat template rendered nothing new for this turn");
  const int64_t start = restart ? 0 : static_cast<int64_t>(cached_.size());
  // The new tokens and at least one of the reply must fit.
  if (start + static_cast<int64_t>(fresh.size()) >= capacity()) {
    reply.context_full = true;
    reply.reused = start;
    return reply;
  }
  if (restart) cached_.clear();

  GenerateOptions g = options_.generate;
  g.start = start;
  g.sampler.seed += turn_++;
  try {
    reply.generation = session_.generate(fresh, g, on_token);
  } catch (...) {
    cached_.clear();  // what the cache holds past start is unknown now
    pending_.clear();
    covered_.clear();
    throw;
  }
  const GenerateResult& r = reply.generation;
  const model::Tokenizer& tok = session_.tokenizer();
  for (int32_t t : r.tokens) reply.text += tok.decode_token(t);
  reply.evaluated = static_cast<int64_t>(fresh.size());
  reply.reused = start;
  reply.context_full = r.stop == StopReason::context_full;

  // The cache now holds the new tokens and every reply token but one that
  // ended the reply without being evaluated (a stop by count, by the
  // callback, or by the context's end; an end-of-generation token is never
  // emitted, and the template's markup after the reply stands for it).
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  pending_.clear();
  const bool last_evaluated = r.stop == StopReason::end_of_generation || r.stop == StopReason::stop_token;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    if (i + 1 == r.tokens.size() && !last_evaluated) pending_.push_back(r.tokens[i]);
    else cached_.push_back(r.tokens[i]);
  }
  covered_ = prompt + reply.text;
  messages_ = std::move(next);
  messages_.push_back(message("assistant", reply.text));
  return reply;
}

ChatTemplate load_chat_template(const std::string& source, const std::string& model_path, std::string* warning) {
  if (!source.empty()) return ChatTemplate::parse(source);
  auto file = GgufFile::open(model_path);
  if (auto t = file->get_string("tokenizer.chat_template")) {
    try {
      return ChatTemplate::parse(*t);
    } catch (const Error& e) {
      if (warning)
        *warning = std::string("the file's chat template cannot be used (") + e.what() +
                   "): using chatml; --chat-template NAME|FILE chooses another";
    }
  }
  return ChatTemplate::parse(*builtin_chat_template("chatml"));
}

}  // namespace weft::serve
