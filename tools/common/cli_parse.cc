#include "common/cli_parse.hh"

#include <cstdlib>
#include <iostream>

#include "buildinfo/build_info.hh"

namespace ic::tools {

namespace {
// Usage errors: the tools README's exit status for a bad command line.
constexpr int kUsageExit = 2;
}  // namespace

void standard_flags(CLI::App& app) {
  app.set_version_flag("--version", "", "print version, commit, compiler and library versions");
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
}

void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    std::exit(0);
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    std::exit(0);
  } catch (const CLI::CallForVersion&) {
    std::cout << buildinfo::version_text(app.get_name());
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << "\n"
              << "run with --help for usage\n";
    std::exit(kUsageExit);
  }
}

bool split_host_port(const std::string& address, std::string* host, int* port) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    *port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return false;
  }
  return *port > 0 && *port < 65536;
}

CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& value,
                        const std::string& help, const std::vector<std::string>& choices) {
  return app.add_option(name, value, help)->check(CLI::IsMember(choices))->capture_default_str();
}

}  // namespace ic::tools
