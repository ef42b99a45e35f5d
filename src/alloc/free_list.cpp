#include "free_list.h"

#include <algorithm>
#include <iterator>

namespace weft::detail {

size_t FreeList::rounded(size_t size) const {
  return (std::max<size_t>(size, 1) + alignment_ - 1) / alignment_ * alignment_;
}

size_t FreeList::allocate(size_t size, bool* reused) {
  size = rounded(size);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
  }
  if (best != free_.end()) {
    const size_t offset = best->first;
    const size_t left = best->second - size;
    free_.erase(best);
    if (left) free_[offset + size] = left;
    *reused = true;
    return offset;
  }
  // Grow at the end, absorbing a free block that touches it.
  size_t offset = end_;
  *reused = false;
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == end_) {
      offset = last->first;
      *reused = true;
      free_.erase(last);
    }
  }
  end_ = offset + size;
  high_water_ = std::max(high_water_, end_);
  return offset;
}

void FreeList::release(size_t offset, size_t size) {
  size = rounded(size);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  if (offset + size == end_) {
    end_ = offset;  // the block was at the end: shrink instead of listing it
    return;
  }
  free_[offset] = size;
}

}  // namespace weft::detail
