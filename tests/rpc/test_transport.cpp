// The transports: every Stream behaviour runs against loopback TCP (IPv4
// and IPv6) and the in-memory pipe; then what only TCP has (connect, listen,
// peer names, read timeouts).
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loopback_bandwidth.h"
#include "sanitized.h"
#include "transport/stream.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using test::kSanitized;

// Sanitized builds check every access and run several times slower.
constexpr size_t kBigBytes = kSanitized ? size_t{32} << 20 : size_t{256} << 20;
// More than the 16 MiB the socket buffers of a connection hold.
constexpr size_t kHugeWriteBytes = kSanitized ? size_t{32} << 20 : size_t{64} << 20;

// How long a blocked call waits when nothing wakes it, in the tests that
// show something does: a woken call returns long before this however loaded
// the machine, and one left blocked fails the test (after this long) instead
// of passing a wall-clock bound that a slow machine could also miss.
constexpr auto kTransportNeverWoken = 30s;

// Runs f on its own thread; join() waits and returns what f threw (null if
// nothing). wait_blocked() waits until that thread sleeps in the kernel (its
// /proc state S or D): f has reached the call that blocks, so a test acts on
// a blocked call, not on a guess that 50 ms were enough. finished_within()
// waits for f to return (an event, not a poll of the clock).
class Background {
 public:
  explicit Background(std::function<void()> f)
      : thread_([this, f = std::move(f)] {
          tid_.store(static_cast<pid_t>(::syscall(SYS_gettid)));
          try {
            f();
          } catch (...) {
            error_ = std::current_exception();
          }
          {
            std::lock_guard lock(finished_mutex_);
            finished_ = true;
          }
          finished_changed_.notify_all();
        }) {}
  ~Background() {
    if (thread_.joinable()) thread_.join();
  }
  std::exception_ptr join() {
    thread_.join();
    return error_;
  }
  // True once the thread is seen blocked (polled every millisecond, up to 10 s).
  bool wait_blocked() const {
    for (int i = 0; i < 10000; ++i) {
      const pid_t tid = tid_.load();
      if (tid != 0) {
        std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
        std::string line;
        std::getline(stat, line);
        const size_t paren = line.rfind(')');  // the name may hold spaces
        if (paren != std::string::npos && paren + 2 < line.size() &&
            (line[paren + 2] == 'S' || line[paren + 2] == 'D'))
          return true;
      }
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }

  // True once f has returned; false if it is still running after limit (the
  // caller then unblocks it its own way before join()).
  bool finished_within(Clock::duration limit) {
    std::unique_lock lock(finished_mutex_);
    return finished_changed_.wait_for(lock, limit, [&] { return finished_; });
  }

 private:
  std::exception_ptr error_;
  std::atomic<pid_t> tid_{0};
  std::mutex finished_mutex_;
  std::condition_variable finished_changed_;
  bool finished_ = false;  // guarded by finished_mutex_
  std::thread thread_;     // last: starts once everything above exists
};

// The message of an Error(disconnected), or a failure naming what came instead.
::testing::AssertionResult is_disconnected(std::exception_ptr error, std::string* message = nullptr) {
  if (!error) return ::testing::AssertionFailure() << "nothing was thrown";
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (message) *message = e.what();
    if (e.kind() == ErrorKind::disconnected) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "kind " << error_kind_name(e.kind()) << ": " << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a weft::Error: " << e.what();
  }
  return ::testing::AssertionFailure();
}

std::exception_ptr thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

// After a failed check: ends a call its wake-up left blocked (so that the
// test can join its thread); a transport the bug broke may throw, ignored.
void transport_try_unblock(const std::function<void()>& f) {
  (void)thrown_by(f);
}

bool has_ipv6_loopback() {
  static const bool has = [] { return thrown_by([] { tcp_listen("::1", 0); }) == nullptr; }();
  return has;
}

enum class Kind { tcp4, tcp6, memory };

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::tcp4: return "Tcp4";
    case Kind::tcp6: return "Tcp6";
    case Kind::memory: return "Memory";
  }
  return "Unknown";
}

