// Body framing judged from request heads alone, as both front ends judge it.
#include "http/request_limits.h"

#include <gtest/gtest.h>

namespace specd::http {
namespace {

BodyFraming Judge(const std::string& head, size_t max_body_bytes = 100) {
  auto r = ParseRequestHead(head);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return JudgeBodyFraming(*r, max_body_bytes);
}

TEST(RequestLimitsTest, AcceptsContentLengthChunkedAndNoBody) {
  BodyFraming f = Judge("POST / HTTP/1.1\r\nContent-Length: 100");
  EXPECT_EQ(f.status, 0) << f.message;
  EXPECT_EQ(f.content_length, 100u);
  EXPECT_FALSE(f.chunked);
  f = Judge("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked");
  EXPECT_EQ(f.status, 0) << f.message;
  EXPECT_TRUE(f.chunked);
  f = Judge("GET /health HTTP/1.1");
  EXPECT_EQ(f.status, 0) << f.message;
  EXPECT_EQ(f.content_length, 0u);
  EXPECT_FALSE(f.chunked);
}

TEST(RequestLimitsTest, PostWithoutLengthIs411) {
  for (const char* head : {"POST /v1/completions HTTP/1.1\r\nHost: a",
                           "POST /v1/completions HTTP/1.1\r\nContent-Length: "}) {
    const BodyFraming f = Judge(head);
    EXPECT_EQ(f.status, 411) << head;
    EXPECT_NE(f.message.find("Content-Length"), std::string::npos) << f.message;
  }
}

TEST(RequestLimitsTest, RefusesBadFramingByStatus) {
  EXPECT_EQ(Judge("POST / HTTP/1.1\r\nContent-Length: 101").status, 413);
  EXPECT_NE(Judge("POST / HTTP/1.1\r\nContent-Length: 101").message.find("--max-body-bytes"),
            std::string::npos);
  EXPECT_EQ(Judge("POST / HTTP/1.1\r\nContent-Length: -1").status, 400);
  EXPECT_EQ(Judge("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1").status, 400);
  EXPECT_EQ(Judge("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1").status,
            400);
  EXPECT_EQ(Judge("POST / HTTP/1.1\r\nTransfer-Encoding: gzip").status, 501);
}

}  // namespace
}  // namespace specd::http
