// Ctrl-C handling shared by the tools: SIGINT/SIGTERM set a flag that long loops poll, so a
// tool can print the summary of what ran and exit with kInterruptedExit.
#pragma once

namespace ic::tools {

// Conventional exit status after SIGINT (128 + 2).
inline constexpr int kInterruptedExit = 130;

// Installs the SIGINT and SIGTERM handlers (async-signal-safe: they only set a flag).
// A second Ctrl-C while the first is being handled exits at once with 130.
void install_interrupt_handler();

// For one-shot tools (a single blocking call): SIGINT/SIGTERM write `message` (a string with
// static storage) to stderr and _exit(kInterruptedExit) at once.
void install_exit_on_interrupt(const char* message);

// True once SIGINT or SIGTERM arrived.
bool interrupted();

// Sleeps up to `micros` µs, waking early (returns false) when interrupted.
bool sleep_unless_interrupted(long long micros);

}  // namespace ic::tools
