// An HTTP/1.x request as the server's front end (server/http_front.h) and
// the serve proxy (launch/serve_proxy.h) read it off a connection: the head
// (request line and header fields) parsed in one piece once its blank line
// has arrived, then the body framed by Content-Length or chunked transfer
// coding (RFC 9112).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace specd::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent (case-sensitive, RFC 9110)
  std::string target;  // the request target as sent: path and query
  std::string path;    // target up to '?'
  int minor_version = 1;  // HTTP/1.<minor_version>
  // Header fields in arrival order; names lower-cased, values without the
  // surrounding whitespace.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first value of header `name` (any case), or "" when absent.
  std::string Header(std::string_view name) const;
  size_t HeaderCount(std::string_view name) const;
  bool HasHeader(std::string_view name) const { return HeaderCount(name) > 0; }
  // Whether the connection may carry another request after this one
  // (HTTP/1.1 unless "Connection: close"; HTTP/1.0 never).
  bool KeepAlive() const;
};

// Parses a request head: "METHOD SP TARGET SP HTTP/1.x" CRLF, then
// "name: value" CRLF lines; `head` ends before the blank line. Leading empty
// lines are ignored (RFC 9112 2.2). InvalidArgument names what was wrong.
StatusOr<HttpRequest> ParseRequestHead(std::string_view head);

// A Content-Length value: only decimal digits (RFC 9110), no sign, no
// overflow. False for anything else.
bool ParseContentLength(std::string_view v, uint64_t* out);

// Decodes a chunked body incrementally: Consume() takes what has arrived and
// appends the chunk data to *body. Chunk extensions and trailer fields are
// skipped.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(size_t max_body_bytes) : max_body_bytes_(max_body_bytes) {}
  // Consumes a prefix of `in` (the bytes it could decode; the rest must be
  // offered again with more data appended) and returns its length.
  // InvalidArgument for malformed framing; OutOfRange once the decoded body
  // would exceed max_body_bytes.
  StatusOr<size_t> Consume(std::string_view in, std::string* body);
  // The last chunk and the trailer section have been consumed.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kData, kDataEnd, kTrailer, kDone };
  const size_t max_body_bytes_;
  State state_ = State::kSize;
  uint64_t left_ = 0;  // data bytes of the current chunk still to come
};

// The reason phrase of a status code ("Not Found"); a generic one for codes
// without an entry.
const char* ReasonPhrase(int status);

}  // namespace specd::http