// Two connected ends: for TCP, a = the connecting side, b = the accepted one.
struct Ends {
  std::unique_ptr<Stream> a;
  std::unique_ptr<Stream> b;
};

Ends connect_ends(Kind kind, const TcpOptions& options = {}) {
  if (kind == Kind::memory) {
    auto [a, b] = memory_pipe();
    return {std::move(a), std::move(b)};
  }
  const std::unique_ptr<Listener> listener = tcp_listen(kind == Kind::tcp4 ? "127.0.0.1" : "::1", 0);
  // connect() completes through the backlog before accept() takes it.
  std::unique_ptr<Stream> a = tcp_connect(kind == Kind::tcp4 ? "127.0.0.1" : "::1", listener->port(), options);
  std::unique_ptr<Stream> b = listener->accept();
  return {std::move(a), std::move(b)};
}

// A reproducible byte stream, made and checked in 8-byte words.
struct Pattern {
  explicit Pattern(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  uint64_t state;
};

uint64_t fold(uint64_t hash, const char* data, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    hash = (hash ^ word) * 0x100000001B3ull;
  }
  return hash;
}

// Sends bytes of Pattern(seed) as gather writes of 1 MiB (40-byte head, then
// the rest); returns the checksum of what it sent.
uint64_t send_pattern(Stream& out, size_t bytes, uint64_t seed) {
  Pattern pattern(seed);
  std::vector<char> chunk(size_t{1} << 20);
  uint64_t hash = 0;
  for (size_t left = bytes; left > 0;) {
    const size_t n = std::min(left, chunk.size());
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t word = pattern.next();
      std::memcpy(chunk.data() + i, &word, 8);
    }
    hash = fold(hash, chunk.data(), n);
    out.write_all(chunk.data(), 40, chunk.data() + 40, n - 40);
    left -= n;
  }
  return hash;
}

// Reads bytes in reads of other sizes than the writes; returns their checksum.
uint64_t receive_checksum(Stream& in, size_t bytes) {
  std::vector<char> chunk(size_t{800} << 10);
  uint64_t hash = 0;
  size_t i = 0;
  for (size_t left = bytes; left > 0; ++i) {
    const size_t n = std::min(left, chunk.size() - 8 * (i % 5));
    in.read_exact(chunk.data(), n);
    hash = fold(hash, chunk.data(), n);
    left -= n;
  }
  return hash;
}

class StreamTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::tcp6 && !has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
    Ends ends = connect_ends(GetParam());
    a_ = std::move(ends.a);
    b_ = std::move(ends.b);
  }

  std::unique_ptr<Stream> a_;
  std::unique_ptr<Stream> b_;
};

TEST_P(StreamTest, GatherWriteArrivesInOrderBothWays) {
  const char head[] = "HEAD";
  const char body[] = "body!";
  a_->write_all(head, 4, body, 5);
  a_->write_all(nullptr, 0);  // nothing to send is fine
  char got[9];
  b_->read_exact(got, 9);
  EXPECT_EQ(std::string(got, 9), "HEADbody!");
  b_->read_exact(got, 0);

  b_->write_all("reply", 5);
  a_->read_exact(got, 5);
  EXPECT_EQ(std::string(got, 5), "reply");
}

TEST_P(StreamTest, BigTransferBothDirectionsAtOnce) {
  uint64_t sent_ab = 0, sent_ba = 0, got_ab = 0, got_ba = 0;
  Background send_ab([&] { sent_ab = send_pattern(*a_, kBigBytes, 1); });
  Background send_ba([&] { sent_ba = send_pattern(*b_, kBigBytes, 2); });
  Background receive_ab([&] { got_ab = receive_checksum(*b_, kBigBytes); });
  Background receive_ba([&] { got_ba = receive_checksum(*a_, kBigBytes); });
  for (Background* t : {&send_ab, &send_ba, &receive_ab, &receive_ba}) {
    const std::exception_ptr error = t->join();
    EXPECT_FALSE(error) << is_disconnected(error).message();
  }
  EXPECT_EQ(got_ab, sent_ab);
  EXPECT_EQ(got_ba, sent_ba);
  EXPECT_NE(sent_ab, sent_ba);
}

