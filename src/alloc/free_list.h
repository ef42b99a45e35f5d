// Offsets within one buffer: best-fit reuse of freed blocks, growth at the
// end, and the high-water mark. Pure bookkeeping; no memory is touched.
#pragma once

#include <cstddef>
#include <map>

namespace weft::detail {

class FreeList {
 public:
  explicit FreeList(size_t alignment) : alignment_(alignment ? alignment : 1) {}

  // Returns the offset of a block of at least size bytes (rounded up to the
  // alignment); *reused says whether it came from freed memory.
  size_t allocate(size_t size, bool* reused);
  // Returns a block previously given by allocate() with the same size.
  void release(size_t offset, size_t size);
  size_t high_water() const { return high_water_; }
  size_t rounded(size_t size) const;

 private:
  size_t alignment_;
  std::map<size_t, size_t> free_;  // offset -> size; disjoint, adjacent blocks merged
  size_t end_ = 0;                 // first byte past every live block
  size_t high_water_ = 0;
};

}  // namespace weft::detail
