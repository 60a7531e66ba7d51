#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace specd {

std::string StreamDecoder::Push(int32_t id) {
  std::string bytes = tok_->TokenBytes(id);
  if (bytes.empty()) return "";
  if (first_) {
    // As in Decode(): the SentencePiece rule drops one space at the start of
    // the text, i.e. from the first token that decodes to anything.
    if (tok_->strips_leading_space() && bytes[0] == ' ') bytes.erase(0, 1);
    first_ = false;
  }
  pending_ += bytes;
  std::string out;
  const size_t used = tok::AppendValidUtf8(pending_, /*hold_tail=*/true, &out);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  tok::AppendValidUtf8(pending_, /*hold_tail=*/false, &out);
  pending_.clear();
  return out;
}

}  // namespace specd
