// A KV-cache edit as a value. Rank 0 applies each edit to its cache when it
// makes it and ships it in the next step descriptor; every other rank applies
// the same edits in the same order with the same function (ApplyKvEdit), so
// the caches of all ranks stay identical.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "model/kv_cache.h"

namespace specd {

struct KvEdit {
  enum Kind : int32_t {
    kNewSequence = 0,   // KvCache::NewSequence must return `seq` (checked)
    kFreeSequence = 1,  // frees `seq` if it is live
    kTruncate = 2,      // keeps slots [0, length) of `seq`
    kKeepPath = 3,      // a verified draft tree's accepted path, see below
  };
  Kind kind = kNewSequence;
  int32_t seq = -1;
  // kTruncate: slots kept. kKeepPath: the KV length before the verify step
  // (the tree's root sits in slot `length`).
  int32_t length = 0;
  // kKeepPath: accepted tree nodes, root first (path[0] == 0), increasing.
  // Slot length + path[k] moves to length + k; then the sequence is cut to
  // length + path.size() slots, dropping the rejected nodes.
  std::vector<int32_t> path;

  static KvEdit NewSequence(int seq) { return {kNewSequence, seq, 0, {}}; }
  static KvEdit FreeSequence(int seq) { return {kFreeSequence, seq, 0, {}}; }
  static KvEdit Truncate(int seq, int length) { return {kTruncate, seq, length, {}}; }
  static KvEdit KeepPath(int seq, int base, std::vector<int32_t> path) {
    return {kKeepPath, seq, base, std::move(path)};
  }
};

// Applies `e` to `kv`. An edit that does not fit the cache (unknown or dead
// sequence, a length or path outside the sequence, a path that is not
// increasing from 0) changes nothing and returns InvalidArgument naming it:
// edits arrive from another process, so they are checked, not trusted.
Status ApplyKvEdit(KvCache* kv, const KvEdit& e);

}  // namespace specd
