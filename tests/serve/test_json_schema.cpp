// JSON Schema into grammars (serve/json_schema_grammar.h): hand-checked
// texts accepted and rejected, faults named with their place, hostile
// schemas refused; then many random schemas from a generator here, each
// used to constrain a generation of a tiny random-weight model, whose text
// must parse as JSON (nlohmann's parser) and validate against the schema
// (the small validator below, written apart from the code under test).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "serve/json_schema_grammar.h"
#include "serve/openai_api.h"
#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/model/grammar.h"
#include "weft/runtime/session.h"

namespace {

namespace fs = std::filesystem;
using weft::model::Grammar;
using weft::model::GrammarMatcher;
using weft::serve::Json;
using weft::serve::json_schema_to_gbnf;

bool accepts(const Json& schema, const std::string& text) {
  GrammarMatcher m(Grammar::parse(json_schema_to_gbnf(schema)), nullptr);
  return m.accept_bytes(text) && m.can_end();
}

std::string schema_error(const Json& schema) {
  try {
    Grammar::parse(json_schema_to_gbnf(schema));
  } catch (const weft::Error& e) {
    return e.what();
  }
  return "";
}

// Code points of UTF-8 text (what JSON Schema's lengths count).
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// A validator for the keywords the generator below uses, after the JSON
// Schema 2020-12 validation spec; returns "" or why v fails s at path.
std::string invalid(const Json& v, const Json& s, const std::string& path = "") {
  if (s.contains("const") && v != s["const"]) return path + ": not the const";
  if (s.contains("enum")) {
    bool found = false;
    for (const Json& e : s["enum"]) found = found || e == v;
    if (!found) return path + ": not in the enum";
  }
  if (s.contains("anyOf")) {
    for (const Json& sub : s["anyOf"])
      if (invalid(v, sub, path).empty()) return "";
    return path + ": matches no anyOf entry";
  }
  if (!s.contains("type")) return "";
  const std::string t = s["type"];
  if (t == "string") {
    if (!v.is_string()) return path + ": not a string";
    const size_t n = code_points(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return path + ": shorter than minLength";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return path + ": longer than maxLength";
  } else if (t == "integer") {
    if (!v.is_number_integer()) return path + ": not an integer";
  } else if (t == "number") {
    if (!v.is_number()) return path + ": not a number";
  } else if (t == "boolean") {
    if (!v.is_boolean()) return path + ": not a boolean";
  } else if (t == "null") {
    if (!v.is_null()) return path + ": not null";
  } else if (t == "array") {
    if (!v.is_array()) return path + ": not an array";
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return path + ": fewer than minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return path + ": more than maxItems";
    for (size_t i = 0; i < v.size(); ++i)
      if (auto e = invalid(v[i], s["items"], path + "/" + std::to_string(i)); !e.empty()) return e;
  } else if (t == "object") {
    if (!v.is_object()) return path + ": not an object";
    for (const Json& r : s["required"])
      if (!v.contains(r.get<std::string>())) return path + ": missing required " + r.get<std::string>();
    for (const auto& [k, sub] : v.items()) {
      if (!s["properties"].contains(k)) return path + ": an additional property " + k;
      if (auto e = invalid(sub, s["properties"][k], path + "/" + k); !e.empty()) return e;
    }
  }
  return "";
}

// A random schema of the supported subset, small enough that every text it
// accepts is a few hundred bytes at most.
Json random_schema(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int kind = pick(depth >= 2 ? 7 : 10);
  switch (kind) {
    case 0: {
      Json s = {{"type", "string"}, {"maxLength", pick(6)}};
      if (pick(2)) s["minLength"] = std::min(pick(3), s["maxLength"].get<int>());
      return s;
    }
    case 1: return {{"type", "integer"}};
    case 2: return {{"type", "number"}};
    case 3: return {{"type", "boolean"}};
    case 4: return {{"type", "null"}};
    case 5: {
      Json e = Json::array();
      const Json values[] = {"red", "green", "a \"quoted\" one", 3, -1.5, true, nullptr, "é"};
      for (int i = 0, n = 1 + pick(4); i < n; ++i) e.push_back(values[pick(8)]);
      return {{"enum", e}};
    }
    case 6: return {{"const", pick(2) ? Json("fixed") : Json(42)}};
    case 7: {
      Json s = {{"type", "array"}, {"items", random_schema(rng, depth + 1)}, {"maxItems", 1 + pick(2)}};
      if (pick(2)) s["minItems"] = pick(2);
      return s;
    }
    case 8: {
      Json props = Json::object(), req = Json::array();
      const char* names[] = {"id", "name", "tags", "x", "value"};
      for (int i = 0, n = 1 + pick(3); i < n; ++i) {
        const std::string k = names[pick(5)];
        if (props.contains(k)) continue;
        props[k] = random_schema(rng, depth + 1);
        if (pick(2)) req.push_back(k);
      }
      return {{"type", "object"}, {"properties", props}, {"required", req}, {"additionalProperties", false}};
    }
    default: return {{"anyOf", {random_schema(rng, depth + 1), random_schema(rng, depth + 1)}}};
  }
}

TEST(JsonSchemaGrammar, HandCheckedTexts) {
  const Json person = Json::parse(R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 5}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
    "required": ["name"], "additionalProperties": false})");
  EXPECT_TRUE(accepts(person, R"({"name":"Ann"})"));
  EXPECT_TRUE(accepts(person, R"({ "name" : "Ann", "age": -12, "tags": ["b","a"] })"));
  EXPECT_TRUE(accepts(person, "{\"name\":\"\\u00e9\\n\",\n  \"tags\":[]}"));
  EXPECT_FALSE(accepts(person, R"({"age": 3})"));              // name is required
  EXPECT_FALSE(accepts(person, R"({"name":"Annabel"})"));      // maxLength 5
  EXPECT_FALSE(accepts(person, R"({"name":"A","age":1.5})"));  // an integer
  EXPECT_FALSE(accepts(person, R"({"name":"A","tags":["c"]})"));
  EXPECT_FALSE(accepts(person, R"({"name":"A","tags":["a","a","a"]})"));
  EXPECT_FALSE(accepts(person, R"({"name":"A","extra":1})"));
  EXPECT_FALSE(accepts(person, R"({"name":"A"} )"));          // nothing after the value
  EXPECT_FALSE(accepts(person, "{\"name\":\"\\ud800\"}"));     // a lone surrogate escape
  EXPECT_TRUE(accepts({{"type", "number"}}, "-0.5e+10"));
  EXPECT_FALSE(accepts({{"type", "number"}}, "01"));
  EXPECT_TRUE(accepts({{"type", {"string", "null"}}}, "null"));
  EXPECT_TRUE(accepts({{"const", {{"k", 1}}}}, R"({"k":1})"));
  // $defs, recursive.
  const Json tree = Json::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
    "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"]}}})");
  EXPECT_TRUE(accepts(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1,"kids":[{}]})"));
  // json_object: any object.
  GrammarMatcher m(Grammar::parse(weft::serve::json_object_gbnf()), nullptr);
  EXPECT_TRUE(m.accept_bytes(R"({"a": [1, {"b": null}, "x"], "c": true})") && m.can_end());
}

