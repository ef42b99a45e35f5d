// One call of a Jinja filter (x | name(args)): the value, its arguments, and
// the argument helpers every filter uses. The filters are plain functions
// of a FilterCall, listed in one table (jinja_filters.cpp) from which the
// parser's list of known filters is derived too; a new filter is a
// function and a row.
#pragma once

#include <cstddef>
#include <string>

#include "serve/template/jinja_eval.h"

namespace weft::serve::detail {

struct FilterCall {
  Evaluator& ev;
  const std::string& name;  // as written: "d" and "default" share a function
  const Value& v;
  Args& args;
  Kwargs& kwargs;
  std::string v_text;       // subject()'s text when v is not a string

  // Positional argument i, else the keyword n; nullptr when neither is given.
  const Value* arg(std::size_t i, const char* n) const;
  // That argument's truth (false when absent).
  bool flag(std::size_t i, const char* n) const;
  // An attribute= argument: "" when absent or none; a string, else a type error.
  std::string attr_name(std::size_t i, const char* n) const;
  // Follows a dotted attribute path ("function.name") as Jinja's attribute= arguments do.
  Value attr_path(const Value& item, const std::string& path) const;
  // v's text: v itself when a string, else str(v) (kept in v_text).
  const std::string& subject();
};

using FilterFn = Value (*)(FilterCall&);

// The filters over sequences and mappings (jinja_filters_seq.cpp).
Value filter_first_last(FilterCall& c);
Value filter_list(FilterCall& c);
Value filter_reverse(FilterCall& c);
Value filter_items(FilterCall& c);  // items and dictsort
Value filter_join(FilterCall& c);
Value filter_select(FilterCall& c);  // select, reject, selectattr, rejectattr
Value filter_map(FilterCall& c);
Value filter_unique_sort(FilterCall& c);

}  // namespace weft::serve::detail
