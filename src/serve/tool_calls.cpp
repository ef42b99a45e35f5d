// Tool calls parsed out of generated text, per template family
// (tool_calls.h). Each family's parser walks its markers from the first
// call on and gives up -- the reply stays text -- at the first thing that is
// not the family's format.
#include "serve/tool_calls.h"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "serve/json_brackets.h"

namespace weft::serve {

namespace {

using Json = nlohmann::ordered_json;

// A reply's JSON is the model's: nesting is capped as request bodies are.
constexpr int kMaxDepth = 64;

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]";
constexpr std::string_view kHarmonyStart = "<|start|>", kHarmonyChannel = "<|channel|>",
                           kHarmonyMessage = "<|message|>", kHarmonyConstrain = "<|constrain|>";
constexpr std::string_view kHarmonyEnds[] = {"<|end|>", "<|call|>", "<|return|>"};
constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallsEnd = "<｜tool▁calls▁end｜>",
                           kDsCallBegin = "<｜tool▁call▁begin｜>", kDsCallEnd = "<｜tool▁call▁end｜>",
                           kDsSep = "<｜tool▁sep｜>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

bool blank(std::string_view s) { return skip_space(s, 0) == s.size(); }

std::string_view trim(std::string_view s) {
  const size_t b = skip_space(s, 0);
  size_t e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_at(std::string_view s, size_t pos, std::string_view m) {
  return pos <= s.size() && s.substr(pos, m.size()) == m;
}

// The JSON value s holds exactly (surrounding whitespace allowed), or a
// discarded value when it holds anything else.
Json parse_exact(std::string_view s) {
  const std::string_view t = trim(s);
  if (json_value_end(t) != t.size()) return Json::value_t::discarded;
  return Json::parse(t, nullptr, /*allow_exceptions=*/false);
}

// The reply's calls as they are gathered: false from add() ends the parse.
class Calls {
 public:
  Calls(ToolFamily family, const std::vector<std::string>& allowed) : family_(family), allowed_(allowed) {}

  // name and arguments (an object, or a string holding one's JSON).
  bool add(const Json& name, const Json& arguments) {
    if (!name.is_string() || name.get_ref<const std::string&>().empty()) return false;
    const std::string& n = name.get_ref<const std::string&>();
    if (std::find(allowed_.begin(), allowed_.end(), n) == allowed_.end()) return false;
    Json args = arguments;
    if (args.is_string()) args = parse_exact(args.get_ref<const std::string&>());
    if (!args.is_object()) return false;
    calls_.push_back({new_tool_call_id(family_), n, args.dump()});
    return true;
  }
  // A call object: {"name", "arguments"} (llama3 also says "parameters").
  bool add_object(const Json& call) {
    if (!call.is_object() || !call.contains("name")) return false;
    if (call.contains("arguments")) return add(call["name"], call["arguments"]);
    if (family_ == ToolFamily::llama3 && call.contains("parameters")) return add(call["name"], call["parameters"]);
    return false;
  }
  std::vector<ToolCall> take() { return std::move(calls_); }

 private:
  ToolFamily family_;
  const std::vector<std::string>& allowed_;
  std::vector<ToolCall> calls_;
};

// The reply with its calls: content is the text before them, and any text
// after them that is not blank.
bool finish(ParsedReply& out, Calls& calls, std::string_view text, size_t first_call, size_t after_calls) {
  out.calls = calls.take();
  if (out.calls.empty()) return false;
  out.content = std::string(text.substr(0, first_call));
  if (after_calls < text.size() && !blank(text.substr(after_calls))) out.content += text.substr(after_calls);
  return true;
}

bool parse_llama3(std::string_view text, Calls& calls, ParsedReply& out) {
  size_t start = text.find(kPythonTag);
  size_t pos;
  if (start != std::string_view::npos) {
    pos = start + kPythonTag.size();
  } else {
    start = pos = skip_space(text, 0);
    if (pos == text.size() || text[pos] != '{') return false;
  }
  // One or more objects, separated by whitespace or ';'.
  for (;;) {
    while (pos < text.size() && (is_space(text[pos]) || text[pos] == ';')) ++pos;
    if (pos == text.size()) break;
    const size_t n = json_value_end(text.substr(pos));
    if (n == 0) return false;
    const Json call = Json::parse(text.substr(pos, n), nullptr, false);
    if (call.is_object() && call.contains("type") && call["type"] != "function") return false;
    if (!calls.add_object(call)) return false;
    pos += n;
  }
  return finish(out, calls, text, start, text.size());
}

bool parse_hermes(std::string_view text, Calls& calls, ParsedReply& out) {
  const size_t start = text.find(kHermesOpen);
  if (start == std::string_view::npos) return false;
  size_t pos = start;
  while (starts_at(text, pos, kHermesOpen)) {
    const size_t body = pos + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    // The last block may lack its closing tag (the model ended there).
    const size_t body_end = close == std::string_view::npos ? text.size() : close;
    if (!calls.add_object(parse_exact(text.substr(body, body_end - body)))) return false;
    pos = close == std::string_view::npos ? text.size() : skip_space(text, close + kHermesClose.size());
  }
  return finish(out, calls, text, start, pos);
}

bool parse_mistral(std::string_view text, Calls& calls, ParsedReply& out) {
  const size_t start = text.find(kMistralCalls);
  if (start == std::string_view::npos) return false;
  size_t pos = skip_space(text, start + kMistralCalls.size());
  if (starts_at(text, pos, "[")) {  // [TOOL_CALLS][{...}, ...]
    const size_t n = json_value_end(text.substr(pos));
    if (n == 0) return false;
    const Json list = Json::parse(text.substr(pos, n), nullptr, false);
    if (!list.is_array() || list.empty()) return false;
    for (const Json& call : list)
      if (!calls.add_object(call)) return false;
    return finish(out, calls, text, start, pos + n);
  }
  // Tokenizer v11: [TOOL_CALLS]NAME[ARGS]{...}, repeated.
  for (;;) {
    const size_t args = text.find(kMistralArgs, pos);
    if (args == std::string_view::npos) return false;
    const std::string name(trim(text.substr(pos, args - pos)));
    const size_t json_at = skip_space(text, args + kMistralArgs.size());
    const size_t n = json_value_end(text.substr(json_at));
    if (n == 0 || !calls.add(Json(name), Json::parse(text.substr(json_at, n), nullptr, false))) return false;
    pos = skip_space(text, json_at + n);
    if (!starts_at(text, pos, kMistralCalls)) break;
    pos += kMistralCalls.size();
  }
  return finish(out, calls, text, start, pos);
}

// A harmony header's value after key ("to=", "<|channel|>"), up to a space
// or a marker; "" when absent.
std::string header_value(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  size_t end = at + key.size();
  while (end < header.size() && !is_space(header[end]) && header[end] != '<') ++end;
  return std::string(header.substr(at + key.size(), end - at - key.size()));
}

bool parse_gpt_oss(std::string_view text, Calls& calls, ParsedReply& out) {
  std::string content, reasoning;
  size_t pos = 0;
  while (!blank(text.substr(pos))) {
    if (starts_at(text, pos, kHarmonyStart)) pos += kHarmonyStart.size();
    const size_t header_end = text.find(kHarmonyMessage, pos);
    if (header_end == std::string_view::npos) return false;
    const std::string_view header = text.substr(pos, header_end - pos);
    const size_t body = header_end + kHarmonyMessage.size();
    size_t body_end = text.size(), next = text.size();
    for (std::string_view end : kHarmonyEnds) {
      const size_t e = text.find(end, body);
      if (e < body_end) body_end = e, next = e + end.size();
    }
    const std::string_view message = text.substr(body, body_end - body);
    const std::string recipient = header_value(header, "to=");
    const std::string channel = header_value(header, kHarmonyChannel);
    if (!recipient.empty()) {
      // Only functions.NAME are the client's tools (browser.*, python are built-ins).
      if (recipient.rfind("functions.", 0) != 0) return false;
      if (!calls.add(Json(recipient.substr(10)), parse_exact(message))) return false;
    } else if (channel == "final") {
      content += message;
    } else if (channel == "analysis" || channel == "commentary") {
      reasoning += message;
    } else {
      return false;
    }
    pos = next;
  }
  out.calls = calls.take();
  if (out.calls.empty()) return false;
  out.content = std::move(content);
  out.reasoning = std::move(reasoning);
  return true;
}

bool parse_deepseek(std::string_view text, Calls& calls, ParsedReply& out) {
  const size_t start = text.find(kDsCallsBegin);
  if (start == std::string_view::npos) return false;
  size_t pos = skip_space(text, start + kDsCallsBegin.size());
  while (starts_at(text, pos, kDsCallBegin)) {
    pos += kDsCallBegin.size();
    const size_t sep = text.find(kDsSep, pos);
    if (sep == std::string_view::npos) return false;
    const std::string_view head = trim(text.substr(pos, sep - pos));
    pos = sep + kDsSep.size();
    std::string name;
    size_t json_at;
    bool fenced = false;
    if (head == "function") {  // V3, R1: function<sep>NAME\n```json\n{...}\n```
      const size_t line_end = text.find('\n', pos);
      if (line_end == std::string_view::npos) return false;
      name = std::string(trim(text.substr(pos, line_end - pos)));
      json_at = skip_space(text, line_end);
      if (!starts_at(text, json_at, "```")) return false;
      json_at += 3;
      if (starts_at(text, json_at, "json")) json_at += 4;
      json_at = skip_space(text, json_at);
      fenced = true;
    } else {  // V3.1: NAME<sep>{...}
      name = std::string(head);
      json_at = skip_space(text, pos);
    }
    const size_t n = json_value_end(text.substr(json_at));
    if (n == 0 || !calls.add(Json(name), Json::parse(text.substr(json_at, n), nullptr, false))) return false;
    pos = skip_space(text, json_at + n);
    if (fenced) {
      if (!starts_at(text, pos, "```")) return false;
      pos = skip_space(text, pos + 3);
    }
    if (starts_at(text, pos, kDsCallEnd)) pos = skip_space(text, pos + kDsCallEnd.size());
    else if (pos != text.size()) return false;  // only the last call may lack its end (the model stopped)
  }
  if (starts_at(text, pos, kDsCallsEnd)) pos += kDsCallsEnd.size();
  return finish(out, calls, text, start, pos);
}

// Where marker begins in text, or where a prefix of it ends text; else npos.
size_t marker_from(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at != std::string_view::npos) return at;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
  return std::string_view::npos;
}

}  // namespace

