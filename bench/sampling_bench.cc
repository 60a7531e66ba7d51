// What sampling adds per sequence and step: the non-finite logits check next
// to the greedy argmax it guards, over real vocabulary sizes.
//   build/release/bench/sampling_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <vector>

#include "sampling/logits_check.h"
#include "sampling/sampler.h"

namespace specd {
namespace {

std::vector<float> Row(int V) {
  std::vector<float> row(V);
  for (int i = 0; i < V; ++i) row[i] = static_cast<float>(i % 97) * 0.01f - 0.3f;
  return row;
}

void BM_CheckLogitsRow(benchmark::State& state) {
  const int V = static_cast<int>(state.range(0));
  std::vector<float> row = Row(V);
  for (auto _ : state) benchmark::DoNotOptimize(CheckLogitsRow(row.data(), V).ok());
  state.SetBytesProcessed(state.iterations() * int64_t{V} * 4);
}

void BM_GreedyToken(benchmark::State& state) {
  const int V = static_cast<int>(state.range(0));
  std::vector<float> row = Row(V);
  for (auto _ : state) benchmark::DoNotOptimize(GreedyToken(row.data(), V));
  state.SetBytesProcessed(state.iterations() * int64_t{V} * 4);
}

BENCHMARK(BM_CheckLogitsRow)->Arg(32000)->Arg(128256)->Arg(151936)->ArgName("vocab")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyToken)->Arg(32000)->Arg(128256)->Arg(151936)->ArgName("vocab")
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace specd

BENCHMARK_MAIN();
