// weft_write_test_model: writes a demo model (src/model/demo_model.h) of the
// given shape, for end-to-end tests of `weft run` and `weft perplexity`:
//
//   weft_write_test_model /tmp/tiny.gguf --layers 2 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600
//
// Defaults are weft::model::tiny_demo_spec() (2 layers, n_embd 64, 4 heads,
// 2 KV heads, n_ff 128, n_vocab 600, context 512, tied output, seed 42,
// dense); `--experts 4 --experts-used 2` makes each feed-forward a mixture of
// 4 experts of n_ff, 2 per token. The same arguments always give the same
// file. Exit 0 with one line naming the file, or 1 with the error on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "weft/model/demo_model.h"

int main(int argc, char** argv) {
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  std::string path;
  bool untied = false;

  CLI::App app{"write a deterministic random llama GGUF model with a generated vocabulary"};
  app.add_option("path", path, "output file")->required();
  app.add_option("--layers", spec.n_layer, "block_count")->capture_default_str();
  app.add_option("--embd", spec.n_embd, "embedding_length (a multiple of 32)")->capture_default_str();
  app.add_option("--heads", spec.n_head, "attention.head_count")->capture_default_str();
  app.add_option("--heads-kv", spec.n_head_kv, "attention.head_count_kv")->capture_default_str();
  app.add_option("--ff", spec.n_ff, "feed_forward_length (a multiple of 32)")->capture_default_str();
  app.add_option("--vocab", spec.n_vocab, "vocabulary size (at least 448)")->capture_default_str();
  app.add_option("--ctx", spec.n_ctx, "context_length")->capture_default_str();
  app.add_flag("--untied", untied, "a separate output.weight instead of reusing token_embd");
  app.add_option("--seed", spec.seed, "weight generator seed")->capture_default_str();
  app.add_option("--experts", spec.n_expert, "expert_count (0: dense feed-forward)")->capture_default_str();
  app.add_option("--experts-used", spec.n_expert_used, "expert_used_count (experts per token)")->capture_default_str();
  app.add_option("--chat-template", spec.chat_template, "tokenizer.chat_template (Jinja text; default: none)");
  CLI11_PARSE(app, argc, argv);
  spec.tied = !untied;

  try {
    weft::model::write_demo_model(path, spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft_write_test_model: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %s (%lld parameters)\n", path.c_str(),
              static_cast<long long>(weft::model::demo_model_params(spec)));
  return 0;
}
