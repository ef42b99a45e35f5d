// Two connected in-memory streams: one bounded byte queue per direction.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "transport/stream.h"
#include "weft/core/error.h"

namespace weft::rpc {

namespace {

// Small writes share chunks of this size instead of one allocation each.
constexpr size_t kChunkBytes = 64 << 10;

// Bytes from one writer to one reader, at most capacity_ of them queued: a
// writer waits for room, so a write larger than the capacity completes as
// the reader drains it. Either side closing wakes both; the reader still
// gets what was queued before the writer closed. Thread-safe.
class ByteQueue {
 public:
  explicit ByteQueue(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

  void write(const char* data, size_t n, size_t total, const std::string& peer, Stream::Deadline deadline) {
    std::unique_lock lock(mutex_);
    while (n > 0) {
      if (!wait(writable_, lock, deadline, [&] { return size_ < capacity_ || writer_closed_ || reader_closed_; })) {
        fail(ErrorKind::disconnected, "rpc",
             peer + ": write of " + std::to_string(total) + " bytes timed out (the peer is not reading)");
      }
      if (writer_closed_ || reader_closed_) {
        fail(ErrorKind::disconnected, "rpc",
             peer + ": connection closed while writing " + std::to_string(total) + " bytes");
      }
      const size_t k = std::min(n, capacity_ - size_);
      if (chunks_.empty() || chunks_.back().capacity() - chunks_.back().size() < k) {
        chunks_.emplace_back();
        chunks_.back().reserve(std::max(k, kChunkBytes));
      }
      chunks_.back().insert(chunks_.back().end(), data, data + k);
      size_ += k;
      data += k;
      n -= k;
      readable_.notify_all();
    }
  }

  void read(char* data, size_t n, const std::string& peer, Stream::Deadline deadline) {
    const size_t total = n;
    std::unique_lock lock(mutex_);
    while (n > 0) {
      if (!wait(readable_, lock, deadline, [&] { return size_ > 0 || writer_closed_ || reader_closed_; })) {
        fail(ErrorKind::disconnected, "rpc",
             peer + ": timed out: " + std::to_string(total - n) + " of " + std::to_string(total) +
                 " bytes arrived before the deadline");
      }
      if (reader_closed_ || size_ == 0) {
        fail(ErrorKind::disconnected, "rpc",
             peer + ": connection closed while reading " + std::to_string(total) + " bytes");
      }
      while (n > 0 && size_ > 0) {
        std::vector<char>& front = chunks_.front();
        const size_t k = std::min(n, front.size() - front_offset_);
        std::memcpy(data, front.data() + front_offset_, k);
        front_offset_ += k;
        size_ -= k;
        data += k;
        n -= k;
        if (front_offset_ == front.size()) {
          chunks_.pop_front();
          front_offset_ = 0;
        }
      }
      writable_.notify_all();
    }
  }

  bool writer_closed() {
    std::lock_guard lock(mutex_);
    return writer_closed_;
  }
  void close_writer() { close(&writer_closed_); }
  void close_reader() { close(&reader_closed_); }

 private:
  // cv.wait until ready() or the deadline (none when Deadline::max()); false on timeout.
  template <class Ready>
  static bool wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Stream::Deadline deadline,
                   Ready ready) {
    if (deadline == Stream::Deadline::max()) {
      cv.wait(lock, ready);
      return true;
    }
    return cv.wait_until(lock, deadline, ready);
  }

  void close(bool* flag) {
    {
      std::lock_guard lock(mutex_);
      *flag = true;
    }
    readable_.notify_all();
    writable_.notify_all();
  }

  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable readable_;
  std::condition_variable writable_;
  std::deque<std::vector<char>> chunks_;  // queued bytes start at chunks_.front()[front_offset_]
  size_t front_offset_ = 0;
  size_t size_ = 0;
  bool writer_closed_ = false;
  bool reader_closed_ = false;
};

// Shared by the two ends (the one place sharing is the point): to_end[i]
// holds the bytes end 1-i wrote for end i; it lives until both ends are gone.
struct PipeState {
  explicit PipeState(size_t capacity) : to_end{ByteQueue(capacity), ByteQueue(capacity)} {}
  ByteQueue to_end[2];
};

class MemoryStream final : public Stream {
 public:
  MemoryStream(std::shared_ptr<PipeState> state, int side)
      : state_(std::move(state)), side_(side), peer_("memory-pipe:" + std::to_string(1 - side)) {}
  // Like closing a socket: the other end reads what is queued, then fails.
  ~MemoryStream() override { shutdown(); }
  MemoryStream(const MemoryStream&) = delete;
  MemoryStream& operator=(const MemoryStream&) = delete;

  void write_all(const void* a, size_t na, const void* b, size_t nb) override {
    ByteQueue& out = state_->to_end[1 - side_];
    if (na > 0) out.write(static_cast<const char*>(a), na, na + nb, peer_, write_deadline_);
    if (nb > 0) out.write(static_cast<const char*>(b), nb, na + nb, peer_, write_deadline_);
  }
  void read_exact(void* data, size_t n) override {
    state_->to_end[side_].read(static_cast<char*>(data), n, peer_, read_deadline_);
  }
  void set_read_deadline(Deadline deadline) override { read_deadline_ = deadline; }
  void set_write_deadline(Deadline deadline) override { write_deadline_ = deadline; }
  bool peer_closed() override { return state_->to_end[side_].writer_closed(); }
  void shutdown() override {
    state_->to_end[1 - side_].close_writer();
    state_->to_end[side_].close_reader();
  }
  std::string peer() const override { return peer_; }

 private:
  const std::shared_ptr<PipeState> state_;
  const int side_;
  const std::string peer_;
  Deadline read_deadline_ = Deadline::max();
  Deadline write_deadline_ = Deadline::max();
};

}  // namespace

std::pair<std::unique_ptr<Stream>, std::unique_ptr<Stream>> memory_pipe(size_t capacity) {
  auto state = std::make_shared<PipeState>(capacity);
  return {std::make_unique<MemoryStream>(state, 0), std::make_unique<MemoryStream>(state, 1)};
}

}  // namespace weft::rpc
