// Shared option kinds of the `weft` commands (cli_options.h).
#include "cli_options.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "weft/core/byte_size.h"
#include "weft/core/error.h"
#include "weft/runtime/session.h"

namespace weft::tools {
namespace {

// "0.95" rather than std::to_string's "0.950000".
std::string shown(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void bad_flag(const char* what, const char* flag, double value, const std::string& why) {
  fail(ErrorKind::invalid_input, what, std::string(flag) + " " + shown(value) + " " + why);
}

}  // namespace

CLI::Option* add_size_option(CLI::App* cmd, const std::string& name, size_t& target, const std::string& description) {
  // The flag's long name, for messages: "--mem" of "-m,--mem".
  const std::string flag = name.substr(name.rfind(',') == std::string::npos ? 0 : name.rfind(',') + 1);
  return cmd
      ->add_option_function<std::string>(
          name,
          [&target, flag](const std::string& text) {
            try {
              target = static_cast<size_t>(parse_byte_size(flag, text));
            } catch (const Error& e) {
              throw CLI::ValidationError(e.what());
            }
          },
          description + " (bytes, or with a unit: 64MiB, 4G, 512k; units are powers of 1024)")
      ->type_name("SIZE");
}

void add_sampling_options(CLI::App* cmd, SamplingArgs& a) {
  cmd->add_option("--temp,--temperature", a.temperature, "sampling temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", a.top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
  cmd->add_option("--top-p", a.top_p, "keep the fewest most likely tokens whose probability reaches p, in (0, 1] (1: all)")
      ->capture_default_str();
  cmd->add_option("--min-p", a.min_p, "drop tokens less likely than p times the most likely, in [0, 1] (0: none)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "sampler seed")->capture_default_str();
  cmd->add_option("--repeat-penalty", a.repeat_penalty,
                  "divide a recent token's positive logit by this, multiply a negative one (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", a.repeat_last_n,
                  "recent tokens (the prompt's tail, then the reply) the penalties look at (0: none, -1: the context)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", a.presence_penalty, "subtracted once from a recent token's logit (0: off)")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", a.frequency_penalty,
                  "subtracted from a recent token's logit per time it occurs (0: off)")
      ->capture_default_str();
}

model::SamplerOptions sampler_options(const SamplingArgs& a, int64_t n_ctx, const char* what) {
  if (!(a.temperature >= 0) || std::isinf(a.temperature)) bad_flag(what, "--temp", a.temperature, "is not a number >= 0");
  if (a.top_k < 0) bad_flag(what, "--top-k", a.top_k, "is negative (0 turns top-k off)");
  if (!(a.top_p > 0 && a.top_p <= 1)) bad_flag(what, "--top-p", a.top_p, "is outside (0, 1]");
  if (!(a.min_p >= 0 && a.min_p <= 1)) bad_flag(what, "--min-p", a.min_p, "is outside [0, 1]");
  if (!(a.repeat_penalty > 0) || std::isinf(a.repeat_penalty))
    bad_flag(what, "--repeat-penalty", a.repeat_penalty, "is not a positive number (1 turns it off)");
  if (a.repeat_last_n < -1) bad_flag(what, "--repeat-last-n", a.repeat_last_n, "is below -1 (-1: the whole context)");
  if (!std::isfinite(a.presence_penalty)) bad_flag(what, "--presence-penalty", a.presence_penalty, "is not finite");
  if (!std::isfinite(a.frequency_penalty)) bad_flag(what, "--frequency-penalty", a.frequency_penalty, "is not finite");
  model::SamplerOptions o;
  o.temperature = a.temperature;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.min_p = a.min_p;
  o.seed = a.seed;
  o.repetition_penalty = a.repeat_penalty;
  o.repetition_window =
      a.repeat_last_n == -1 ? static_cast<int>(std::min<int64_t>(n_ctx, INT32_MAX)) : a.repeat_last_n;
  o.presence_penalty = a.presence_penalty;
  o.frequency_penalty = a.frequency_penalty;
  return o;
}

void rewrite_long_short_options(int argc, char** argv) {
  static char conversation[] = "--conversation";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return;
    if (std::strcmp(argv[i], "-cnv") == 0) argv[i] = conversation;
  }
}

std::string read_text_file(const std::string& path, const char* what) {
  constexpr size_t kMaxBytes = size_t{1} << 30;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::invalid_input, what, "cannot open " + path + ": " + std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(ErrorKind::invalid_input, what, "cannot stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(ErrorKind::invalid_input, what, path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxBytes)
    fail(ErrorKind::invalid_input, what,
         path + " has " + format_bytes(static_cast<size_t>(st.st_size)) + ", over the limit of " +
             format_bytes(kMaxBytes));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::invalid_input, what, "cannot read " + path + ": " + std::strerror(errno));
    if (n == 0)
      fail(ErrorKind::invalid_input, what,
           path + " ended after " + std::to_string(got) + " of " + std::to_string(text.size()) + " bytes");
    got += static_cast<size_t>(n);
  }
  return text;
}

}  // namespace weft::tools
