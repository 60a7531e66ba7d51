// Memory sizes: how much memory the machine has available, and byte sizes
// written by people ("512M", "2GiB").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace specd {

// MemAvailable of a /proc/meminfo text, in bytes (the kernel's estimate of
// what can be allocated without swapping); nullopt if the field is missing.
std::optional<int64_t> ParseMemAvailable(const std::string& meminfo);
// ParseMemAvailable of this machine's /proc/meminfo; nullopt where unreadable.
std::optional<int64_t> AvailableMemoryBytes();

// A size in bytes from "N" (MiB), "NM", "NMiB", "NG", "NGiB" (case-insensitive;
// N may have a fraction: "1.5G"). InvalidArgument names `what` and the text.
StatusOr<int64_t> ParseMemorySize(const std::string& text, const std::string& what);

}  // namespace specd