TEST(JsonSchemaGrammar, FaultsNameTheirPlace) {
  EXPECT_NE(schema_error(Json::parse(R"({"type":"object","properties":{"a":{"type":"string","pattern":"x+"}}})"))
                .find("at /properties/a/pattern: 'pattern' is not supported"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "strin"}}).find("at /type: unknown type 'strin'"), std::string::npos);
  EXPECT_NE(schema_error({{"$ref", "http://x/y"}}).find("at /$ref: '$ref' http://x/y is not supported"),
            std::string::npos);
  EXPECT_NE(schema_error({{"$ref", "#/$defs/missing"}}).find("names no definition"), std::string::npos);
  EXPECT_NE(schema_error(Json::parse(R"({"type":"object","properties":{},"required":["q"]})"))
                .find("required property 'q' is not in 'properties'"),
            std::string::npos);
  EXPECT_NE(schema_error(false).find("accepts no value"), std::string::npos);
  EXPECT_NE(schema_error({{"type", "array"}, {"maxItems", -1}}).find("at /maxItems"), std::string::npos);
}

TEST(JsonSchemaGrammar, HostileSchemasAreRefused) {
  Json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_NE(schema_error(deep).find("nested deeper than 32"), std::string::npos);
  Json big_enum = Json::array();
  for (int i = 0; i < 5000; ++i) big_enum.push_back(i);
  EXPECT_NE(schema_error({{"enum", big_enum}}).find("'enum' has 5000 values, more than the limit of 1024"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "array"}, {"maxItems", 1000000000}}).find("beyond the limit of 1024"),
            std::string::npos);
  EXPECT_NE(schema_error({{"type", "string"}, {"minLength", 99999}}).find("at /minLength"), std::string::npos);
  Json long_values = Json::array();
  for (int i = 0; i < 100; ++i) long_values.push_back(std::string(1000, 'x'));
  EXPECT_NE(schema_error({{"enum", long_values}}).find("exceed 65536 bytes"), std::string::npos);
  // Wide, not deep: 64 properties of 64 properties of maxLength-1024 strings
  // stays within the grammar's bounds or is refused, never unbounded.
  Json wide = {{"type", "object"}, {"properties", Json::object()}};
  for (int i = 0; i < 64; ++i) {
    Json inner = {{"type", "object"}, {"properties", Json::object()}};
    for (int k = 0; k < 64; ++k) inner["properties"]["p" + std::to_string(k)] = {{"type", "string"}, {"maxLength", 1024}};
    wide["properties"]["q" + std::to_string(i)] = inner;
  }
  const std::string e = schema_error(wide);
  EXPECT_TRUE(e.empty() || e.find("limit") != std::string::npos || e.find("more than") != std::string::npos) << e;
}