ToolFamily detect_tool_family(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<|channel|>") && has("<|call|>")) return ToolFamily::gpt_oss;
  if (has("tool▁calls▁begin")) return ToolFamily::deepseek;
  if (has("[TOOL_CALLS]")) return ToolFamily::mistral;
  if (has("<tool_call>")) return ToolFamily::hermes;
  if (has("<|start_header_id|>") && (has("<|python_tag|>") || has("ipython"))) return ToolFamily::llama3;
  return ToolFamily::none;
}

const char* tool_family_name(ToolFamily family) {
  switch (family) {
    case ToolFamily::none: return "none";
    case ToolFamily::llama3: return "llama3";
    case ToolFamily::hermes: return "hermes";
    case ToolFamily::mistral: return "mistral";
    case ToolFamily::gpt_oss: return "gpt-oss";
    case ToolFamily::deepseek: return "deepseek";
  }
  return "none";
}

std::vector<std::string> tool_call_markers(ToolFamily family) {
  switch (family) {
    case ToolFamily::none: return {};
    case ToolFamily::llama3: return {std::string(kPythonTag)};
    case ToolFamily::hermes: return {std::string(kHermesOpen), std::string(kHermesClose)};
    case ToolFamily::mistral: return {std::string(kMistralCalls), std::string(kMistralArgs)};
    case ToolFamily::gpt_oss:
      return {std::string(kHarmonyStart), std::string(kHarmonyChannel), std::string(kHarmonyMessage),
              std::string(kHarmonyConstrain), "<|end|>", "<|call|>", "<|return|>"};
    case ToolFamily::deepseek:
      return {std::string(kDsCallsBegin), std::string(kDsCallsEnd), std::string(kDsCallBegin),
              std::string(kDsCallEnd), std::string(kDsSep)};
  }
  return {};
}

