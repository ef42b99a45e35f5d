// A request's output constraint (openai_api.h, read_output_constraint):
// response_format json_object / json_schema, or a GBNF grammar, compiled
// into a Grammar once per request (its n choices share it).
#include "serve/json_schema_grammar.h"
#include "serve/openai_api.h"
#include "weft/serve/output_constraint.h"
#include "weft/core/error.h"

namespace weft::serve {
namespace {

std::shared_ptr<const model::Grammar> compile(const std::string& gbnf, const std::string& param) {
  try {
    return model::Grammar::parse(gbnf);
  } catch (const Error& e) {
    bad_request(param, "'" + param + "': " + e.what());
  }
}

std::shared_ptr<const model::Grammar> from_schema(const Json& schema, const std::string& param) {
  std::string gbnf;
  try {
    gbnf = json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    bad_request(param, "'" + param + "': " + e.what());
  }
  return compile(gbnf, param);
}

const Json* member(const Json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

std::shared_ptr<const model::Grammar> read_output_constraint(const Json& body) {
  const Json* format = member(body, "response_format");
  const Json* grammar = member(body, "grammar");        // llama.cpp's server's field
  const Json* schema = member(body, "json_schema");     // llama.cpp's server's field
  if (grammar && !grammar->is_string()) bad_request("grammar", "'grammar' must be a string of GBNF rules");
  std::shared_ptr<const model::Grammar> out;
  if (format) {
    if (!format->is_object()) bad_request("response_format", "'response_format' must be an object");
    const Json* type = member(*format, "type");
    if (!type || !type->is_string())
      bad_request("response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    const std::string t = type->get<std::string>();
    if (t == "json_object") {
      // llama.cpp takes a schema here too.
      out = member(*format, "schema") ? from_schema(*member(*format, "schema"), "response_format")
                                      : compile(json_object_gbnf(), "response_format");
    } else if (t == "json_schema") {
      const Json* js = member(*format, "json_schema");
      const Json* s = js && js->is_object() ? member(*js, "schema") : member(*format, "schema");
      if (!s)
        bad_request("response_format", "'response_format.json_schema.schema' is required with type \"json_schema\"");
      if (js && !js->is_object()) bad_request("response_format", "'response_format.json_schema' must be an object");
      out = from_schema(*s, "response_format");
    } else if (t != "text") {
      bad_request("response_format",
                  "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"" + t + "\"");
    }
  }
  if (schema) {
    if (out) bad_request("json_schema", "give 'json_schema' or a JSON 'response_format', not both");
    out = from_schema(*schema, "json_schema");
  }
  if (grammar) {
    if (out) bad_request("grammar", "give 'grammar' or a JSON 'response_format' / 'json_schema', not both");
    out = compile(grammar->get<std::string>(), "grammar");
  }
  return out;
}

std::shared_ptr<const model::Grammar> grammar_from_json_schema(std::string_view schema_json) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    fail(ErrorKind::invalid_input, "json schema", std::string("the schema is not JSON: ") + e.what());
  }
  return model::Grammar::parse(json_schema_to_gbnf(schema));
}

}  // namespace weft::serve
