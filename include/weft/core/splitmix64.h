// splitmix64: a small, portable pseudo-random generator. The same seed gives
// the same numbers on every platform (standard-library distributions do not
// promise that), which the demo model's weights and the async test device's
// delays rely on.
#pragma once

#include <cstdint>

namespace weft {

// The next number of the sequence; advances state.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace weft
