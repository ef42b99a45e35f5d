// JSON Schema into GBNF (json_schema_grammar.h): one rule per subschema,
// named after its place, with shared rules for JSON's primitives.
#include "serve/json_schema_grammar.h"

#include <cctype>
#include <map>
#include <set>

#include "weft/core/error.h"

namespace weft::serve {
namespace {

// The primitives, whole JSON values and bounded whitespace. A \u escape
// never names a surrogate (U+D800..U+DFFF: strict parsers refuse one
// alone; characters beyond U+FFFF come as UTF-8). JSON numbers
// keep at most 16 digits before the point and after it, as llama.cpp's
// converter does, so that a generation cannot run on in one number, and 2
// in the exponent, so that every number fits a double (1e317 would not).
constexpr const char* kPrimitives = R"(ws ::= | " " | "\n" [ \t]{0,20}
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))
string ::= "\"" char* "\""
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15})
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"
)";

// Keywords that constrain values in ways this converter does not enforce:
// refused rather than ignored, so that what is generated always validates.
const std::set<std::string>& unsupported() {
  static const std::set<std::string> k = {
      "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems",
      "minProperties", "maxProperties", "patternProperties", "propertyNames", "not", "if", "then", "else",
      "dependentRequired", "dependentSchemas", "dependencies", "contains", "minContains", "maxContains",
      "prefixItems", "unevaluatedItems", "contentSchema"};
  return k;
}

// text as a GBNF literal: quoted, with \ " and control characters escaped.
std::string literal(const std::string& text) {
  std::string out = "\"";
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c < 0x20 || c == 0x7F) out += "\\x", out += hex[c >> 4], out += hex[c & 15];
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

class Converter {
 public:
  Converter(const Json& root, const SchemaLimits& limits) : root_(root), limits_(limits) {}

  std::string run() {
    const std::string top = visit(root_, "", 0);
    std::string out = "root ::= " + top + "\n" + kPrimitives;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    if (out.size() > limits_.max_grammar_bytes)
      bad("", "the schema makes a grammar of " + std::to_string(out.size()) + " bytes, more than the limit of " +
                  std::to_string(limits_.max_grammar_bytes));
    return out;
  }

 private:
  [[noreturn]] void bad(const std::string& path, const std::string& what) const {
    fail(ErrorKind::invalid_input, "json schema", "at " + (path.empty() ? std::string("/") : path) + ": " + what);
  }

  // A new rule for body, named after path; returns its name.
  std::string rule(const std::string& path, const std::string& body) {
    std::string name = "s";
    for (char c : path) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (name.size() > 48) name.resize(48);
    name += "-" + std::to_string(rules_.size());
    total_ += body.size() + name.size();
    if (total_ > limits_.max_grammar_bytes)
      bad(path, "the schema makes a grammar larger than " + std::to_string(limits_.max_grammar_bytes) + " bytes");
    rules_.emplace_back(name, body);
    return name;
  }

  int repeat_bound(const Json& s, const char* key, const std::string& path, int fallback) {
    auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      bad(path + "/" + key, std::string("'") + key + "' must be a non-negative integer");
    if (it->get<int64_t>() > limits_.max_repeat)
      bad(path + "/" + key, std::string("'") + key + "' " + std::to_string(it->get<int64_t>()) +
                                " is beyond the limit of " + std::to_string(limits_.max_repeat));
    return static_cast<int>(it->get<int64_t>());
  }

  std::string value_literal(const Json& v, const std::string& path) {
    std::string text = v.dump();
    literal_bytes_ += text.size();
    if (literal_bytes_ > limits_.max_literal_bytes)
      bad(path, "enum and const values exceed " + std::to_string(limits_.max_literal_bytes) + " bytes together");
    return literal(text);
  }

