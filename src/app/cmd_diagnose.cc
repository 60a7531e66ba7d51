// `specd diagnose FILE... [--json]`: prints the root cause found in logs.
#include <cstdio>
#include <string>
#include <vector>

#include "app/commands.h"
#include "diagnose/diagnose.h"

namespace specd::app {

// Exit codes, documented in --help.
constexpr int kExitNoFailure = 0;
constexpr int kExitFailureFound = 1;
constexpr int kExitInputError = 2;

void AddDiagnoseCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand(
      "diagnose",
      "Find the root cause in crash logs (specd's own, or Python tracebacks of other servers)");
  sub->footer(
      "Reads the files (or stdin for '-' or none), separates interleaved processes by their\n"
      "prefixes ([TP3], [rank2]:, (RayWorker pid=1), 'name  | '), strips time stamps, and\n"
      "prints the first failure that is not a consequence of another, with its process,\n"
      "code location, known signature and hint. Logging noise and peers that timed out or\n"
      "were torn down are reported as consequences, never as the cause.\n\n"
      "Exit codes:\n"
      "  0  no failure found in the logs\n"
      "  1  a failure was found and reported\n"
      "  2  bad usage, or a log could not be opened or read");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto max_line = std::make_shared<size_t>(4096);
  sub->add_option("files", *files, "Log files; '-' or none reads stdin");
  sub->add_flag("--json", *json, "Print one JSON object instead of text");
  sub->add_option("--max-line-bytes", *max_line, "Cut longer lines at this many bytes")
      ->check(CLI::Range(size_t{80}, size_t{1} << 24));
  sub->callback([exit_code, files, json, max_line] {
    diagnose::DiagnoseOptions options;
    options.max_line_bytes = *max_line;
    StatusOr<diagnose::Diagnosis> d = diagnose::DiagnoseFiles(*files, options);
    if (!d.ok()) {
      std::fprintf(stderr, "specd diagnose: %s\n", d.status().ToString().c_str());
      *exit_code = kExitInputError;
      return;
    }
    std::string out = *json ? diagnose::FormatDiagnosisJson(*d) : diagnose::FormatDiagnosisText(*d);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    *exit_code = d->found ? kExitFailureFound : kExitNoFailure;
  });
}

}  // namespace specd::app
