#include <cstdio>

#include "app/commands.h"
#include "base/env.h"
#include "base/logging.h"

namespace specd::app {

void AddGlobalOptions(CLI::App& root) {
  root.add_option_function<std::string>(
          "--log-format",
          [](const std::string& v) {
            auto f = ParseLogFormat(v);
            if (!f.ok()) throw CLI::ValidationError(f.status().message());
            SetLogFormat(*f);
          },
          "Log lines as 'text' (default) or 'json' (one JSON object per line)")
      ->envname(EnvName(EnvVar::kLogFormat));
  root.add_option_function<std::string>(
          "--log-level",
          [](const std::string& v) {
            auto l = ParseLogLevel(v);
            if (!l.ok()) throw CLI::ValidationError(l.status().message());
            SetLogLevel(*l);
          },
          "debug|info|warn|error (default info)")
      ->envname(EnvName(EnvVar::kLogLevel));
  root.set_version_flag("--version", "specd 0.1.0");
}

}  // namespace specd::app
