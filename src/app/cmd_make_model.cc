// specd make-model: writes a random-weight checkpoint at a preset's real
// shapes (for tests and benchmarks without downloading a model).
#include <cstdio>

#include "app/commands.h"
#include "base/logging.h"
#include "modelgen/eagle3_fixture.h"
#include "modelgen/fixture.h"

namespace specd::app {

void AddMakeModelCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("make-model", "Write a random-weight model fixture");
  struct Args {
    FixtureOptions options;
    std::string dtype = "f32";
    std::string target;
    int draft_vocab = 0;
  };
  auto args = std::make_shared<Args>();
  std::string presets;
  for (const std::string& n : FixturePresetNames()) presets += (presets.empty() ? "" : ", ") + n;
  sub->add_option("--preset", args->options.preset,
                  "Model shape: " + presets +
                      "; or eagle3-head: a random EAGLE-3 draft head for --target (safetensors)")
      ->capture_default_str();
  sub->add_option("--target", args->target,
                  "eagle3-head: the target model (folder or .gguf) whose shapes the head takes");
  sub->add_option("--draft-vocab", args->draft_vocab,
                  "eagle3-head: draft vocabulary size (default min(target vocabulary, 32000))");
  sub->add_option("--format", args->options.format, "safetensors (--out is a folder) or gguf "
                                                    "(--out is a file)")
      ->capture_default_str();
  sub->add_option("--dtype", args->dtype,
                  "f32, f16, bf16; quantized types (q8_0, q4_0, q4_k, ...) with gguf only")
      ->capture_default_str();
  sub->add_option("--out", args->options.out, "Output folder (safetensors) or .gguf file")
      ->required();
  sub->add_option("--seed", args->options.seed, "Random seed (same seed, same bytes)")
      ->capture_default_str();
  sub->add_option("--vocab", args->options.vocab,
                  "gguf: none (default) or synthetic (an SPM vocabulary of the model's size, "
                  "so that tools that require a tokenizer, such as llama.cpp, load the file)");
  sub->add_option("--tokenizer", args->options.tokenizer_json,
                  "A tokenizer.json to copy next to a safetensors model");
  sub->callback([args, exit_code] {
    auto dt = ParseDType(args->dtype);
    if (!dt.ok()) {
      LogStatus(Status(dt.status()).WithStage("make-model"));
      *exit_code = 2;
      return;
    }
    args->options.dtype = *dt;
    Status st;
    if (args->options.preset == "eagle3-head") {
      Eagle3FixtureOptions eo;
      eo.target = args->target;
      eo.out = args->options.out;
      eo.dtype = *dt;
      eo.seed = args->options.seed;
      eo.draft_vocab = args->draft_vocab;
      st = MakeEagle3Fixture(eo);
    } else if (!args->target.empty()) {
      st = InvalidArgumentError("--target is for --preset eagle3-head only");
    } else {
      st = MakeFixture(args->options);
    }
    if (!st.ok()) {
      LogStatus(st.WithStage("make-model"));
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace specd::app
