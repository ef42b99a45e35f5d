// The GGUF v3 writer: serializes the header and metadata in memory, then
// streams tensor data to a temporary file renamed over the target.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "file_mode.h"
#include "gguf_impl.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace weft {

namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

void put_value(std::string& out, const GgufValue& v) {
  if (v.type == GgufType::string) {
    put_string(out, v.s);
  } else if (v.type == GgufType::array) {
    put<uint32_t>(out, static_cast<uint32_t>(v.arr.elem_type()));
    put<uint64_t>(out, v.arr.size());
    std::span<const uint8_t> b = v.arr.bytes();
    out.append(reinterpret_cast<const char*>(b.data()), b.size());
  } else {
    char buf[8];
    detail::encode_fixed(v, reinterpret_cast<uint8_t*>(buf));
    out.append(buf, detail::fixed_size(v.type));
  }
}

uint64_t align_up(uint64_t n, uint64_t a) { return n + (a - n % a) % a; }

GgufValue make_value(GgufType type) {
  GgufValue v;
  v.type = type;
  return v;
}

GgufValue make_array(GgufArray a) {
  GgufValue v = make_value(GgufType::array);
  v.arr = std::move(a);
  return v;
}

}  // namespace

GgufWriter::Output::Output(const std::string& path) : path_(path), tmp_(path + ".tmp-XXXXXX") {
  fd_ = mkstemp(tmp_.data());
  if (fd_ < 0) fail(ErrorKind::invalid_input, "gguf", path + ": cannot create a temporary file: " + std::strerror(errno));
}

GgufWriter::Output::~Output() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void GgufWriter::Output::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(ErrorKind::invalid_input, "gguf", path_ + ": write failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// mkstemp made the file 0600; it gets the mode a plain open(2) with 0666
// would have given it (file_mode.h) before it is synced and renamed.
void GgufWriter::Output::flush() {
  const int fd = fd_;
  fd_ = -1;
  if (::fchmod(fd, detail::new_file_mode()) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorKind::invalid_input, "gguf", path_ + ": cannot set the file's mode: " + std::strerror(err));
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    fail(ErrorKind::invalid_input, "gguf", path_ + ": cannot flush: " + std::strerror(errno));
}

void GgufWriter::Output::commit() {
  if (fd_ >= 0) flush();
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(ErrorKind::invalid_input, "gguf", path_ + ": cannot rename into place: " + std::strerror(errno));
  committed_ = true;
}

void GgufWriter::set_value(const std::string& key, GgufValue v) {
  v.arr.own();
  for (auto& kv : kvs_) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  kvs_.emplace_back(key, std::move(v));
}

void GgufWriter::set_u16(const std::string& key, uint16_t v) {
  GgufValue x = make_value(GgufType::u16);
  x.u = v;
  set_value(key, std::move(x));
}
void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  GgufValue x = make_value(GgufType::u32);
  x.u = v;
  set_value(key, std::move(x));
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  GgufValue x = make_value(GgufType::i32);
  x.i = v;
  set_value(key, std::move(x));
}
void GgufWriter::set_u64(const std::string& key, uint64_t v) {
  GgufValue x = make_value(GgufType::u64);
  x.u = v;
  set_value(key, std::move(x));
}
void GgufWriter::set_f32(const std::string& key, float v) {
  GgufValue x = make_value(GgufType::f32);
  x.f = v;
  set_value(key, std::move(x));
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  GgufValue x = make_value(GgufType::boolean);
  x.u = v ? 1 : 0;
  set_value(key, std::move(x));
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  GgufValue x = make_value(GgufType::string);
  x.s = v;
  set_value(key, std::move(x));
}
void GgufWriter::set_array(const std::string& key, const std::vector<std::string>& v) {
  GgufArray a(GgufType::string);
  for (const std::string& s : v) a.push(s);
  set_value(key, make_array(std::move(a)));
}
void GgufWriter::set_array(const std::string& key, const std::vector<float>& v) {
  set_value(key, make_array(GgufArray::packed(GgufType::f32, v.data(), v.size())));
}
void GgufWriter::set_array(const std::string& key, const std::vector<int32_t>& v) {
  set_value(key, make_array(GgufArray::packed(GgufType::i32, v.data(), v.size())));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::span<const int64_t> ne, const void* data) {
  add(name, type, ne, data, nullptr);
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::span<const int64_t> ne, TensorProducer produce) {
  if (!produce) fail(ErrorKind::invalid_input, "gguf", "add_tensor '" + name + "': no producer");
  add(name, type, ne, nullptr, std::move(produce));
}

