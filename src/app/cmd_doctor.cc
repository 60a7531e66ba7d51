#include "app/commands.h"

#include <cstdio>

namespace specd::app {

void AddDoctorCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("doctor", "Print the detected hardware and the path each "
                                            "kernel family and collective will use, with why");
  sub->callback([exit_code] {
    std::printf("specd doctor: hardware probe not yet built\n");
    *exit_code = 0;
  });
}

}  // namespace specd::app
