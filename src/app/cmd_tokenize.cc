// specd tokenize: the token ids of a text, as the model's own tokenizer
// produces them (special tokens only where its post-processor adds them).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "base/logging.h"
#include "tokenizer/tokenizer.h"

namespace specd::app {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string text;
  bool json = false;
  bool no_special = false;
  bool no_parse_special = false;
};

Status RunTokenize(const TokenizeFlags& f) {
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizerForModel(f.model));
  const std::vector<int32_t> ids =
      tok->Encode(f.text, /*add_special=*/!f.no_special, /*parse_special=*/!f.no_parse_special);
  if (f.json) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
    return Status::Ok();
  }
  // One line per token: id, the piece as the vocabulary spells it, and the
  // text it decodes to (JSON-quoted so spaces and control bytes are visible).
  for (int32_t id : ids) {
    const std::string piece = nlohmann::json(tok->IdToPiece(id))
                                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string text = nlohmann::json(tok->TokenBytes(id, /*skip_special=*/false))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%8d  %-24s %s\n", id, piece.c_str(), text.c_str());
  }
  std::printf("%zu tokens\n", ids.size());
  return Status::Ok();
}

}  // namespace

void AddTokenizeCommand(CLI::App& root, int* exit_code) {
  auto flags = std::make_shared<TokenizeFlags>();
  auto* sub = root.add_subcommand("tokenize", "Print the token ids of a text");
  sub->add_option("--model", flags->model,
                  "Model folder (tokenizer.json + tokenizer_config.json is enough) or .gguf file")
      ->required();
  sub->add_option("--text", flags->text, "Text to tokenize")->required();
  sub->add_flag("--json", flags->json, "Print {\"ids\": [...]} only");
  sub->add_flag("--no-special", flags->no_special,
                "Add no special tokens (by default BOS/EOS are added as the tokenizer's "
                "post-processor says)");
  sub->add_flag("--no-parse-special", flags->no_parse_special,
                "Treat special-token text such as <|eot_id|> in --text as plain text");
  sub->callback([flags, exit_code] {
    Status st = RunTokenize(*flags);
    if (!st.ok()) {
      LogStatus(st.WithStage("tokenize"));
      *exit_code = 1;
    }
  });
}

}  // namespace specd::app
