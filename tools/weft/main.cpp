// weft: one executable, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "weft/error.h"

int main(int argc, char** argv) {
  using namespace weft::tools;
  CLI::App app{"weft: run one model across many machines"};
  app.require_subcommand(1);

  CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand("check", "run the backend conformance suite against a float64 reference");
  check_cmd->add_option("--backend", check.backends, "backend(s) to check, e.g. cpu")->capture_default_str();
  check_cmd->add_option("--filter", check.filter, "only cases whose name contains this");
  check_cmd->add_option("-t,--threads", check.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  check_cmd->add_flag("-q,--quiet", check.quiet, "print only failures and the summary");

  CLI::App* bench_cmd = app.add_subcommand("bench", "benchmarks that report ratios against this machine's limits");
  bench_cmd->require_subcommand(1);
  BenchOpsArgs bench_ops;
  CLI::App* bench_ops_cmd = bench_cmd->add_subcommand("ops", "time each op's kernel against memory bandwidth");
  bench_ops_cmd->add_option("-t,--threads", bench_ops.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  bench_ops_cmd->add_option("--filter", bench_ops.filter, "only benchmarks whose name contains this");
  bench_ops_cmd->add_option("--min-time", bench_ops.min_seconds, "seconds per measurement")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    if (check_cmd->parsed()) return cmd_check(check);
    if (bench_ops_cmd->parsed()) return cmd_bench_ops(bench_ops);
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft: %s error: %s\n", weft::error_kind_name(e.kind()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 1;
  }
  return 2;
}
