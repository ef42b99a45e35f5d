#include "weft/core/secret_file.h"

#include <fstream>

#include "weft/core/error.h"

namespace weft {

std::string read_secret_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::invalid_input, what, "cannot read the secret file '" + path + "'");
  std::string text(kMaxSecretFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) fail(ErrorKind::invalid_input, what, "cannot read the secret file '" + path + "'");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxSecretFileBytes)
    fail(ErrorKind::invalid_input, what,
         "the secret file '" + path + "' holds more than " + std::to_string(kMaxSecretFileBytes) + " bytes");
  const char* space = " \t\r\n\v\f";
  const size_t b = text.find_first_not_of(space);
  if (b == std::string::npos) fail(ErrorKind::invalid_input, what, "the secret file '" + path + "' is empty");
  const size_t e = text.find_last_not_of(space);
  std::string secret = text.substr(b, e - b + 1);
  if (secret.find_first_of("\r\n") != std::string::npos)
    fail(ErrorKind::invalid_input, what, "the secret file '" + path + "' must hold one line: the secret");
  return secret;
}

}  // namespace weft
