// The collectives section of `specd doctor`: which allreduce algorithm runs
// for each message size and why (tuned entry, nearest family or defaults).
#pragma once

#include <string>

namespace specd {

// Multi-line text for the running machine (DetectPlatformKey()), world sizes
// 2, 4 and 8, with the env override (SPECD_ALLREDUCE_ALGO) if one is set.
std::string DescribeCollectiveChoices();

}  // namespace specd