TEST_P(StreamTest, ManySmallWritesThenOneHuge) {
  constexpr int kSmallWrites = 20000;
  size_t small_bytes = 0;
  std::vector<char> expected;
  for (int i = 0; i < kSmallWrites; ++i) {
    for (int k = 0; k < 1 + i % 64; ++k) expected.push_back(static_cast<char>(i + k));
  }
  small_bytes = expected.size();
  std::vector<char> huge(kHugeWriteBytes);
  Pattern pattern(3);
  for (size_t i = 0; i < huge.size(); i += 8) {
    const uint64_t word = pattern.next();
    std::memcpy(huge.data() + i, &word, 8);
  }

  Background writer([&] {
    size_t at = 0;
    for (int i = 0; i < kSmallWrites; ++i) {
      const size_t n = 1 + static_cast<size_t>(i % 64);
      const size_t split = i % 3 == 0 ? n : n / 2;  // some plain, some gathered
      a_->write_all(expected.data() + at, split, expected.data() + at + split, n - split);
      at += n;
    }
    a_->write_all(huge.data(), 16, huge.data() + 16, huge.size() - 16);
  });

  std::vector<char> got(small_bytes);
  for (size_t at = 0; at < small_bytes;) {  // reads that cut across writes
    const size_t n = std::min<size_t>(1000, small_bytes - at);
    b_->read_exact(got.data() + at, n);
    at += n;
  }
  EXPECT_EQ(got, expected);
  std::vector<char> huge_got(huge.size());
  b_->read_exact(huge_got.data(), huge_got.size());  // one read, longer than any buffer
  EXPECT_TRUE(huge_got == huge);
  const std::exception_ptr error = writer.join();
  EXPECT_FALSE(error) << is_disconnected(error).message();
}

TEST_P(StreamTest, ReaderGetsQueuedBytesThenEndOfStream) {
  const std::string peer = b_->peer();
  a_->write_all("0123456789", 10);
  a_.reset();  // closes this end
  char got[10];
  b_->read_exact(got, 10);
  EXPECT_EQ(std::string(got, 10), "0123456789");
  std::string message;
  EXPECT_TRUE(is_disconnected(thrown_by([&] { b_->read_exact(got, 1); }), &message));
  EXPECT_NE(message.find("[rpc] " + peer + ": connection closed while reading 1 bytes"), std::string::npos) << message;
}

TEST_P(StreamTest, ReadLongerThanWhatIsLeftFails) {
  a_->write_all("abc", 3);
  a_->shutdown();
  char got[8];
  EXPECT_TRUE(is_disconnected(thrown_by([&] { b_->read_exact(got, 8); })));
}

TEST_P(StreamTest, WritesFailOnceThePeerIsGone) {
  b_.reset();
  const std::vector<char> data(64 << 10);
  // TCP may take the first writes before the peer's reset arrives: they are
  // retried until one fails, within a generous deadline (not a count of
  // tries that a loaded machine could use up before the reset lands).
  const std::exception_ptr error = thrown_by([&] {
    const auto deadline = Clock::now() + 10s;
    for (int i = 0; Clock::now() < deadline; ++i) {
      a_->write_all(data.data(), data.size());
      if (i > 0) std::this_thread::sleep_for(1ms);
    }
  });
  std::string message;
  EXPECT_TRUE(is_disconnected(error, &message));
  EXPECT_NE(message.find(a_->peer()), std::string::npos) << message;
}

// The read has no timeout and no byte comes: only the shutdown can end it.
TEST_P(StreamTest, ShutdownWakesABlockedRead) {
  Background reader([&] {
    char byte;
    a_->read_exact(&byte, 1);
  });
  ASSERT_TRUE(reader.wait_blocked());
  a_->shutdown();
  const bool woke = reader.finished_within(kTransportNeverWoken);
  if (!woke) transport_try_unblock([&] { b_->write_all("x", 1); });
  ASSERT_TRUE(woke) << "the read was still blocked " << kTransportNeverWoken.count() << " s after the shutdown";
  EXPECT_TRUE(is_disconnected(reader.join()));
  a_->shutdown();  // idempotent
  char byte;       // the other end sees the stream end
  EXPECT_TRUE(is_disconnected(thrown_by([&] { b_->read_exact(&byte, 1); })));
}

