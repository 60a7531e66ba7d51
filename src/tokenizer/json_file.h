// Reads a JSON file of a tokenizer folder (tokenizer.json,
// tokenizer_config.json). Errors name the file: NotFound / IoError from
// reading it, Corruption "PATH: invalid JSON: ..." from parsing it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace specd::tok {

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace specd::tok