void GgufWriter::add(const std::string& name, DType type, std::span<const int64_t> ne, const void* data,
                     TensorProducer produce) {
  if (ne.empty() || ne.size() > 4)
    fail(ErrorKind::invalid_input, "gguf", "add_tensor '" + name + "': " + std::to_string(ne.size()) + " dims, expected 1..4");
  for (const Tensor& t : tensors_)
    if (t.name == name) fail(ErrorKind::invalid_input, "gguf", "add_tensor '" + name + "': duplicate name");
  const DTypeTraits& tr = traits(type);
  int64_t elements = 1;
  for (int64_t n : ne) {
    if (n < 0 || (n != 0 && elements > std::numeric_limits<int64_t>::max() / n))
      fail(ErrorKind::invalid_input, "gguf", "add_tensor '" + name + "': bad dim " + std::to_string(n));
    elements *= n;
  }
  if (ne[0] % tr.block_size != 0)
    fail(ErrorKind::invalid_input, "gguf",
         "add_tensor '" + name + "': ne[0]=" + std::to_string(ne[0]) + " is not a multiple of " + std::to_string(tr.block_size));
  size_t nbytes = static_cast<size_t>(elements / tr.block_size) * tr.unit_bytes;
  if (nbytes > 0 && !data && !produce) fail(ErrorKind::invalid_input, "gguf", "add_tensor '" + name + "': no data");
  tensors_.push_back(Tensor{name, type, std::vector<int64_t>(ne.begin(), ne.end()), data, nbytes, std::move(produce)});
}

void GgufWriter::write(const std::string& path) const { write_file(path, kvs_, 0, tensors_.size())->commit(); }

std::unique_ptr<GgufWriter::Output> GgufWriter::write_file(const std::string& path,
                                                           const std::vector<std::pair<std::string, GgufValue>>& kvs,
                                                           size_t first, size_t last) const {
  uint64_t alignment = kGgufDefaultAlignment;
  for (const auto& kv : kvs) {
    if (kv.first != "general.alignment") continue;
    if (kv.second.type != GgufType::u32 || kv.second.u == 0 || (kv.second.u & (kv.second.u - 1)) != 0)
      fail(ErrorKind::invalid_input, "gguf", path + ": general.alignment must be a u32 power of two");
    alignment = kv.second.u;
  }

  std::string head;
  head.append("GGUF", 4);
  put<uint32_t>(head, 3);
  put<uint64_t>(head, last - first);
  put<uint64_t>(head, kvs.size());
  for (const auto& kv : kvs) {
    put_string(head, kv.first);
    put<uint32_t>(head, static_cast<uint32_t>(kv.second.type));
    put_value(head, kv.second);
  }
  uint64_t offset = 0;
  for (size_t i = first; i < last; ++i) {
    const Tensor& t = tensors_[i];
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put<uint64_t>(head, static_cast<uint64_t>(n));
    put<uint32_t>(head, detail::ggml_from_dtype(t.type));
    put<uint64_t>(head, offset);
    offset = align_up(offset + t.nbytes, alignment);
  }
  // Padding to the data section only when there is data; after the last
  // tensor none, so the file ends where its last byte is needed.
  if (last > first) head.resize(align_up(head.size(), alignment), '\0');

  auto file = std::make_unique<Output>(path);
  Output& out = *file;
  out.write(head.data(), head.size());
  static const char kZeros[4096] = {};
  for (size_t i = first; i < last; ++i) {
    const Tensor& t = tensors_[i];
    if (t.produce) {
      size_t written = 0;
      t.produce([&](const void* data, size_t n) {
        if (n > t.nbytes - written)
          fail(ErrorKind::internal, "gguf", path + ": tensor '" + t.name + "': producer gave more than its " +
                                                std::to_string(t.nbytes) + " bytes");
        out.write(data, n);
        written += n;
      });
      if (written != t.nbytes)
        fail(ErrorKind::internal, "gguf", path + ": tensor '" + t.name + "': producer gave " + std::to_string(written) +
                                              " of its " + std::to_string(t.nbytes) + " bytes");
    } else {
      out.write(t.data, t.nbytes);
    }
    if (i + 1 < last) {
      uint64_t pad = align_up(t.nbytes, alignment) - t.nbytes;
      while (pad > 0) {
        size_t n = pad < sizeof kZeros ? static_cast<size_t>(pad) : sizeof kZeros;
        out.write(kZeros, n);
        pad -= n;
      }
    }
  }
  out.flush();
  return file;
}

}  // namespace weft
