#include "tokenizer/json_file.h"

#include <fmt/format.h>

#include "base/mapped_file.h"

namespace specd::tok {

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return CorruptionError(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
}

}  // namespace specd::tok
