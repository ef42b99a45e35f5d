// Whether this build runs under a sanitizer (ASan, TSan: gcc's __SANITIZE_*
// macros or clang's __has_feature). Such builds run several times slower and
// count shadow memory as resident, so tests scale their sizes down and skip
// RSS checks. WEFT_SANITIZED is defined (to 1) for preprocessor use.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WEFT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define WEFT_SANITIZED 1
#endif
#endif

namespace weft::test {
#ifdef WEFT_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace weft::test
