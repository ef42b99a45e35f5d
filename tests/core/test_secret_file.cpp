// read_secret_file (include/weft/core/secret_file.h): the one reader of the
// auth-token and API-key files, checked against the rules its header states.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "weft/core/error.h"
#include "weft/core/secret_file.h"

namespace {

namespace fs = std::filesystem;

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_secret_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

  // The message of the invalid_input error read_secret_file throws for path.
  static std::string refusal(const std::string& path) {
    try {
      weft::read_secret_file(path, "test");
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
      return e.what();
    }
    ADD_FAILURE() << "accepted " << path;
    return "";
  }

  fs::path dir_;
};

TEST_F(SecretFile, TrimsTheNewlineAndSurroundingWhitespace) {
  EXPECT_EQ(weft::read_secret_file(write("a", "s3cret\n"), "test"), "s3cret");
  EXPECT_EQ(weft::read_secret_file(write("b", "s3cret\r\n"), "test"), "s3cret");
  EXPECT_EQ(weft::read_secret_file(write("c", "  \ttok en\t \n\n"), "test"), "tok en");
  EXPECT_EQ(weft::read_secret_file(write("d", "no-newline"), "test"), "no-newline");
}

TEST_F(SecretFile, RefusesAMissingFileNamingIt) {
  const std::string path = (dir_ / "absent").string();
  const std::string m = refusal(path);
  EXPECT_NE(m.find("cannot read"), std::string::npos) << m;
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("[test]"), std::string::npos) << m;
}

TEST_F(SecretFile, RefusesAnEmptyOrBlankFile) {
  for (const std::string bytes : {"", "\n", " \t\r\n "}) {
    const std::string m = refusal(write("blank", bytes));
    EXPECT_NE(m.find("is empty"), std::string::npos) << m;
  }
}

TEST_F(SecretFile, RefusesTwoLines) {
  const std::string m = refusal(write("two", "first\nsecond\n"));
  EXPECT_NE(m.find("one line"), std::string::npos) << m;
}

TEST_F(SecretFile, AcceptsTheCapAndRefusesOneByteMore) {
  const std::string at_cap(weft::kMaxSecretFileBytes, 'k');
  EXPECT_EQ(weft::read_secret_file(write("cap", at_cap), "test"), at_cap);
  // Whitespace counts too: the cap bounds what is read, not what is kept.
  const std::string m = refusal(write("over", at_cap + "\n"));
  EXPECT_NE(m.find("more than 4096 bytes"), std::string::npos) << m;
  EXPECT_FALSE(refusal(write("huge", std::string(1 << 20, 'k'))).empty());
}

}  // namespace
