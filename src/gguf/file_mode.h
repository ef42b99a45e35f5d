// The permission bits a file weft writes through a temporary file ends up
// with: what open(2) with mode 0666 would have given it (0666 & ~umask), not
// mkstemp's 0600. Internal to weft_gguf (and its white-box tests).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

namespace weft::detail {

// The umask in the text of /proc/self/status (its "Umask:" line, octal);
// nullopt when the text has no such line or the value is not an octal
// number of at most 0777.
std::optional<mode_t> umask_from_status(std::string_view status);

// 0666 & ~umask. The umask is read from /proc/self/status, which leaves it
// unchanged for other threads; where that line is absent (an old kernel, no
// /proc), from the value umask(2) gave, read and restored once as the
// program started (before main: no other thread existed to create a file
// under the momentary 0).
mode_t new_file_mode();

}  // namespace weft::detail
