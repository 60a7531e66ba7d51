// Request-head parsing and chunked bodies, against hand-written requests.
#include "http/http_request.h"

#include <gtest/gtest.h>

namespace specd::http {
namespace {

TEST(HttpRequestTest, ParsesRequestLineAndFields) {
  auto r = ParseRequestHead(
      "\r\nPOST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 \r\n"
      "X-Two: 1\r\nx-two: 2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->target, "/v1/completions?x=1");
  EXPECT_EQ(r->path, "/v1/completions");
  EXPECT_EQ(r->minor_version, 1);
  EXPECT_EQ(r->Header("CONTENT-LENGTH"), "12");
  EXPECT_EQ(r->HeaderCount("x-two"), 2u);
  EXPECT_EQ(r->Header("missing"), "");
  EXPECT_TRUE(r->KeepAlive());
  auto close = ParseRequestHead("GET / HTTP/1.1\r\nConnection: Close");
  ASSERT_TRUE(close.ok());
  EXPECT_FALSE(close->KeepAlive());
  auto old = ParseRequestHead("GET /health HTTP/1.0");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->KeepAlive());
}

TEST(HttpRequestTest, MalformedHeadsNameWhatWasWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"GET /", "request line"},
      {"GET / HTTP/2.0", "HTTP/1.0 or HTTP/1.1"},
      {"GET nope HTTP/1.1", "starting with '/'"},
      {"G(T / HTTP/1.1", "method"},
      {"GET / HTTP/1.1\r\nno colon here", "name: value"},
      {"GET / HTTP/1.1\r\n folded: x", "bad name"},
  };
  for (const auto& [head, want] : cases) {
    auto r = ParseRequestHead(head);
    ASSERT_FALSE(r.ok()) << head;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(HttpRequestTest, ContentLengthIsDigitsOnly) {
  uint64_t n = 0;
  EXPECT_TRUE(ParseContentLength("0", &n));
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(ParseContentLength("4194304", &n));
  EXPECT_EQ(n, 4194304u);
  for (const char* bad : {"", "-5", "+5", "12abc", "0x10", "1, 2", "99999999999999999999"})
    EXPECT_FALSE(ParseContentLength(bad, &n)) << bad;
}

// The same chunked body fed whole and one byte at a time decodes to the
// concatenated chunk data.
TEST(HttpRequestTest, ChunkedBodyDecodesInAnyPieces) {
  const std::string wire = "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
  const std::string want = "hello 0123456789";
  {
    ChunkedDecoder d(1024);
    std::string body;
    auto used = d.Consume(wire, &body);
    ASSERT_TRUE(used.ok());
    EXPECT_EQ(*used, wire.size());
    EXPECT_TRUE(d.done());
    EXPECT_EQ(body, want);
  }
  ChunkedDecoder d(1024);
  std::string body, pending;
  for (char c : wire) {
    pending += c;
    auto used = d.Consume(pending, &body);
    ASSERT_TRUE(used.ok()) << used.status().ToString();
    pending.erase(0, *used);
  }
  EXPECT_TRUE(d.done());
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(body, want);
}

TEST(HttpRequestTest, ChunkedBodyErrors) {
  std::string body;
  ChunkedDecoder small(8);
  auto r = small.Consume("9\r\n", &body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  ChunkedDecoder bad_size(1024);
  r = bad_size.Consume("zz\r\n", &body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hexadecimal"), std::string::npos);
  ChunkedDecoder no_crlf(1024);
  r = no_crlf.Consume("2\r\nabXY", &body);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("CRLF"), std::string::npos);
}

}  // namespace
}  // namespace specd::http
