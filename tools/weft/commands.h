// The subcommands of the `weft` executable. Each cmd_*.cpp declares its own
// options and argument struct beside the code that runs it and registers
// itself here; main.cpp only parses and dispatches.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "cli_options.h"

namespace weft::tools {

// A subcommand and what runs it once CLI11 has parsed it (the arguments it
// reads are owned by the closure); run returns the process exit code.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

// Each adds its subcommand(s) to app, in the order `weft --help` lists them.
void add_check_command(CLI::App& app, Commands& out);
void add_bench_commands(CLI::App& app, Commands& out);    // bench ops, gemm, rpc, then:
void add_bench_model_command(CLI::App* bench, Commands& out);
void add_worker_command(CLI::App& app, Commands& out);
void add_workers_command(CLI::App& app, Commands& out);
void add_gguf_commands(CLI::App& app, Commands& out);     // gguf info
void add_demo_command(CLI::App& app, Commands& out);
void add_run_command(CLI::App& app, Commands& out);       // run, and run --conversation through cmd_chat
void add_chat_command(CLI::App& app, Commands& out);
void add_serve_command(CLI::App& app, Commands& out);
void add_perplexity_command(CLI::App& app, Commands& out);
void add_quantize_command(CLI::App& app, Commands& out);

// `weft chat` and `weft run --conversation`: an interactive chat with the
// model's chat template, its history kept in the KV cache between turns
// (weft/serve/conversation.h). Ctrl-C stops a reply; Ctrl-C at the prompt or
// end of input (Ctrl-D) ends the chat with status 0.
struct ChatArgs {
  ModelHostArgs host;
  SamplingArgs sampling;
  int64_t ctx_size = 0;        // KV positions; 0: 4096, at most the model's training context
  int n_tokens = -1;           // most tokens per reply; -1: until the end of generation or of the context
  std::string system;          // the system message
  std::string chat_template;   // NAME (built-in) or FILE; empty: the file's, else chatml
  bool stats = false;          // per turn: tokens evaluated, reused, speeds
  bool recover = false;        // go on after a worker's death (docs/recovery.md)
};
int cmd_chat(const ChatArgs& args);

// `weft run`: generates text from a GGUF model, its layers split over this
// CPU and any workers (in proportion to --split, else by --placement:
// docs/placement.md), streaming tokens to stdout. Its options are declared
// in cmd_run_args.cpp.
struct RunArgs {
  ModelHostArgs host;
  std::string prompt;
  std::string prompt_file;           // the prompt from a file instead
  int n_tokens = 64;                 // tokens to generate (stops early at end of generation)
  SamplingArgs sampling;
  int64_t ctx_size = 0;              // KV positions in all; 0: the prompt and -n tokens (at most the training context)
  bool stats = false;                // speeds and RPC traffic to stderr
  bool special = false;              // special-token strings in the prompt are those tokens
  int parallel = 1;                  // sequences decoded together (the prompt repeated)
  std::string prompts_file;          // one prompt per non-empty line, decoded together
  bool conversation = false;         // --conversation: cmd_chat with the fields that apply (cmd_run_args.cpp)
  bool tokens_given = false;         // -n was given (a chat's default is unlimited)
  std::string system, chat_template; // with conversation
  bool recover = false;              // --recover: go on after a worker's death (docs/recovery.md)
  std::string grammar_file;          // --grammar-file: output constrained by these GBNF rules
  std::string json_schema_file;      // --json-schema: output constrained to JSON valid under this schema
  std::string draft_model;           // --model-draft: speculative decoding with this model on this host
  int draft_max = 8;                 // --draft-max: tokens it proposes per target step
};
int cmd_run(const RunArgs& args);

}  // namespace weft::tools
