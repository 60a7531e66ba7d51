// How often a drafter's tokens were accepted, remembered between runs: an
// auto-shaped run ends by writing its pooled acceptance (AcceptanceModel's
// decayed counts per depth, at most ~33 drafts' weight), and the next run of
// the same target and drafter starts from it instead of the blind prior
// (p = 0.5), so a short request need not spend its first drafts learning
// what the last run already knew. It is a prior, not a verdict: a new
// sequence weighs it as 8 drafts of its own (Scheduler), so its own drafts
// soon speak for themselves.
//
// Stored as JSON in `cache_dir` under a file named by a hash of `key`, which
// must name what acceptance depends on (target weights and quantization,
// drafter, workload: greedy decoding is accepted more often than sampling),
// not the machine or thread count. Writes go to a temporary file
// renamed into place, so concurrent runs never read a torn file.
#pragma once

#include <optional>
#include <string>

#include "spec/draft_cost.h"

namespace specd {

std::string AcceptanceCachePath(const std::string& cache_dir, const std::string& key);

// The remembered model with max_depth depths, or nullopt when there is none
// for `key` (no file, another key under the same hash). A file that is not
// a remembered model (unparsable, counts no model can have) is logged
// as ignored, naming the file and what was wrong, and yields nullopt.
std::optional<AcceptanceModel> LoadAcceptance(const std::string& cache_dir,
                                              const std::string& key, int max_depth);

// Remembers `model` under `key`; a model with no observations is not
// written. Failing to write is logged, not an error.
void SaveAcceptance(const std::string& cache_dir, const std::string& key,
                    const AcceptanceModel& model);

}  // namespace specd
