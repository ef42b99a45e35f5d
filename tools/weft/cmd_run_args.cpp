// `weft run`'s options (the command itself is cmd_run.cpp); with
// --conversation it runs `weft chat`'s code with the options that apply.
#include <memory>

#include "cli_options.h"
#include "commands.h"

namespace weft::tools {
namespace {

int run_or_chat(const RunArgs& run) {
  if (!run.conversation) return cmd_run(run);
  ChatArgs c;
  c.host = run.host;
  c.sampling = run.sampling;
  c.ctx_size = run.ctx_size;
  c.n_tokens = run.tokens_given ? run.n_tokens : -1;
  c.system = run.system;
  c.chat_template = run.chat_template;
  c.stats = run.stats;
  return cmd_chat(c);
}

}  // namespace

void add_run_command(CLI::App& app, Commands& out) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd =
      app.add_subcommand("run", "generate text from a GGUF model, its layers split over this CPU and any workers");
  add_model_host_options(cmd, a->host);
  CLI::Option* prompt_opt = cmd->add_option("-p,--prompt", a->prompt, "prompt text");
  CLI::Option* file_opt =
      cmd->add_option("-f,--file", a->prompt_file, "read the prompt from this file")->excludes(prompt_opt);
  CLI::Option* run_tokens_opt = cmd->add_option("-n,--tokens", a->n_tokens, "tokens to generate (stops early at end of generation; with --conversation per reply, default unlimited)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  add_sampling_options(cmd, a->sampling);
  cmd->add_option("-c,--ctx-size", a->ctx_size,
                      "KV cache positions in all, cut evenly among the sequences (0: the prompt and -n tokens; with "
                      "--conversation 4096), at most the model's training context unless given")
      ->capture_default_str();
  CLI::Option* conversation_opt = cmd->add_flag(
      "--conversation", a->conversation, "an interactive chat, as `weft chat` (also spelled -cnv)");
  cmd->add_option("--system", a->system, "with --conversation: the system message")->needs(conversation_opt);
  cmd->add_option("--chat-template", a->chat_template,
                      "with --conversation: a built-in template NAME or a FILE (default: the model's, else chatml)")
      ->needs(conversation_opt);
  cmd->add_flag("--stats", a->stats, "print speeds and RPC traffic to stderr");
  CLI::Option* recover_opt = cmd->add_flag(
      "--recover", a->recover,
      "when a worker dies, re-place the model over the devices left and go on with the same text (docs/recovery.md)");
  cmd->add_flag("--special", a->special, "read special-token strings in the prompt (e.g. <|eot_id|>) as those tokens");
  CLI::Option* parallel_opt = cmd->add_option("--parallel", a->parallel,
                      "sequences decoded together, pipelined over the devices (the prompt repeated; seed + i each)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  CLI::Option* prompts_opt =
      cmd->add_option("--prompts", a->prompts_file, "decode every non-empty line of this file as its own prompt, together")
          ->excludes(prompt_opt)
          ->excludes(file_opt);
  CLI::Option* grammar_opt = cmd->add_option("--grammar-file", a->grammar_file,
                                             "constrain the output to this GBNF grammar (docs/serve.md)");
  CLI::Option* schema_opt =
      cmd->add_option("--json-schema", a->json_schema_file,
                      "constrain the output to JSON valid under the JSON Schema in this file (docs/serve.md)")
          ->excludes(grammar_opt);
  for (CLI::Option* o : {prompt_opt, file_opt, prompts_opt, parallel_opt, grammar_opt, schema_opt})
    conversation_opt->excludes(o);
  CLI::Option* draft_opt =
      cmd->add_option("--model-draft", a->draft_model,
                      "speculative decoding: this smaller GGUF model of the same vocabulary, on this host, proposes "
                      "tokens the model checks in one step each round (docs/speculative.md)");
  cmd->add_option("--draft-max", a->draft_max, "with --model-draft: tokens the draft proposes per round")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->needs(draft_opt);
  for (CLI::Option* o : {conversation_opt, prompts_opt, parallel_opt, recover_opt}) draft_opt->excludes(o);

  out.push_back({cmd, [a, run_tokens_opt] {
                   a->tokens_given = run_tokens_opt->count() > 0;
                   return run_or_chat(*a);
                 }});
}

}  // namespace weft::tools
