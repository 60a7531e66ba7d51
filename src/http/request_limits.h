// What an HTTP front end refuses before a request reaches a handler, and the
// words it refuses with. The server's front end (server/http_front.h) and the
// serve proxy (launch/serve_proxy.h) both judge requests here, so a client
// gets the same status and message from either. After any of these refusals
// the connection closes (after a linger that reads and drops what the client
// still sends, so the refusal is not lost to a reset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "http/http_request.h"

namespace specd::http {

// How a request's body is framed, judged from its head alone (before any
// body byte is read). status 0: accepted, and the body is chunked or
// `content_length` bytes (0: none); otherwise the status to answer (400, 411,
// 413 or 501) and `message`, why.
struct BodyFraming {
  int status = 0;
  std::string message;
  bool chunked = false;
  uint64_t content_length = 0;
};

// Refused, in this order: both Transfer-Encoding and Content-Length (400); a
// Transfer-Encoding that does not end in chunked (501); a repeated
// Content-Length or one that is not a non-negative decimal integer (400); one
// over max_body_bytes (413); a POST with neither (411: its body, if any, could
// not be told from the next request). An empty Content-Length counts as none.
BodyFraming JudgeBodyFraming(const HttpRequest& head, size_t max_body_bytes);

// The messages of the limits found while a request is read (the flag named
// is `specd serve`'s).
std::string HeadTooLargeMessage(size_t max_header_bytes);       // 431
std::string HeadTimeoutMessage(double header_timeout_s);        // 408
std::string BodyTimeoutMessage(double body_timeout_s);          // 408
std::string ChunkedBodyTooLargeMessage(size_t max_body_bytes);  // 413
std::string TooManyConnectionsMessage(int max_connections);     // 503

// The OpenAI error type of a refusal's status.
inline const char* RefusalType(int status) {
  return status >= 500 ? "server_error" : "invalid_request_error";
}

}  // namespace specd::http