TEST_P(StreamTest, ShutdownWakesABlockedWrite) {
  const std::vector<char> data(kHugeWriteBytes);  // more than the buffers between the ends hold
  Background writer([&] { a_->write_all(data.data(), data.size()); });
  ASSERT_TRUE(writer.wait_blocked());
  a_->shutdown();  // and nobody reads: only the shutdown can end the write
  const bool woke = writer.finished_within(kTransportNeverWoken);
  if (!woke) {
    transport_try_unblock([&] {
      std::vector<char> sink(data.size());
      b_->read_exact(sink.data(), sink.size());
    });
  }
  ASSERT_TRUE(woke) << "the write was still blocked " << kTransportNeverWoken.count() << " s after the shutdown";
  std::string message;
  EXPECT_TRUE(is_disconnected(writer.join(), &message));
  // TCP's user timeout (15 s unacknowledged) would end it too, as "timed out".
  EXPECT_EQ(message.find(std::strerror(ETIMEDOUT)), std::string::npos) << message;
  EXPECT_EQ(message.find("timed out"), std::string::npos) << message;
}

TEST_P(StreamTest, PeerShutdownWakesABlockedRead) {
  Background reader([&] {
    char byte;
    b_->read_exact(&byte, 1);
  });
  ASSERT_TRUE(reader.wait_blocked());
  a_->shutdown();
  EXPECT_TRUE(is_disconnected(reader.join()));
}

INSTANTIATE_TEST_SUITE_P(Transports, StreamTest, ::testing::Values(Kind::tcp4, Kind::tcp6, Kind::memory), kind_name);

TEST(MemoryPipe, WriterWaitsForASlowReader) {
  auto [a, b] = memory_pipe(1024);
  std::atomic<bool> written{false};
  std::vector<char> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i);
  Background writer([&] {
    a->write_all(data.data(), data.size());  // four times the capacity
    written = true;
  });
  ASSERT_TRUE(writer.wait_blocked());  // the pipe is full: the writer waits for the reader
  EXPECT_FALSE(written.load());
  std::vector<char> got(data.size());
  b->read_exact(got.data(), got.size());
  EXPECT_FALSE(writer.join());
  EXPECT_TRUE(written.load());
  EXPECT_EQ(got, data);
}

TEST(MemoryPipe, WritesToAClosedEndFailAtOnce) {
  auto [a, b] = memory_pipe();
  b->shutdown();
  EXPECT_TRUE(is_disconnected(thrown_by([&] { a->write_all("x", 1); })));
  EXPECT_TRUE(is_disconnected(thrown_by([&] { b->write_all("x", 1); })));
}

TEST(Tcp, PeerNamesAreHostColonPort) {
  const auto listener = tcp_listen("127.0.0.1", 0);
  ASSERT_NE(listener->port(), 0);
  const auto client = tcp_connect("127.0.0.1", listener->port());
  const auto server = listener->accept();
  EXPECT_EQ(client->peer(), "127.0.0.1:" + std::to_string(listener->port()));
  EXPECT_EQ(server->peer().rfind("127.0.0.1:", 0), 0u) << server->peer();
}