ParsedReply parse_tool_calls(ToolFamily family, std::string_view text, const std::vector<std::string>& allowed,
                             bool parallel) {
  ParsedReply out;
  Calls calls(family, allowed);
  bool ok = false;
  switch (family) {
    case ToolFamily::none: break;
    case ToolFamily::llama3: ok = parse_llama3(text, calls, out); break;
    case ToolFamily::hermes: ok = parse_hermes(text, calls, out); break;
    case ToolFamily::mistral: ok = parse_mistral(text, calls, out); break;
    case ToolFamily::gpt_oss: ok = parse_gpt_oss(text, calls, out); break;
    case ToolFamily::deepseek: ok = parse_deepseek(text, calls, out); break;
  }
  if (!ok) return ParsedReply{std::string(text), {}, {}};
  if (!parallel && out.calls.size() > 1) out.calls.resize(1);
  return out;
}

size_t tool_call_hold_from(ToolFamily family, std::string_view text) {
  size_t at = std::string_view::npos;
  switch (family) {
    case ToolFamily::none: break;
    case ToolFamily::gpt_oss: at = 0; break;  // every part of a harmony reply is in a channel's markup
    case ToolFamily::llama3: {
      const size_t first = skip_space(text, 0);
      at = first == text.size() || text[first] == '{' ? 0 : marker_from(text, kPythonTag);
      break;
    }
    case ToolFamily::hermes: at = marker_from(text, kHermesOpen); break;
    case ToolFamily::mistral: at = marker_from(text, kMistralCalls); break;
    case ToolFamily::deepseek: at = marker_from(text, kDsCallsBegin); break;
  }
  return at == std::string_view::npos ? text.size() : at;
}

std::string new_tool_call_id(ToolFamily family) {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{(static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()};
  const bool mistral = family == ToolFamily::mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng() % (sizeof kAlnum - 1)];
  return id;
}

size_t json_value_end(std::string_view text) {
  if (text.empty() || (text[0] != '{' && text[0] != '[')) return 0;
  std::vector<char> open;
  size_t end = 0;
  scan_json_brackets(text, [&](size_t i, char c) {
    if (c == '{' || c == '[') {
      if (open.size() >= static_cast<size_t>(kMaxDepth)) return false;
      open.push_back(c == '{' ? '}' : ']');
      return true;
    }
    if (c != open.back()) return false;
    open.pop_back();
    if (open.empty()) end = i + 1;
    return !open.empty();
  });
  return end;
}

}  // namespace weft::serve
