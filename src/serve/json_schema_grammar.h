// JSON Schema into GBNF (weft/model/grammar.h): the grammar of the JSON
// texts a schema accepts, for `response_format` json_schema and
// `--json-schema` (docs/serve.md lists the keywords taken and the limits).
//
//   std::string gbnf = json_schema_to_gbnf(schema);   // throws Error(invalid_input)
//   auto grammar = weft::model::Grammar::parse(gbnf);
//
// The texts are compact JSON with bounded whitespace between tokens; an
// object's properties come required ones first, each group in the order
// the schema lists them (any order validates). No whitespace follows the
// value, so a generation ends where the value does.
#pragma once

#include <string>

#include "serve/tool_request.h"  // Json

namespace weft::serve {

// Bounds on what a schema may make; beyond them the schema is refused with
// an error naming the bound and where (a stranger's schema must not
// exhaust the server).
struct SchemaLimits {
  int max_depth = 32;             // subschemas inside one another
  size_t max_enum = 1024;         // values of one enum
  size_t max_literal_bytes = 1 << 16;  // all enum and const values' JSON, together
  int max_repeat = 1024;          // minItems, maxItems, minLength, maxLength
  size_t max_alternatives = 256;  // anyOf / oneOf / type entries
  size_t max_grammar_bytes = 1 << 20;  // the GBNF text
};

// Throws Error(invalid_input) "json schema: at /properties/a: ..." naming the
// subschema (a JSON pointer) and the fault: an unsupported keyword that
// would constrain values (pattern, minimum, ...), a wrong type, a $ref
// outside #/$defs or #/definitions, a bound passed.
std::string json_schema_to_gbnf(const Json& schema, const SchemaLimits& limits = {});

// The grammar of any JSON object (`response_format` json_object).
std::string json_object_gbnf();

}  // namespace weft::serve
