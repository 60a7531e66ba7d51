#include "model/kv_edit.h"

#include <fmt/format.h>

namespace specd {

Status ApplyKvEdit(KvCache* kv, const KvEdit& e) {
  if (e.kind == KvEdit::kNewSequence) {
    if (kv->IsLive(e.seq))
      return InvalidArgumentError(fmt::format("KV edit: new sequence {} is already live", e.seq));
    const int id = kv->NewSequence();
    if (id != e.seq) {
      kv->FreeSequence(id);
      return InvalidArgumentError(
          fmt::format("KV edit: new sequence got id {}, rank 0's is {}", id, e.seq));
    }
    return Status::Ok();
  }
  if (e.kind == KvEdit::kFreeSequence) {
    if (kv->IsLive(e.seq)) kv->FreeSequence(e.seq);
    return Status::Ok();
  }
  if (!kv->IsLive(e.seq))
    return InvalidArgumentError(fmt::format("KV edit on sequence {} that does not exist", e.seq));
  const int n = kv->Length(e.seq);
  if (e.kind == KvEdit::kTruncate) {
    if (e.length < 0 || e.length > n)
      return InvalidArgumentError(fmt::format(
          "KV edit: truncate sequence {} to {} slots, it has {}", e.seq, e.length, n));
    kv->Truncate(e.seq, e.length);
    return Status::Ok();
  }
  if (e.kind != KvEdit::kKeepPath)
    return InvalidArgumentError(fmt::format("KV edit: unknown kind {}", static_cast<int>(e.kind)));
  if (e.path.empty() || e.path[0] != 0 || e.length < 0)
    return InvalidArgumentError(fmt::format(
        "KV edit: accepted path of sequence {} must start at the root (node 0)", e.seq));
  for (size_t k = 1; k < e.path.size(); ++k) {
    if (e.path[k] <= e.path[k - 1])
      return InvalidArgumentError(
          fmt::format("KV edit: accepted path of sequence {} is not increasing", e.seq));
  }
  if (static_cast<int64_t>(e.length) + e.path.back() >= n)
    return InvalidArgumentError(fmt::format(
        "KV edit: accepted path node {} after {} slots lies outside sequence {} ({} slots)",
        e.path.back(), e.length, e.seq, n));
  for (size_t k = 1; k < e.path.size(); ++k)
    kv->MoveSlot(e.seq, e.length + e.path[k], e.length + static_cast<int>(k));
  kv->Truncate(e.seq, e.length + static_cast<int>(e.path.size()));
  return Status::Ok();
}

}  // namespace specd
