// Ctrl-C handling shared by the tools: SIGINT/SIGTERM set a flag that long loops poll, so a
// tool can print the summary of what ran and exit with kInterruptedExit.
#pragma once

namespace ic::tools {

// Conventional exit status after SIGINT (128 + 2).
inline constexpr int kInterruptedExit = 130;

// Installs the SIGINT and SIGTERM handlers (async-signal-safe: they only set a flag).
// A second Ctrl-C while the first is being handled exits at once with 130.
void install_interrupt_handler();

// True once SIGINT or SIGTERM arrived.
bool interrupted();

// Sleeps up to `micros` µs, waking early (returns false) when interrupted.
bool sleep_unless_interrupted(long long micros);

}  // namespace ic::tools
