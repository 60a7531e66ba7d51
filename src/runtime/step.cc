#include "runtime/step.h"

#include <cstring>

namespace specd {
namespace {

class Writer {
 public:
  void I32(int32_t v) { Raw(&v, 4); }
  void Bytes(const void* p, size_t n) {
    I32(static_cast<int32_t>(n));
    Raw(p, n);
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    I32(static_cast<int32_t>(v.size()));
    Raw(v.data(), v.size() * sizeof(T));
  }
  std::string out;

 private:
  void Raw(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  bool I32(int32_t* v) { return Raw(v, 4); }
  template <typename T>
  bool Vec(std::vector<T>* v) {
    int32_t n;
    if (!I32(&n) || n < 0 || static_cast<size_t>(n) * sizeof(T) > s_.size() - pos_) return false;
    v->resize(n);
    return Raw(v->data(), n * sizeof(T));
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  bool Raw(void* p, size_t n) {
    if (n > s_.size() - pos_) return false;
    if (n) std::memcpy(p, s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::string SerializeStep(const StepDesc& d) {
  Writer w;
  w.I32(0x53544550);  // "STEP"
  w.I32(d.shutdown);
  w.I32(d.capture_aux);
  w.I32(static_cast<int32_t>(d.kv_edits.size()));
  for (const KvEdit& e : d.kv_edits) {
    w.I32(e.kind);
    w.I32(e.seq);
    w.I32(e.length);
    w.Vec(e.path);
  }
  w.I32(static_cast<int32_t>(d.batch.size()));
  for (const SeqInput& s : d.batch) {
    w.I32(s.seq);
    w.I32(s.all_logits);
    w.Vec(s.tokens);
    w.Vec(s.pos);
    w.Vec(s.tree_mask);
  }
  return std::move(w.out);
}

StatusOr<StepDesc> DeserializeStep(const std::string& bytes) {
  Reader r(bytes);
  StepDesc d;
  int32_t magic, shutdown, capture, n_edits, n;
  auto bad = [&] {
    return CorruptionError("malformed step descriptor of " + std::to_string(bytes.size()) +
                           " bytes");
  };
  if (!r.I32(&magic) || magic != 0x53544550 || !r.I32(&shutdown) || !r.I32(&capture) ||
      !r.I32(&n_edits) || n_edits < 0 || static_cast<size_t>(n_edits) > bytes.size())
    return bad();
  d.kv_edits.resize(n_edits);
  for (KvEdit& e : d.kv_edits) {
    int32_t kind;
    if (!r.I32(&kind) || kind < KvEdit::kNewSequence || kind > KvEdit::kKeepPath ||
        !r.I32(&e.seq) || !r.I32(&e.length) || !r.Vec(&e.path))
      return bad();
    e.kind = static_cast<KvEdit::Kind>(kind);
  }
  if (!r.I32(&n) || n < 0 || static_cast<size_t>(n) > bytes.size()) return bad();
  d.shutdown = shutdown != 0;
  d.capture_aux = capture != 0;
  d.batch.resize(n);
  for (SeqInput& s : d.batch) {
    int32_t all;
    if (!r.I32(&s.seq) || !r.I32(&all) || !r.Vec(&s.tokens) || !r.Vec(&s.pos) ||
        !r.Vec(&s.tree_mask))
      return bad();
    s.all_logits = all != 0;
  }
  if (!r.done()) return bad();
  return d;
}

}  // namespace specd
