#include "http/request_limits.h"

#include <fmt/format.h>

#include <cctype>

namespace specd::http {

BodyFraming JudgeBodyFraming(const HttpRequest& head, size_t max_body_bytes) {
  BodyFraming f;
  const std::string te = head.Header("transfer-encoding");
  const size_t n_cl = head.HeaderCount("content-length");
  const std::string cl = head.Header("content-length");
  auto refuse = [&f](int status, std::string message) {
    f.status = status;
    f.message = std::move(message);
    return f;
  };
  if (!te.empty()) {
    std::string lower = te;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (n_cl > 0)
      return refuse(400, "a request may not carry both Transfer-Encoding and Content-Length");
    if (lower.size() < 7 || lower.compare(lower.size() - 7, 7, "chunked") != 0)
      return refuse(501, "Transfer-Encoding: only 'chunked' is supported, got '" + te + "'");
    f.chunked = true;
    return f;
  }
  if (n_cl > 1 || (n_cl == 1 && !cl.empty())) {
    uint64_t n = 0;
    if (n_cl > 1 || !ParseContentLength(cl, &n))
      return refuse(400,
                    "Content-Length: expected one non-negative decimal integer, got '" + cl + "'");
    if (n > max_body_bytes)
      return refuse(413,
                    fmt::format("request body of {} bytes is larger than the limit of {} bytes "
                                "(--max-body-bytes)",
                                n, max_body_bytes));
    f.content_length = n;
    return f;
  }
  if (head.method == "POST")
    return refuse(411, "a POST needs a Content-Length header (or chunked encoding)");
  return f;
}

std::string HeadTooLargeMessage(size_t max_header_bytes) {
  return fmt::format("the request header is larger than {} bytes", max_header_bytes);
}

std::string HeadTimeoutMessage(double header_timeout_s) {
  return fmt::format("the request header was not complete within {} s (--header-timeout)",
                     header_timeout_s);
}

std::string BodyTimeoutMessage(double body_timeout_s) {
  return fmt::format("the request body was not complete within {} s of its header (--timeout)",
                     body_timeout_s);
}

std::string ChunkedBodyTooLargeMessage(size_t max_body_bytes) {
  return fmt::format("request body larger than the limit of {} bytes (--max-body-bytes)",
                     max_body_bytes);
}

std::string TooManyConnectionsMessage(int max_connections) {
  return fmt::format("too many open connections (the limit is {}: --max-connections)",
                     max_connections);
}

}  // namespace specd::http
