// Stop strings on streamed text: decoded text goes in piece by piece, text
// that can no longer be the start of a stop string comes out, and the first
// stop string to be completed ends the output (it and everything after it are
// dropped), as the OpenAI API returns it. "First completed" (scanning the
// text left to right by end position) makes the result independent of how
// the text is split into pieces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specd {

// Invariant: held_ contains no complete stop string and is shorter than the
// longest stop string; it is the longest suffix of the text so far that is a
// proper prefix of some stop string. Since stop strings are valid UTF-8 and
// begin with a lead byte, held_ always starts on a character boundary.
class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Appends `text`; returns the text that is now safe to emit. Once a stop
  // string has matched, stopped() is true and Push returns "".
  std::string Push(std::string_view text);
  // End of generation without a match: releases the held text.
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace specd
