// Byte sizes as people type them on a command line, and as logs print them.
// Every byte option of `weft` (worker --mem, --session-mem, --cache-max, ...)
// goes through parse_byte_size, so they all accept the same spellings.
//
//   uint64_t b = weft::parse_byte_size("--mem", "64MiB");   // 67108864
//   weft::parse_byte_size("--mem", "4G");                    // 4294967296
//   weft::format_byte_size(b);                               // "64 MiB"
//
// Grammar: a decimal number (digits, optionally a '.' and more digits), then
// optional spaces, then an optional unit. Units are binary whatever their
// spelling: K, KB, KiB = 1024; M, MB, MiB = 1024^2; G, GB, GiB = 1024^3;
// T, TB, TiB = 1024^4 (letters in any case: k, kb, kib, ...); B or no unit
// = bytes. A fraction needs a unit and is rounded to the nearest byte
// ("1.5G" = 1610612736). Anything else -- a sign, an exponent, an unknown
// unit, trailing text, or a value above UINT64_MAX -- is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weft {

// The bytes text denotes. Throws Error(invalid_input, "[OPTION] ...") naming
// the option and the text, and saying what was wrong and what is accepted.
uint64_t parse_byte_size(std::string_view option, std::string_view text);

// "0 B", "64 B", "64 MiB", "4 GiB" when the value is a whole number of its
// largest binary unit; else that unit with one decimal and the exact bytes:
// "1.5 KiB (1536 B)". Never rounds a non-zero value to "0 ...".
std::string format_byte_size(uint64_t bytes);

}  // namespace weft
