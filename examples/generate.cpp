// generate: text from a GGUF model, its layers on this CPU and any workers.
//
//   generate MODEL PROMPT [-n TOKENS] [--token-file FILE] [HOST:PORT | rpc://HOST:PORT[/N] ...]
//
// Greedy: the same text as `weft run -m MODEL -p PROMPT -n TOKENS --worker ...`.
// --token-file: the workers' shared secret (the weft-worker service's
// /etc/weft/worker.token).
#include <weft/weft.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT [-n TOKENS] [--token-file FILE] [HOST:PORT ...]\n", argv[0]);
    return 2;
  }
  try {
    int n_tokens = 32;
    std::optional<std::string> token;
    std::vector<std::string> devices{"cpu"};  // layers go to the devices in this order
    for (int i = 3; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "-n" && i + 1 < argc) {
        n_tokens = std::stoi(argv[++i]);
      } else if (arg == "--token-file" && i + 1 < argc) {
        std::ifstream in(argv[++i]);  // one word: the worker too ignores the whitespace around it
        if (!(in >> token.emplace())) throw std::runtime_error(std::string("no token in ") + argv[i]);
      } else {
        devices.push_back(arg.starts_with("rpc://") ? arg : "rpc://" + arg);
      }
    }
    weft::Session session({.model = argv[1], .devices = devices, .device_options = {.rpc = {.auth_secret = token}}});
    const weft::model::Tokenizer& tok = session.tokenizer();
    const std::vector<int32_t> prompt = tok.encode(argv[2], tok.add_bos());
    // A KV cache for the prompt and every new token, within what the model was trained on.
    int64_t n_ctx = static_cast<int64_t>(prompt.size()) + std::max(n_tokens, 1);
    if (session.params().n_ctx_train > 0) n_ctx = std::min(n_ctx, session.params().n_ctx_train);
    session.load(n_ctx);
    session.generate(prompt, {.max_tokens = n_tokens}, [&](int32_t t) {
      const std::string piece = tok.decode_token(t);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;  // false would stop here
    });
    std::fputc('\n', stdout);
  } catch (const std::exception& e) {  // weft::Error too: "[where] what"
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