TEST(Tcp, Ipv6LiteralWithOrWithoutBrackets) {
  if (!has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  const auto listener = tcp_listen("[::1]", 0);
  const std::string port = std::to_string(listener->port());
  const auto bracketed = tcp_connect("[::1]", listener->port());
  const auto bare = tcp_connect("::1", listener->port());
  EXPECT_EQ(bracketed->peer(), "[::1]:" + port);
  EXPECT_EQ(bare->peer(), "[::1]:" + port);
  EXPECT_EQ(listener->accept()->peer().rfind("[::1]:", 0), 0u);
}

TEST(Tcp, HostNameAndAnyAddress) {
  const auto any4 = tcp_listen("0.0.0.0", 0);
  const auto by_name = tcp_connect("localhost", any4->port());  // may try ::1 first, then 127.0.0.1
  by_name->write_all("n", 1);
  char byte = 0;
  any4->accept()->read_exact(&byte, 1);
  EXPECT_EQ(byte, 'n');
  if (!has_ipv6_loopback()) return;
  const auto any6 = tcp_listen("::", 0);  // both families
  const auto v4 = tcp_connect("127.0.0.1", any6->port());
  EXPECT_EQ(any6->accept()->peer().rfind("127.0.0.1:", 0), 0u);
  const auto v6 = tcp_connect("::1", any6->port());
  EXPECT_EQ(any6->accept()->peer().rfind("[::1]:", 0), 0u);
}

// Quickly: the refusal ends the connect, not its (here 30 s) timeout.
TEST(Tcp, ConnectToAClosedPortFailsQuickly) {
  uint16_t port = 0;
  {
    const auto listener = tcp_listen("127.0.0.1", 0);
    port = listener->port();
  }
  TcpOptions options;
  options.connect_timeout = kTransportNeverWoken;
  const auto start = Clock::now();
  std::string message;
  EXPECT_TRUE(is_disconnected(thrown_by([&] { tcp_connect("127.0.0.1", port, options); }), &message));
  EXPECT_LT(Clock::now() - start, kTransportNeverWoken / 2);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(ECONNREFUSED)), std::string::npos) << message;
  EXPECT_EQ(message.find("timed out"), std::string::npos) << message;
}

TEST(Tcp, ListenOnAPortInUseFails) {
  const auto listener = tcp_listen("127.0.0.1", 0);
  EXPECT_THROW(tcp_listen("127.0.0.1", listener->port()), Error);
}

TEST(Tcp, ReadTimeout) {
  TcpOptions options;
  options.read_timeout = 100ms;
  Ends ends = connect_ends(Kind::tcp4, options);
  ends.b->write_all("ok", 2);
  char got[2];
  ends.a->read_exact(got, 2);  // data within the timeout is fine
  // The backstop: a read that ignored its timeout would end at this deadline
  // instead, saying "timed out" (and not before 30 s).
  ends.a->set_read_deadline(Clock::now() + kTransportNeverWoken);
  const auto start = Clock::now();
  std::string message;
  EXPECT_TRUE(is_disconnected(thrown_by([&] { ends.a->read_exact(got, 1); }), &message));
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, 90ms);
  EXPECT_LT(waited, kTransportNeverWoken / 2);
  EXPECT_NE(message.find("no data for 100 ms"), std::string::npos) << message;
}

TEST(Tcp, ListenerCloseWakesAccept) {
  const auto listener = tcp_listen("127.0.0.1", 0);
  std::unique_ptr<Stream> accepted;
  Background acceptor([&] { accepted = listener->accept(); });
  ASSERT_TRUE(acceptor.wait_blocked());
  listener->close();  // nobody connects: only the close can end the accept
  const bool woke = acceptor.finished_within(kTransportNeverWoken);
  if (!woke) transport_try_unblock([&] { tcp_connect("127.0.0.1", listener->port()); });
  EXPECT_TRUE(woke) << "accept was still blocked " << kTransportNeverWoken.count() << " s after the close";
  EXPECT_FALSE(acceptor.join());
  EXPECT_EQ(accepted, nullptr);
  EXPECT_EQ(listener->accept(), nullptr);  // and at once from now on
  listener->close();
  EXPECT_TRUE(is_disconnected(thrown_by([&] { tcp_connect("127.0.0.1", listener->port()); })));
}

TEST(Tcp, LoopbackBandwidthIsMeasured) {
  EXPECT_GT(measure_loopback_tcp_bandwidth(size_t{8} << 20), 0.0);
}

}  // namespace
}  // namespace weft::rpc
