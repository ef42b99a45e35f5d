#include "weft/core/error.h"

namespace weft {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_input: return "invalid input";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::out_of_memory: return "out of memory";
    case ErrorKind::disconnected: return "disconnected";
    case ErrorKind::internal: return "internal";
  }
  return "unknown";
}

void fail(ErrorKind kind, const std::string& where, const std::string& what) {
  throw Error(kind, "[" + where + "] " + what);
}

}  // namespace weft
