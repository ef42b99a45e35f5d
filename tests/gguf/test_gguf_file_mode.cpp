// The mode of the files GgufWriter writes: 0666 & ~umask, as open(2) with
// 0666 would give (the writer's mkstemp alone gives 0600), for one-file and
// split outputs; and the parsing of /proc/self/status's Umask line the
// writer reads the umask from.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/file_mode.h"
#include "weft/gguf/gguf.h"

namespace fs = std::filesystem;
using namespace weft;

namespace {

// Sets the process umask for one scope (no other thread of the test runs
// then), restoring the previous one.
class FileModeUmaskScope {
 public:
  explicit FileModeUmaskScope(mode_t mask) : old_(::umask(mask)) {}
  ~FileModeUmaskScope() { ::umask(old_); }
  FileModeUmaskScope(const FileModeUmaskScope&) = delete;
  FileModeUmaskScope& operator=(const FileModeUmaskScope&) = delete;

 private:
  mode_t old_;
};

struct FileModeTempDir {
  fs::path path = fs::temp_directory_path() /
                  ("weft_gguf_mode_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
  FileModeTempDir() { fs::create_directories(path); }
  ~FileModeTempDir() { fs::remove_all(path); }
};

mode_t file_mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

GgufWriter file_mode_writer(const std::vector<float>& data) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  const int64_t ne[1] = {static_cast<int64_t>(data.size())};
  w.add_tensor("a", DType::f32, ne, data.data());
  w.add_tensor("b", DType::f32, ne, data.data());
  return w;
}

}  // namespace

TEST(GgufFileMode, OneFileTakesTheUmask) {
  FileModeTempDir dir;
  const std::vector<float> data(64, 1.5f);
  const GgufWriter w = file_mode_writer(data);
  // Expected modes written out rather than computed: 0666 & ~mask.
  const std::pair<mode_t, mode_t> cases[] = {{022, 0644}, {077, 0600}, {002, 0664}, {0, 0666}, {0277, 0400}};
  for (const auto& [mask, want] : cases) {
    const std::string path = (dir.path / ("m" + std::to_string(mask) + ".gguf")).string();
    {
      FileModeUmaskScope scope(mask);
      w.write(path);
    }
    EXPECT_EQ(file_mode_of(path), want) << "umask 0" << std::oct << mask;
    // A file written over an existing one takes the umask, not the old mode.
    ::chmod(path.c_str(), 0600);
    {
      FileModeUmaskScope scope(mask);
      w.write(path);
    }
    EXPECT_EQ(file_mode_of(path), want) << "rewritten, umask 0" << std::oct << mask;
    EXPECT_EQ(GgufFile::open(path)->tensors().size(), 2u);
  }
}

TEST(GgufFileMode, SplitPartsTakeTheUmask) {
  FileModeTempDir dir;
  const std::vector<float> data(64, -2.0f);
  const GgufWriter w = file_mode_writer(data);
  GgufSplitLimits limits;
  limits.max_tensors = 1;
  for (const auto& [mask, want] : {std::pair<mode_t, mode_t>{022, 0644}, {077, 0600}}) {
    std::vector<std::string> parts;
    {
      FileModeUmaskScope scope(mask);
      parts = w.write_split((dir.path / ("s" + std::to_string(mask))).string(), limits);
    }
    ASSERT_EQ(parts.size(), 2u);
    for (const std::string& part : parts) EXPECT_EQ(file_mode_of(part), want) << part;
  }
}

TEST(GgufFileMode, NewFileModeFollowsTheCurrentUmask) {
  for (const mode_t mask : {mode_t{022}, mode_t{077}, mode_t{027}}) {
    FileModeUmaskScope scope(mask);
    EXPECT_EQ(detail::new_file_mode(), 0666 & ~mask) << "umask 0" << std::oct << mask;
  }
}

TEST(GgufFileMode, UmaskLineParsed) {
  EXPECT_EQ(detail::umask_from_status("Name:\tweft\nUmask:\t0022\nState:\tR (running)\n"), mode_t{022});
  EXPECT_EQ(detail::umask_from_status("Umask:\t0077"), mode_t{077});  // last line, no newline
  EXPECT_EQ(detail::umask_from_status("Name:\tx\nUmask: 0002 \n"), mode_t{02});
  EXPECT_EQ(detail::umask_from_status("Umask:\t0\n"), mode_t{0});
  EXPECT_EQ(detail::umask_from_status("Umask:\t0777\n"), mode_t{0777});
}

TEST(GgufFileMode, UmaskLineAbsentOrMalformed) {
  EXPECT_EQ(detail::umask_from_status(""), std::nullopt);
  EXPECT_EQ(detail::umask_from_status("Name:\tweft\nState:\tR\n"), std::nullopt);
  EXPECT_EQ(detail::umask_from_status("Umask:\t\n"), std::nullopt);
  EXPECT_EQ(detail::umask_from_status("Umask:\t0089\n"), std::nullopt);   // not octal
  EXPECT_EQ(detail::umask_from_status("Umask:\t1777\n"), std::nullopt);   // past 0777
  EXPECT_EQ(detail::umask_from_status("Umask:\t000022\n"), std::nullopt);  // too long
  EXPECT_EQ(detail::umask_from_status("XUmask:\t0022\n"), std::nullopt);   // not at a line's start
}
