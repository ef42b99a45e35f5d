// The worker's content cache (`weft worker --cache-dir`): tensor bytes kept
// on disk under their content hash (docs/rpc-protocol.md sections 3 and 5),
// so a client can skip uploading weights the worker has seen before.
//
//   TensorCache cache("/var/cache/weft", 16ull << 30);
//   if (!cache.lookup(hash, size, dst)) {      // miss: dst untouched or garbage
//     ... receive the bytes into dst ...
//     cache.store(hash, dst, size);            // hashes dst itself first
//   }
//
// Files are named "<32 hex digits>-<size>" and written to a temporary file
// that is renamed into place, so a reader never sees a partial file. The
// least recently used entries are evicted to stay under max_bytes; the
// order survives restarts through file mtimes (a hit touches the file).
// Every method is safe from several threads (one mutex guards the index;
// file reads and writes run outside it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "protocol/content_hash.h"

namespace weft::rpc {

class TensorCache {
 public:
  // Creates dir if needed and indexes the files already there (removing
  // leftover temporary files and files whose size contradicts their name).
  // Throws Error(invalid_input) when dir cannot be created or read.
  TensorCache(std::filesystem::path dir, size_t max_bytes);
  TensorCache(const TensorCache&) = delete;
  TensorCache& operator=(const TensorCache&) = delete;

  // Copies the cached bytes with this hash and size into dst (size bytes)
  // and returns true. Returns false when there is no such entry, or when the
  // file turned out unreadable or corrupt (it is dropped); dst may then hold
  // garbage.
  bool lookup(const ContentHash& hash, uint64_t size, void* dst);

  // Stores the size bytes at data under hash, after checking that they hash
  // to it: bytes that do not are never stored (a client cannot poison the
  // cache). Returns whether the entry is now cached. Never throws for I/O
  // problems (they make it return false).
  bool store(const ContentHash& hash, const void* data, size_t size);

  bool contains(const ContentHash& hash, uint64_t size) const;
  size_t bytes() const;  // total size of the cached entries
  size_t entries() const;
  const std::filesystem::path& dir() const { return dir_; }

  static std::string file_name(const ContentHash& hash, uint64_t size);

 private:
  struct Entry {
    uint64_t size = 0;
    std::list<std::string>::iterator lru;  // position in lru_
    uint64_t generation = 0;               // which insert of the name: a lookup drops only the one it read
  };
  void insert_locked(const std::string& name, uint64_t size);  // as most recent
  void erase_locked(const std::string& name, bool remove_file);
  void evict_locked();

  std::filesystem::path dir_;
  size_t max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> index_;
  std::list<std::string> lru_;  // front: most recently used
  size_t bytes_ = 0;
  uint64_t generations_ = 0;
};

}  // namespace weft::rpc
