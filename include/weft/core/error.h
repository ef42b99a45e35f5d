// weft::Error: the one exception type weft throws, sorted by what the caller
// can do about it (after KJ's exception kinds).
#pragma once

#include <stdexcept>
#include <string>

namespace weft {

enum class ErrorKind {
  invalid_input,  // the caller (or a file, or a peer) supplied something impossible
  unsupported,    // valid, but this backend or build cannot do it
  out_of_memory,  // an allocation or a cap was exceeded
  disconnected,   // a peer went away; the operation may be retried elsewhere
  internal,       // a weft bug surfaced as an error rather than a crash
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws Error(kind, "[where] what"); messages start with the operation's name.
[[noreturn]] void fail(ErrorKind kind, const std::string& where, const std::string& what);

}  // namespace weft
