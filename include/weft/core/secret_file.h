// Shared secrets kept in files: the workers' auth token (`weft worker`,
// `weft run`, `weft workers` --auth-token-file) and the server's API key
// (`weft serve --api-key-file`). One reader, so every option holding a
// secret accepts the same files and refuses the same mistakes.
//
//   std::string token = weft::read_secret_file("/etc/weft/token", "worker");
//
// Rules: the file must be readable; surrounding whitespace (spaces, tabs,
// line breaks: the newline an editor or `echo` adds) is trimmed; what is
// left must be non-empty, one line, and at most kMaxSecretFileBytes long.
// The file is read only up to one byte past that cap, so pointing the option
// at a large file costs nothing.
#pragma once

#include <cstddef>
#include <string>

namespace weft {

// The most bytes a secret file may hold, whitespace included.
inline constexpr size_t kMaxSecretFileBytes = 4096;

// The secret in path, trimmed. Throws Error(invalid_input, "[what] ...")
// naming the file and what was wrong: cannot be read, longer than
// kMaxSecretFileBytes, empty (or only whitespace), or more than one line.
std::string read_secret_file(const std::string& path, const char* what);

}  // namespace weft
