// Flags shared by the subcommands that load a model (generate, serve, bench).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "runtime/model_runner.h"
#include "spec/spec_options.h"

namespace specd::app {

struct EngineFlags {
  std::string model;
  int threads = 0;  // 0: all cores / tp
  // Weights are read into anonymous (huge-page) memory unless --mmap: on the
  // VMs measured in docs/performance.md mmap-ed weights decode slower.
  bool mmap = false;
  bool no_mmap = false;
  std::string quantize;  // "", q8_0 or q4_0
  std::string check_tensors = "default";  // off, default or full
  int kv_cache_tokens = 0;
  std::string kv_cache_memory;  // "": the subcommand's default (ParseMemorySize)
  bool no_fuse_allreduce_norm = false;
  bool ep = false;
  std::string matmul_split = "dynamic";
  double pool_spin_us = -1;
  bool no_prefetch = false;
  bool no_stream_decode = false;
  std::string stream_prefetch = "auto";  // auto, on or off
  bool no_amx = false;
  bool no_repack = false;
  int tp = 1;
};

struct SpecFlags {
  std::string algorithm = "NONE";
  std::string draft_model;
  // "auto" (the cost model chooses each step's draft) or a tree depth. Any
  // explicit shape flag fixes the shape; 0 marks topk / draft tokens unset.
  std::string num_steps = "auto";
  int topk = 0;
  int num_draft_tokens = 0;
  bool no_acceptance_cache = false;  // --no-acceptance-cache
};

void AddEngineFlags(CLI::App* sub, EngineFlags* f);
void AddSpecFlags(CLI::App* sub, SpecFlags* f);
StatusOr<SpecOptions> ToSpecOptions(const SpecFlags& f);
// The model path: `model_flag` (--model), else $SPECD_MODEL, else the
// embedded demo model (*is_default true). The one place SPECD_MODEL is read.
std::string ResolveModelPath(const std::string& model_flag, bool* is_default = nullptr);

// The engine flags and environment resolved once per process (by the
// subcommand, before launching ranks) and passed down to every rank.
struct ResolvedEngineOptions {
  RunnerOptions runner;
  int tp = 1;
  bool default_model = false;  // neither --model nor $SPECD_MODEL: the embedded demo model
};
// REQUIRES: f.quantize is "", "q8_0" or "q4_0" (the flag's check enforces it).
ResolvedEngineOptions ResolveEngineOptions(const EngineFlags& f);

}  // namespace specd::app
