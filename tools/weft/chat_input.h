// The terminal side of `weft chat`: lines read from stdin, and Ctrl-C taken
// by one thread so that it stops a reply rather than the process. SIGINT is
// blocked in every thread and taken by that thread, which raises
// g_interrupted and wakes read_line(); a second Ctrl-C while g_in_reply is
// set (before the reply noticed the first) exits at once with status 130.
#pragma once

#include <atomic>
#include <optional>
#include <string>

namespace weft::tools {

extern std::atomic<bool> g_interrupted;  // Ctrl-C came; the chat clears it each turn
extern std::atomic<bool> g_in_reply;     // a turn is being evaluated or generated

// Takes SIGINT for the whole process (it is blocked in every thread created
// after this, the Session's included).
void start_signal_thread();

// Forgets a Ctrl-C that read_line() has not yet seen.
void drain_wake_pipe();

// One line from stdin without its newline; nullopt at end of input or when
// SIGINT came while waiting.
std::optional<std::string> read_line();

}  // namespace weft::tools
