// Constrained output outside a request: a JSON Schema given as JSON text
// compiled into a grammar (`weft run --json-schema FILE`), as a request's
// `response_format` json_schema is (docs/serve.md, "Constrained output").
//
//   GenerateOptions o;
//   o.grammar = weft::serve::grammar_from_json_schema(read("schema.json"));  // throws Error(invalid_input)
//   o.token_trie = weft::model::TokenTrie::from_tokenizer(session.tokenizer());
#pragma once

#include <memory>
#include <string_view>

#include "weft/model/grammar.h"

namespace weft::serve {

// Throws Error(invalid_input) when the text is not JSON, or naming the
// schema's fault and its place as a request's 400 would.
std::shared_ptr<const model::Grammar> grammar_from_json_schema(std::string_view schema_json);

}  // namespace weft::serve
