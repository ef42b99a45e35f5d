// ListeningProcess (src/runtime/listening_process.h): the child-process
// helper of `weft demo` and the RPC tests, run against /bin/sh scripts whose
// output and exit status are known.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/listening_process.h"
#include "weft/core/error.h"

namespace {

using weft::ListeningProcess;
using weft::ListeningProcessOptions;

ListeningProcessOptions shell(const std::string& script) {
  ListeningProcessOptions o;
  o.program = "/bin/sh";
  o.argv = {"sh", "-c", script};
  o.ready_timeout = std::chrono::seconds(10);
  return o;
}

// The message of the disconnected error the constructor throws for o.
std::string refusal(ListeningProcessOptions o) {
  try {
    ListeningProcess p(std::move(o));
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::disconnected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "the child was accepted";
  return "";
}

TEST(ListeningProcess, ReadsTheAddressAndStopsWithTheSignal) {
  ListeningProcess p(shell("echo starting; echo 'worker listening on 127.0.0.1:50123 '; exec sleep 30"));
  EXPECT_EQ(p.address(), "127.0.0.1:50123");
  EXPECT_GT(p.pid(), 0);
  EXPECT_EQ(p.stop(), 128 + SIGTERM);  // sleep ends by the signal
  EXPECT_EQ(p.stop(), -1);             // once only
}

TEST(ListeningProcess, StopSignalIsTheOneGiven) {
  ListeningProcessOptions o = shell("echo listening on x:1; exec sleep 30");
  o.stop_signal = SIGKILL;
  ListeningProcess p(std::move(o));
  EXPECT_EQ(p.stop(), 128 + SIGKILL);
}

// True once pid is a zombie (ended, not yet reaped), within 10 s.
bool ended(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && line.compare(paren + 2, 1, "Z") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ListeningProcess, AnExitedChildReportsItsStatus) {
  ListeningProcess p(shell("echo listening on h:2; exit 7"));
  EXPECT_EQ(p.address(), "h:2");
  ASSERT_TRUE(ended(p.pid()));
  EXPECT_EQ(p.stop(), 7);  // it had ended already: SIGTERM to a zombie changes nothing
}

TEST(ListeningProcess, PassesTheEnvironmentGiven) {
  ListeningProcessOptions o = shell("echo listening on $WEFT_TEST_ADDRESS; exec sleep 30");
  o.env = {"WEFT_TEST_ADDRESS=10.0.0.9:7"};
  ListeningProcess p(std::move(o));
  EXPECT_EQ(p.address(), "10.0.0.9:7");
}

TEST(ListeningProcess, AChildThatEndsWithoutTheLineIsAnError) {
  const std::string m = refusal(shell("echo hello there; exit 3"));
  EXPECT_NE(m.find("hello there"), std::string::npos) << m;
  EXPECT_NE(m.find("status 3"), std::string::npos) << m;
  EXPECT_NE(m.find("/bin/sh"), std::string::npos) << m;
}

TEST(ListeningProcess, AnUnfinishedLineDoesNotCount) {
  // The key without its newline, then the child ends: no address.
  EXPECT_FALSE(refusal(shell("printf 'listening on 1.2.3.4:5'; exit 0")).empty());
}

TEST(ListeningProcess, ASilentChildTimesOutAndIsStopped) {
  ListeningProcessOptions o = shell("exec sleep 30");
  o.ready_timeout = std::chrono::milliseconds(200);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = refusal(std::move(o));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(m.find("status " + std::to_string(128 + SIGTERM)), std::string::npos) << m;
}

TEST(ListeningProcess, AMissingProgramIsAnError) {
  ListeningProcessOptions o;
  o.program = "/nonexistent/weft-no-such-program";
  o.argv = {"x"};
  const std::string m = refusal(std::move(o));
  EXPECT_NE(m.find("status 127"), std::string::npos) << m;
}

}  // namespace
