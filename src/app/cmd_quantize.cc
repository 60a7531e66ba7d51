// specd quantize: any checkpoint (safetensors folder or GGUF) -> a GGUF file
// in llama.cpp's layout with the requested matrix dtype (--format gguf, the
// default), or a BF16/F32 safetensors folder -> a compressed-tensors INT4
// folder (--format compressed-tensors; modelgen/compressed_tensors_writer.h).
#include <cstdio>

#include "app/commands.h"
#include "base/clock.h"
#include "base/logging.h"
#include "loader/checkpoint.h"
#include "modelgen/compressed_tensors_writer.h"
#include "modelgen/model_writer.h"

namespace specd::app {
namespace {

struct QuantizeArgs {
  std::string model, out, dtype = "q8_0", format = "gguf";
  std::vector<std::string> ignore;
};

Status QuantizeToGguf(const QuantizeArgs& args) {
  ASSIGN_OR_RETURN(DType dtype, ParseDType(args.dtype));
  Stopwatch sw;
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ck, OpenCheckpoint(args.model));
  ASSIGN_OR_RETURN(std::vector<WeightSource> weights, WeightsFromCheckpoint(*ck));
  GgufModelOptions options;
  options.dtype = dtype;
  options.name = args.model;
  // A GGUF source keeps its vocabulary; a safetensors folder's
  // tokenizer.json is not converted (serve it with --tokenizer).
  if (!ck->gguf_vocab().tokens.empty()) options.vocab = &ck->gguf_vocab();
  RETURN_IF_ERROR(WriteGgufModel(ck->config(), weights, options, args.out));
  LOG_INFO("quantize", "wrote {} ({}) in {:.1f} s", args.out, DTypeName(dtype), sw.Seconds());
  return Status::Ok();
}

Status QuantizeToCompressedTensors(const QuantizeArgs& args) {
  Stopwatch sw;
  CompressedTensorsOptions options;
  if (!args.ignore.empty()) options.ignore = args.ignore;
  int n = 0;
  RETURN_IF_ERROR(WriteCompressedTensorsModel(args.model, args.out, options, &n));
  LOG_INFO("quantize", "wrote {} (compressed-tensors pack-quantized INT4, group 32: {} weights) "
           "in {:.1f} s",
           args.out, n, sw.Seconds());
  return Status::Ok();
}

}  // namespace

void AddQuantizeCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand(
      "quantize", "Convert a checkpoint to a quantized GGUF or a compressed-tensors INT4 folder");
  auto args = std::make_shared<QuantizeArgs>();
  sub->add_option("--model", args->model, "Model folder (safetensors) or .gguf file")->required();
  sub->add_option("--out", args->out, "Output .gguf file (gguf) or folder (compressed-tensors)")
      ->required();
  sub->add_option("--format", args->format,
                  "gguf, or compressed-tensors: the Linear weights INT4 pack-quantized (W4A16, "
                  "symmetric, group 32, bf16 scales) exactly as compressed-tensors 0.20.1 writes "
                  "them, from a BF16/F32 safetensors folder")
      ->capture_default_str();
  auto* dtype = sub->add_option("--dtype", args->dtype,
                                "gguf: matrix dtype q8_0, q4_0, f16, bf16, f32, or q4_1, q5_0, "
                                "q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs (the K and IQ4 "
                                "types round to nearest, without llama.cpp's scale search; "
                                "matrices whose rows are not whole blocks stay f16; norms and "
                                "biases stay f32)")
                    ->capture_default_str();
  sub->add_option("--ignore", args->ignore,
                  "compressed-tensors: modules left unquantized, as the library's ignore list: "
                  "an exact module name or re:REGEX matched at the start of the name "
                  "(repeatable; replaces the default, which keeps all but the routed experts "
                  "mlp.experts.* unquantized)");
  sub->callback([args, exit_code, dtype] {
    auto run = [&]() -> Status {
      if (args->format == "gguf") {
        if (!args->ignore.empty()) {
          return InvalidArgumentError("--ignore applies to --format compressed-tensors");
        }
        return QuantizeToGguf(*args);
      }
      if (args->format == "compressed-tensors") {
        if (dtype->count() > 0) {
          return InvalidArgumentError("--dtype applies to --format gguf (compressed-tensors "
                                      "writes INT4 weights with bf16 scales)");
        }
        return QuantizeToCompressedTensors(*args);
      }
      return InvalidArgumentError("--format '" + args->format +
                                  "': expected gguf or compressed-tensors");
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
