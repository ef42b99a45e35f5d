// The tool fields of a chat request (tool_request.h).
#include "serve/tool_request.h"

#include <algorithm>

#include "serve/openai_api.h"

namespace weft::serve {

namespace {

constexpr size_t kMaxNameBytes = 64;

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

// The function names of tools, checked.
std::vector<std::string> tool_names(const Json& tools) {
  if (!tools.is_array()) bad_request("tools", "'tools' must be an array");
  if (tools.size() > kMaxTools) bad_request("tools", "at most " + std::to_string(kMaxTools) + " tools per request");
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || t["type"] != "function")
      bad_request("tools", at + " must be {\"type\": \"function\", \"function\": {...}}");
    if (!t.contains("function") || !t["function"].is_object())
      bad_request("tools", at + ".function must be an object");
    const Json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>()))
      bad_request("tools", at + ".function.name must be 1-64 letters, digits, '_', '-' or '.'");
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null())
      bad_request("tools", at + ".function.parameters must be a JSON schema object");
    const std::string name = f["name"].get<std::string>();
    if (std::find(names.begin(), names.end(), name) != names.end())
      bad_request("tools", "two tools are named '" + name + "'");
    names.push_back(name);
  }
  return names;
}

}  // namespace

ToolOptions read_tool_options(const Json& body, ToolFamily family, Json& extra) {
  ToolOptions out;
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (given("parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean())
      bad_request("parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    out.parallel = body["parallel_tool_calls"].get<bool>();
  }
  // "tools": [] is as none.
  const bool has_tools = given("tools") && !(body["tools"].is_array() && body["tools"].empty());
  std::vector<std::string> names = has_tools ? tool_names(body["tools"]) : std::vector<std::string>{};

  std::string choice = "auto";
  if (given("tool_choice")) {
    const Json& c = body["tool_choice"];
    if (c.is_string() && (c == "none" || c == "auto" || c == "required")) {
      choice = c.get<std::string>();
    } else if (c.is_object() && c.contains("type") && c["type"] == "function" && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") && c["function"]["name"].is_string()) {
      choice = c["function"]["name"].get<std::string>();
      if (std::find(names.begin(), names.end(), choice) == names.end())
        bad_request("tool_choice", "'tool_choice' names '" + choice + "', which is not one of the tools");
    } else {
      bad_request("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                 "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (!has_tools && choice != "none")
      bad_request("tool_choice", "'tool_choice' other than \"none\" needs 'tools'");
    extra["tool_choice"] = c;
  }
  if (!has_tools || choice == "none") return out;  // the template sees no tools; replies are text

  const Json& tools = body["tools"];
  if (choice == "auto" || choice == "required") {
    extra["tools"] = tools;
    out.names = std::move(names);
  } else {  // one function named: the model is shown that one alone
    Json only = Json::array();
    for (const Json& t : tools)
      if (t["function"]["name"] == choice) only.push_back(t);
    extra["tools"] = std::move(only);
    out.names = {choice};
  }
  out.parse = family != ToolFamily::none;
  return out;
}

void tool_history_for_template(Json& messages, ToolFamily family) {
  if (!messages.is_array()) return;
  for (Json& m : messages) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    if (family == ToolFamily::deepseek) {
      if (m.contains("content") && m["content"] == "") m["content"] = nullptr;
      continue;
    }
    for (Json& call : m["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      Json& f = call["function"];
      if (!f.contains("arguments") || !f["arguments"].is_string()) continue;
      // Depth-capped first (json_value_end): the text is the client's.
      const std::string& text = f["arguments"].get_ref<const std::string&>();
      if (json_value_end(text) != text.size()) continue;
      Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) f["arguments"] = std::move(parsed);
    }
  }
}

}  // namespace weft::serve