  // x repeated between min and max times (max < 0: unbounded), separated
  // by commas.
  static std::string list(const std::string& x, int min, int max) {
    const std::string more = "(ws \",\" ws " + x + ")";
    auto count = [&](int lo, int hi) {
      if (hi < 0) return more + (lo == 0 ? "*" : "{" + std::to_string(lo) + ",}");
      if (hi == 0) return std::string();
      return more + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    };
    if (min == 0) {
      if (max == 0) return "";
      return "(" + x + " " + count(0, max < 0 ? -1 : max - 1) + ")?";
    }
    return x + " " + count(min - 1, max < 0 ? -1 : max - 1);
  }

  std::string visit(const Json& s, const std::string& path, int depth) {
    if (depth > limits_.max_depth)
      bad(path, "subschemas nested deeper than " + std::to_string(limits_.max_depth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) bad(path, "the schema false accepts no value");
      return "value";
    }
    if (!s.is_object()) bad(path, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items())
      if (unsupported().count(key)) bad(path + "/" + key, "'" + key + "' is not supported");

    if (auto it = s.find("$ref"); it != s.end()) return ref(*it, path + "/$ref", depth);
    if (auto it = s.find("const"); it != s.end()) return rule(path, value_literal(*it, path + "/const"));
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) bad(path + "/enum", "'enum' must be a non-empty array");
      if (it->size() > limits_.max_enum)
        bad(path + "/enum", "'enum' has " + std::to_string(it->size()) + " values, more than the limit of " +
                                std::to_string(limits_.max_enum));
      std::string body;
      for (const Json& v : *it) body += (body.empty() ? "" : " | ") + value_literal(v, path + "/enum");
      return rule(path, body);
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      const std::string p = path + "/" + key;
      if (!it->is_array() || it->empty()) bad(p, std::string("'") + key + "' must be a non-empty array");
      if (it->size() > limits_.max_alternatives)
        bad(p, std::string("'") + key + "' has more than " + std::to_string(limits_.max_alternatives) + " entries");
      if (std::string(key) == "allOf") {
        if (it->size() != 1) bad(p, "'allOf' is supported with one entry only");
        return visit((*it)[0], p + "/0", depth + 1);
      }
      std::string body;  // oneOf as anyOf: the alternatives are rarely overlapping
      for (size_t i = 0; i < it->size(); ++i)
        body += (i ? " | " : "") + visit((*it)[i], p + "/" + std::to_string(i), depth + 1);
      return rule(path, body);
    }

    auto type = s.find("type");
    if (type == s.end()) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
        return typed(s, "object", path, depth);
      if (s.contains("items")) return typed(s, "array", path, depth);
      return "value";
    }
    if (type->is_string()) return typed(s, type->get<std::string>(), path, depth);
    if (!type->is_array() || type->empty() || type->size() > limits_.max_alternatives)
      bad(path + "/type", "'type' must be a string or a non-empty array of strings");
    std::string body;
    for (const Json& t : *type) {
      if (!t.is_string()) bad(path + "/type", "'type' must be a string or a non-empty array of strings");
      body += (body.empty() ? "" : " | ") + typed(s, t.get<std::string>(), path, depth);
    }
    return rule(path, body);
  }

  std::string typed(const Json& s, const std::string& type, const std::string& path, int depth) {
    if (type == "string") {
      const int lo = repeat_bound(s, "minLength", path, 0), hi = repeat_bound(s, "maxLength", path, -1);
      if (hi >= 0 && hi < lo) bad(path, "'maxLength' is smaller than 'minLength'");
      if (lo == 0 && hi < 0) return "string";
      const std::string count = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
      return rule(path, "\"\\\"\" char" + count + " \"\\\"\"");
    }
    if (type == "number" || type == "integer" || type == "boolean" || type == "null") return type;
    if (type == "array") {
      const int lo = repeat_bound(s, "minItems", path, 0), hi = repeat_bound(s, "maxItems", path, -1);
      if (hi >= 0 && hi < lo) bad(path, "'maxItems' is smaller than 'minItems'");
      const std::string item = s.contains("items") ? visit(s["items"], path + "/items", depth + 1) : "value";
      return rule(path, "\"[\" ws " + list(item, lo, hi) + " ws \"]\"");
    }
    if (type == "object") return object(s, path, depth);
    bad(path + "/type", "unknown type '" + type + "'");
  }

  std::string object(const Json& s, const std::string& path, int depth) {
    auto props = s.find("properties");
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) bad(path + "/required", "'required' must be an array of property names");
      for (const Json& n : *r) {
        if (!n.is_string()) bad(path + "/required", "'required' must be an array of property names");
        if (props == s.end() || !props->contains(n.get<std::string>()))
          bad(path + "/required", "required property '" + n.get<std::string>() + "' is not in 'properties'");
        required.insert(n.get<std::string>());
      }
    }
    if (props == s.end() || props->empty()) {
      // Any keys: values as additionalProperties says (absent or true: any).
      auto add = s.find("additionalProperties");
      if (add != s.end() && add->is_boolean() && !add->get<bool>()) return rule(path, "\"{\" ws \"}\"");
      const std::string v = add == s.end() || add->is_boolean() ? "value" : visit(*add, path + "/additionalProperties", depth + 1);
      if (v == "value") return "object";
      return rule(path, "\"{\" ws " + list("string ws \":\" ws " + v, 0, -1) + " ws \"}\"");
    }
    if (!props->is_object()) bad(path + "/properties", "'properties' must be an object");
    // Required first, then the optional ones; present properties keep the
    // schema's order within each group.
    std::vector<std::string> req, opt;
    for (const auto& [name, sub] : props->items()) {
      const std::string kv = literal(Json(name).dump()) + " ws \":\" ws " +
                             visit(sub, path + "/properties/" + name, depth + 1);
      (required.count(name) ? req : opt).push_back(kv);
    }
    std::string body = "\"{\" ws";
    for (size_t i = 0; i < req.size(); ++i) body += (i ? " ws \",\" ws " : " ") + req[i];
    if (!opt.empty()) {
      // tail_i: one or more of opt[i..], in order, comma-separated.
      std::string next;
      for (size_t i = opt.size(); i-- > 0;) {
        const std::string b = next.empty() ? opt[i] : opt[i] + " (ws \",\" ws " + next + ")? | " + next;
        next = rule(path + "/opt", b);
      }
      body += req.empty() ? " (" + next + ")?" : " (ws \",\" ws " + next + ")?";
    }
    return rule(path, body + " ws \"}\"");
  }

  std::string ref(const Json& r, const std::string& path, int depth) {
    if (!r.is_string()) bad(path, "'$ref' must be a string");
    const std::string target = r.get<std::string>();
    std::string section;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (target.rfind(prefix, 0) == 0) section = prefix;
    if (section.empty() || target.size() == section.size())
      bad(path, "'$ref' " + target + " is not supported (only #/$defs/NAME and #/definitions/NAME)");
    const std::string name = target.substr(section.size());
    const Json* defs = nullptr;
    const std::string key = section == "#/$defs/" ? "$defs" : "definitions";
    if (auto it = root_.find(key); root_.is_object() && it != root_.end() && it->is_object()) defs = &*it;
    if (!defs || !defs->contains(name)) bad(path, "'$ref' " + target + " names no definition");
    if (auto done = refs_.find(target); done != refs_.end()) return done->second;  // recursion reaches it here
    // Named before it is visited, so that a definition may refer to itself.
    const std::string rname = "d" + std::to_string(refs_.size());
    refs_[target] = rname;
    const std::string body = visit((*defs)[name], "/" + key + "/" + name, depth + 1);
    rules_.emplace_back(rname, body);
    return rname;
  }

  const Json& root_;
  SchemaLimits limits_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  size_t literal_bytes_ = 0, total_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const Json& schema, const SchemaLimits& limits) {
  return Converter(schema, limits).run();
}

std::string json_object_gbnf() {
  std::string g = "root ::= object\n";  // appended in place: GCC 12's -Wrestrict misreads a + (bug 105329)
  g += kPrimitives;
  return g;
}

}  // namespace weft::serve
