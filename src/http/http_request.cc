#include "http/http_request.h"

#include <fmt/format.h>

#include <cctype>

namespace specd::http {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 token characters (header names, methods).
bool IsTokenChar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64))
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return out;
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (EqualsIgnoreCase(n, name)) return v;
  return "";
}

size_t HttpRequest::HeaderCount(std::string_view name) const {
  size_t n = 0;
  for (const auto& h : headers) n += EqualsIgnoreCase(h.first, name) ? 1 : 0;
  return n;
}

bool HttpRequest::KeepAlive() const {
  if (minor_version < 1) return false;
  return Lower(Header("connection")).find("close") == std::string::npos;
}

StatusOr<HttpRequest> ParseRequestHead(std::string_view head) {
  while (head.substr(0, 2) == "\r\n") head.remove_prefix(2);
  size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  HttpRequest r;
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return InvalidArgumentError("request line: expected 'METHOD TARGET HTTP/1.x', got '" +
                                Printable(line) + "'");
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  if (r.method.empty())
    return InvalidArgumentError("request line: empty method in '" + Printable(line) + "'");
  for (char c : r.method)
    if (!IsTokenChar(c))
      return InvalidArgumentError("request line: bad method '" + Printable(r.method) + "'");
  if (r.target.empty() || r.target[0] != '/')
    return InvalidArgumentError("request line: expected a target starting with '/', got '" +
                                Printable(r.target) + "'");
  if (version == "HTTP/1.1") {
    r.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    r.minor_version = 0;
  } else {
    return InvalidArgumentError("request line: expected HTTP/1.0 or HTTP/1.1, got '" +
                                Printable(version) + "'");
  }
  r.path = r.target.substr(0, r.target.find('?'));
  while (eol != std::string_view::npos) {
    const size_t start = eol + 2;
    eol = head.find("\r\n", start);
    const std::string_view field = head.substr(start, eol == std::string_view::npos
                                                          ? std::string_view::npos
                                                          : eol - start);
    if (field.empty()) continue;
    const size_t colon = field.find(':');
    if (colon == 0 || colon == std::string_view::npos)
      return InvalidArgumentError("header field: expected 'name: value', got '" +
                                  Printable(field) + "'");
    const std::string_view name = field.substr(0, colon);
    for (char c : name)
      if (!IsTokenChar(c))  // also refuses obsolete line folding (leading space)
        return InvalidArgumentError("header field: bad name '" + Printable(name) + "'");
    r.headers.emplace_back(Lower(name), std::string(Trim(field.substr(colon + 1))));
  }
  return r;
}

bool ParseContentLength(std::string_view v, uint64_t* out) {
  if (v.empty() || v.size() > 19) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = n;
  return true;
}

StatusOr<size_t> ChunkedDecoder::Consume(std::string_view in, std::string* body) {
  size_t used = 0;
  while (state_ != State::kDone) {
    const std::string_view rest = in.substr(used);
    switch (state_) {
      case State::kSize: {
        const size_t eol = rest.find("\r\n");
        if (eol == std::string_view::npos) {
          if (rest.size() > 1024) return InvalidArgumentError("chunked body: chunk-size line longer than 1 KiB");
          return used;
        }
        const std::string_view line = rest.substr(0, eol);
        std::string_view hex = Trim(line.substr(0, line.find(';')));
        if (hex.empty() || hex.size() > 15)
          return InvalidArgumentError("chunked body: expected a hexadecimal chunk size, got '" +
                                      Printable(rest.substr(0, eol)) + "'");
        uint64_t n = 0;
        for (char c : hex) {
          const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                        : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                        : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                    : -1;
          if (d < 0)
            return InvalidArgumentError("chunked body: expected a hexadecimal chunk size, got '" +
                                        Printable(hex) + "'");
          n = n * 16 + static_cast<uint64_t>(d);
        }
        if (body->size() + n > max_body_bytes_)
          return OutOfRangeError(fmt::format("chunked body: more than {} bytes", max_body_bytes_));
        used += eol + 2;
        left_ = n;
        state_ = n == 0 ? State::kTrailer : State::kData;
        break;
      }
      case State::kData: {
        if (rest.empty()) return used;
        const size_t take = static_cast<size_t>(std::min<uint64_t>(left_, rest.size()));
        body->append(rest.data(), take);
        used += take;
        left_ -= take;
        if (left_ == 0) state_ = State::kDataEnd;
        break;
      }
      case State::kDataEnd:
        if (rest.size() < 2) return used;
        if (rest.substr(0, 2) != "\r\n")
          return InvalidArgumentError("chunked body: expected CRLF after the chunk data");
        used += 2;
        state_ = State::kSize;
        break;
      case State::kTrailer: {
        const size_t eol = rest.find("\r\n");
        if (eol == std::string_view::npos) {
          if (rest.size() > 8192) return InvalidArgumentError("chunked body: trailer longer than 8 KiB");
          return used;
        }
        used += eol + 2;
        if (eol == 0) state_ = State::kDone;
        break;
      }
      case State::kDone:
        break;
    }
  }
  return used;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

}  // namespace specd::http
