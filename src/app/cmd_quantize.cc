// specd quantize: any checkpoint (safetensors folder or GGUF) -> a GGUF file
// in llama.cpp's layout with the requested matrix dtype.
#include <cstdio>

#include "app/commands.h"
#include "base/clock.h"
#include "base/logging.h"
#include "loader/checkpoint.h"
#include "modelgen/model_writer.h"

namespace specd::app {

void AddQuantizeCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("quantize", "Convert a checkpoint to a quantized GGUF");
  struct Args {
    std::string model, out, dtype = "q8_0";
  };
  auto args = std::make_shared<Args>();
  sub->add_option("--model", args->model, "Model folder (safetensors) or .gguf file")->required();
  sub->add_option("--out", args->out, "Output .gguf file")->required();
  sub->add_option("--dtype", args->dtype,
                  "Matrix dtype: q8_0, q4_0, f16, bf16 or f32 (norms and biases stay f32)")
      ->capture_default_str();
  sub->callback([args, exit_code] {
    auto run = [&]() -> Status {
      ASSIGN_OR_RETURN(DType dtype, ParseDType(args->dtype));
      Stopwatch sw;
      ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ck, OpenCheckpoint(args->model));
      ASSIGN_OR_RETURN(std::vector<WeightSource> weights, WeightsFromCheckpoint(*ck));
      GgufModelOptions options;
      options.dtype = dtype;
      options.name = args->model;
      // A GGUF source keeps its vocabulary; a safetensors folder's
      // tokenizer.json is not converted (serve it with --tokenizer).
      if (!ck->gguf_vocab().tokens.empty()) options.vocab = &ck->gguf_vocab();
      RETURN_IF_ERROR(WriteGgufModel(ck->config(), weights, options, args->out));
      LOG_INFO("quantize", "wrote {} ({}) in {:.1f} s", args->out, DTypeName(dtype), sw.Seconds());
      return Status::Ok();
    };
    Status st = run();
    if (!st.ok()) {
      LogStatus(st.WithStage("quantize"));
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace specd::app
