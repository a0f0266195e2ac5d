// Command-line parsing shared by the tools (cli, replay, bench) on CLI11, with the exit codes
// tools/README.md promises: 0 for --help and --version, 2 for every usage error (CLI11's own
// codes 104, 105, 106, 109, ... never leak out).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace ic::tools {

// Adds --version (version, commit, compiler, library versions, as the server prints them) and
// lets the parent's options follow a subcommand ("cli lookup --server h:p" as well as
// "cli --server h:p lookup"). Call after the options are defined, before parse_or_exit.
void standard_flags(CLI::App& app);

// Parses argv. --help: usage on stdout, exit 0. --version: exit 0. Any error: one line
// "<program>: error: <why>" plus "run with --help for usage" on stderr, exit 2. Returns only
// when the command line is good.
void parse_or_exit(CLI::App& app, int argc, char** argv);

// Adds option `name` whose value must be one of `choices` (anything else is a usage error), with
// its default shown in --help. Returns the option for further settings.
CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& value,
                        const std::string& help, const std::vector<std::string>& choices);

// Splits "host:port" ("[v6]:port" too, brackets removed). False when there is no host, or the
// port is not a number in 1..65535.
bool split_host_port(const std::string& address, std::string* host, int* port);

}  // namespace ic::tools