// Every generation under a random schema parses and validates.
TEST(JsonSchemaGrammar, RandomSchemasConstrainGenerationsThatValidate) {
  const std::string path = (fs::temp_directory_path() / ("weft_schema_" + std::to_string(::getpid()) + ".gguf")).string();
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_ctx = 2048;
  weft::model::write_demo_model(path, spec);
  weft::Session session(weft::SessionOptions{.model = path});
  session.load(2048);
  const auto& tok = session.tokenizer();
  auto trie = weft::model::TokenTrie::from_tokenizer(tok);
  std::mt19937 rng(2024);
  const std::vector<int32_t> prompt = tok.encode("Give JSON:", true);
  int stopped_at_end = 0;
  for (int i = 0; i < 40; ++i) {
    const Json schema = random_schema(rng, 0);
    weft::GenerateOptions o;
    o.max_tokens = 1500;
    o.sampler.temperature = 1.0f;
    o.sampler.top_k = 0;
    o.sampler.top_p = 1.0f;
    o.sampler.min_p = 0.f;
    o.sampler.seed = static_cast<uint64_t>(i);
    o.grammar = Grammar::parse(json_schema_to_gbnf(schema));
    o.token_trie = trie;
    const weft::GenerateResult r = session.generate(prompt, o);
    std::string text;
    for (int32_t t : r.tokens) text += tok.decode_token(t);
    ASSERT_EQ(r.stop, weft::StopReason::end_of_generation) << schema.dump() << "\n" << text;
    ++stopped_at_end;
    Json v;
    ASSERT_NO_THROW(v = Json::parse(text)) << schema.dump() << "\n" << text;
    EXPECT_EQ(invalid(v, schema), "") << schema.dump() << "\n" << text;
  }
  EXPECT_EQ(stopped_at_end, 40);
  fs::remove(path);
}

}  // namespace
