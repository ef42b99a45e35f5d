#include "server/tensor_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "weft/core/error.h"

namespace weft::rpc {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTempPrefix = ".tmp-";

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// "<32 hex>-<decimal size>" -> size; false for any other name.
bool parse_name(const std::string& name, uint64_t& size) {
  if (name.size() < 34 || name[32] != '-') return false;
  if (!std::all_of(name.begin(), name.begin() + 32, is_hex_digit)) return false;
  const char* first = name.data() + 33;
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(first, last, size);
  return ec == std::errc() && end == last;
}

bool write_all_fd(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all_fd(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::read(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// A name no other writer (thread or process) uses at the same time.
std::string temp_name(const std::string& name) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  const size_t tid = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return std::string(kTempPrefix) + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(tid % 1000000) +
         "-" + std::to_string(n);
}

}  // namespace

std::string TensorCache::file_name(const ContentHash& hash, uint64_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(32 + 1 + 20);
  for (uint8_t b : hash) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  s += '-';
  s += std::to_string(size);
  return s;
}

TensorCache::TensorCache(fs::path dir, size_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_, ec)) {
    fail(ErrorKind::invalid_input, "tensor cache", "cannot use directory '" + dir_.string() + "': " + ec.message());
  }
  struct Found {
    std::string name;
    uint64_t size;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  fs::directory_iterator it(dir_, ec);
  if (ec) fail(ErrorKind::invalid_input, "tensor cache", "cannot read '" + dir_.string() + "': " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    std::error_code fec;
    if (name.rfind(kTempPrefix, 0) == 0) {  // left by a crash mid-store
      fs::remove(e.path(), fec);
      continue;
    }
    uint64_t size = 0;
    if (!parse_name(name, size) || !e.is_regular_file(fec)) continue;  // not ours
    const uintmax_t actual = e.file_size(fec);
    if (fec || actual != size) {
      fs::remove(e.path(), fec);
      continue;
    }
    found.push_back({name, size, e.last_write_time(fec)});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::lock_guard lock(mutex_);
  for (const Found& f : found) insert_locked(f.name, f.size);  // the newest ends up in front
  evict_locked();
}

void TensorCache::insert_locked(const std::string& name, uint64_t size) {
  lru_.push_front(name);
  index_[name] = Entry{size, lru_.begin(), ++generations_};
  bytes_ += size;
}

void TensorCache::erase_locked(const std::string& name, bool remove_file) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  bytes_ -= it->second.size;
  lru_.erase(it->second.lru);
  index_.erase(it);
  if (remove_file) {
    std::error_code ec;
    fs::remove(dir_ / name, ec);
  }
}

void TensorCache::evict_locked() {
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    const std::string oldest = lru_.back();  // a copy: erasing destroys the list's string
    erase_locked(oldest, true);
  }
}

bool TensorCache::lookup(const ContentHash& hash, uint64_t size, void* dst) {
  const std::string name = file_name(hash, size);
  uint64_t generation = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(name);
    if (it == index_.end()) return false;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    generation = it->second.generation;
  }
  const fs::path path = dir_ / name;
  // An eviction may unlink the file meanwhile: once open, the bytes stay readable.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0;
  if (ok) {
    struct stat st {};
    ok = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == size &&
         read_all_fd(fd, static_cast<uint8_t*>(dst), size);
    ::close(fd);
  }
  // A file changed on disk (or damaged) is dropped rather than handed out.
  ok = ok && content_hash(dst, size) == hash;
  if (!ok) {
    // Only the entry this lookup read: meanwhile an eviction may have
    // removed it and a store put the name back (a new file and entry,
    // which an open that came between the two did not see).
    std::lock_guard lock(mutex_);
    auto it = index_.find(name);
    if (it != index_.end() && it->second.generation == generation) erase_locked(name, fd >= 0);
    return false;
  }
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // keeps the LRU order across restarts
  return true;
}

bool TensorCache::store(const ContentHash& hash, const void* data, size_t size) {
  if (size > max_bytes_) return false;
  const std::string name = file_name(hash, size);
  {
    std::lock_guard lock(mutex_);
    auto it = index_.find(name);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return true;
    }
  }
  if (content_hash(data, size) != hash) return false;  // not the bytes the client announced

  const fs::path temp = dir_ / temp_name(name);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = write_all_fd(fd, static_cast<const uint8_t*>(data), size);
  const bool closed = ::close(fd) == 0;
  std::error_code ec;
  if (!written || !closed) {
    fs::remove(temp, ec);
    return false;
  }
  // rename() is atomic: a reader sees no file or the whole file. Under
  // the lock, so that no eviction of an earlier entry of the name unlinks
  // the new file between the rename and its entry (a file without an
  // entry, or an entry without a file).
  std::lock_guard lock(mutex_);
  fs::rename(temp, dir_ / name, ec);
  if (ec) {
    fs::remove(temp, ec);
    return false;
  }
  if (index_.find(name) == index_.end()) insert_locked(name, size);
  evict_locked();
  return index_.find(name) != index_.end();
}

bool TensorCache::contains(const ContentHash& hash, uint64_t size) const {
  std::lock_guard lock(mutex_);
  return index_.count(file_name(hash, size)) != 0;
}

size_t TensorCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

size_t TensorCache::entries() const {
  std::lock_guard lock(mutex_);
  return index_.size();
}

}  // namespace weft::rpc
