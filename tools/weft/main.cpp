// weft: one executable, one subcommand per job. Each cmd_*.cpp declares its
// own options (commands.h); this file parses and runs the one given.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "cli_options.h"
#include "commands.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/version.h"

int main(int argc, char** argv) {
  using namespace weft::tools;
  CLI::App app{"weft: run one model across many machines"};
  app.require_subcommand(1);
  // Checked before the subcommand requirement: `weft --version` alone works.
  app.set_version_flag("--version", [] {
    return std::string("weft ") + weft::version() + " (commit " + weft::git_commit() +
           "), CPU kernels: " + weft::cpu_simd_level();
  });

  Commands commands;
  for (auto add : {add_check_command, add_bench_commands, add_worker_command, add_workers_command, add_gguf_commands,
                   add_demo_command, add_run_command, add_chat_command, add_serve_command, add_perplexity_command,
                   add_quantize_command})
    add(app, commands);

  rewrite_long_short_options(argc, argv);
  CLI11_PARSE(app, argc, argv);
  try {
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft: %s error: %s\n", weft::error_kind_name(e.kind()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 1;
  }
  return 2;
}
