// Limits of the HTTP front end that must hold before any work is done:
// exclusive bind and port validation, the listen backlog, Content-Length
// judged at the header (no wait for a body that never comes; none at all is a
// 411), prompts too large to fit refused before tokenization, and memory
// handed back after a flood of rejected large requests; and the connection
// edge cases: a client that half-closes after its request still gets the
// answer, and one still writing a refused body reads the refusal instead of
// a reset. Against the server and the proxy in front of it
// (http_frontend_testing.h). Loopback only; bounded counts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "server/http_frontend_testing.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace specd::server {
namespace {

// True once `r` holds a whole response: headers and Content-Length bytes.
bool ResponseComplete(const std::string& r) {
  const size_t end = r.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const size_t at = r.find("Content-Length: ");
  if (at == std::string::npos || at > end) return true;
  return r.size() >= end + 4 + std::stoul(r.substr(at + 16));
}

// A blocking loopback connection to `port` whose reads give up after
// `wait_s`, or -1.
int Connect(int port, int wait_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{wait_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  ::close(fd);
  return -1;
}

bool SendAll(int fd, const std::string& data) {
  return ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

// Reads until the server closes `fd` (or the read deadline passes); *err is
// the errno that ended it, 0 for an orderly close.
std::string ReadToClose(int fd, int* err) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  *err = n == 0 ? 0 : errno;
  return out;
}

// Sends `raw` on a fresh loopback connection and returns the server's
// response, or what arrived of it within `wait_s`.
std::string RawExchange(int port, const std::string& raw, int wait_s) {
  const int fd = Connect(port, wait_s);
  std::string out;
  if (fd >= 0 && SendAll(fd, raw)) {
    char buf[4096];
    for (ssize_t n; !ResponseComplete(out) && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  if (fd >= 0) ::close(fd);
  return out;
}

// Sends `raw`, then half-closes the connection (shutdown(SHUT_WR), as
// `nc -N` does: the request is complete, nothing more will come) and returns
// everything the server sends until it closes (at most 20 s).
std::string HalfClosedExchange(int port, const std::string& raw) {
  const int fd = Connect(port, 20);
  std::string out;
  int err = 0;
  if (fd >= 0 && SendAll(fd, raw) && ::shutdown(fd, SHUT_WR) == 0) out = ReadToClose(fd, &err);
  if (fd >= 0) ::close(fd);
  return out;
}

std::string CompletionRequest(const std::string& body) {
  return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class HttpLimitsTest : public testing::HttpFrontendTest {};

TEST_P(HttpLimitsTest, SecondServerOnTheSamePortFails) {
  StartServer(ServerOptions(), /*attach=*/false);
  http::ListenOptions again;
  again.host = "127.0.0.1";
  again.port = port();
  const Status s = StartAnother(again);
  ASSERT_FALSE(s.ok()) << "a second server bound port " << again.port;
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(again.port)), std::string::npos) << s.message();
}

TEST_P(HttpLimitsTest, PortOutsideTheTcpRangeIsRejectedByName) {
  for (int port : {65536, 99999, -1}) {
    http::ListenOptions l;
    l.host = "127.0.0.1";
    l.port = port;
    const Status st = StartAnother(l);
    ASSERT_FALSE(st.ok()) << port;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("--port"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(std::to_string(port)), std::string::npos) << st.message();
  }
}

// The kernel reports a listening socket's backlog as its Send-Q (ss -ltn).
TEST_P(HttpLimitsTest, ListenBacklogIsSizedForBursts) {
  ServerOptions o;
  o.listen.listen_backlog = 512;
  StartServer(o, /*attach=*/false);
  int st = 0;
  std::string out;
  {
    const std::string cmd = "ss -ltnH 'sport = :" + std::to_string(port()) + "' 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[512];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
    st = ::pclose(p);
  }
  ASSERT_EQ(st, 0) << "ss (iproute2) failed";
  std::istringstream fields(out);
  std::string state;
  long recv_q = -1, send_q = -1;
  fields >> state >> recv_q >> send_q;
  ASSERT_EQ(state, "LISTEN") << out;
  long somaxconn = 4096;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  EXPECT_EQ(send_q, std::min<long>(512, somaxconn)) << out;
}

TEST_P(HttpLimitsTest, ContentLengthIsJudgedAtTheHeader) {
  ServerOptions o;
  o.listen.max_body_bytes = 4096;
  o.listen.body_timeout_s =
      120;  // a server waiting for the body would answer after the client gave up
  StartServer(o);
  const int port = this->port();
  auto head = [](const std::string& len) {
    return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           len + "\r\n\r\n";
  };
  // Over the limit, no body sent: 413 now, then the connection closes.
  std::string r = RawExchange(port, head("99999999"), 20);
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  EXPECT_NE(r.find("--max-body-bytes"), std::string::npos) << r;
  for (const char* bad : {"-5", "12abc", "0x10", "1, 2", "99999999999999999999999"}) {
    r = RawExchange(port, head(bad), 20);
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << "Content-Length '" << bad << "': " << r;
    EXPECT_NE(r.find("Content-Length"), std::string::npos) << r;
  }
  // No length at all (an empty value counts as none): 411, not a read until
  // the client closes.
  for (const std::string& raw :
       {head(""), std::string("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")}) {
    r = RawExchange(port, raw, 20);
    EXPECT_EQ(r.rfind("HTTP/1.1 411", 0), 0u) << raw << " -> " << r;
  }
  // A correct one still works.
  r = RawExchange(port, CompletionRequest(R"({"prompt":[1,2],"max_tokens":1})"), 20);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST_P(HttpLimitsTest, OversizedPromptIsRefusedBeforeTokenizingAndMemoryReturns) {
  const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
  auto tok = LoadHfTokenizer(demo);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  StartServer(ServerOptions(), /*attach=*/true, tok->get());
  // (The tiny model's vocabulary is 256: a tokenized prompt fails on its
  // token ids, an untokenized one on its byte count.)
  httplib::Client client("127.0.0.1", port());
  client.set_read_timeout(60, 0);
  // Within the body limit (4 MiB) but far more bytes than the tiny model's
  // context can hold in tokens of the demo vocabulary.
  const std::string prompt(3u << 20, 'a');
  const std::string body = "{\"prompt\":\"" + prompt + "\",\"max_tokens\":1}";
  auto res = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const OJson e = OJson::parse(res->body, nullptr, false);
  EXPECT_EQ(e["error"]["param"], "prompt");
  // The byte-count message: the prompt was never tokenized.
  EXPECT_NE(e["error"]["message"].get<std::string>().find("bytes"), std::string::npos) << res->body;
  // A short prompt is tokenized (and then judged by its token ids).
  res =
      client.Post("/v1/completions", "{\"prompt\":\"x y z\",\"max_tokens\":1}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("token id"), std::string::npos) << res->body;

  // A flood of rejected 3 MiB requests leaves resident memory near where it
  // started (without trimming, the HTTP threads' arenas kept ~20 MB each).
  const long before = RssKiB();
  for (int i = 0; i < 40; ++i) {
    res = client.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 400);
  }
  const long after = RssKiB();
  std::printf("[ INFO     ] RSS before %ld KiB, after 40 rejected 3 MiB prompts %ld KiB\n", before,
              after);
  EXPECT_LT(after - before, 64 * 1024) << "resident memory grew by " << (after - before) << " KiB";
}

// What either front end refuses while reading a request, with the same status
// and words; a chunked body within the limit is read whole and answered.
TEST_P(HttpLimitsTest, RefusalsWhileReadingTheRequest) {
  ServerOptions o;
  o.listen.max_body_bytes = 100;
  o.listen.max_header_bytes = 512;
  o.listen.body_timeout_s = 0.5;
  StartServer(o);
  struct Case {
    std::string raw;
    std::string status;
    std::string words;
  };
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const Case cases[] = {
      {"GET /health HTTP/1.1\r\nX-Big: " + std::string(600, 'a') + "\r\n\r\n", "431",
       "larger than 512 bytes"},
      {post + "Transfer-Encoding: gzip\r\n\r\n", "501", "only 'chunked'"},
      {post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", "400",
       "both Transfer-Encoding and Content-Length"},
      {post + "Content-Length: 1\r\nContent-Length: 1\r\n\r\n{", "400", "Content-Length"},
      {post + "Transfer-Encoding: chunked\r\n\r\nc8\r\n" + std::string(200, ' ') + "\r\n0\r\n\r\n",
       "413", "--max-body-bytes"},
      {post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", "400", "chunk"},
      {post + "Content-Length: 50\r\n\r\n{", "408", "--timeout"},
  };
  for (const Case& k : cases) {
    const std::string r = RawExchange(port(), k.raw, 20);
    EXPECT_EQ(r.rfind("HTTP/1.1 " + k.status + " ", 0), 0u) << k.raw << "\n-> " << r;
    EXPECT_NE(r.find(k.words), std::string::npos) << r;
  }
  const std::string r = RawExchange(port(),
                                    post +
                                        "Transfer-Encoding: chunked\r\n\r\n"
                                        "d\r\n{\"prompt\":[1,\r\n12;x=1\r\n2],\"max_tokens\":1}\r\n"
                                        "0\r\n\r\n",
                                    20);
  EXPECT_EQ(r.rfind("HTTP/1.1 200 ", 0), 0u) << r;
  EXPECT_NE(r.find(R"("object":"text_completion")"), std::string::npos) << r;
}

// A client that half-closes once its request is sent (nc -N, or any client
// that signals the end of its input) still gets the answer.
TEST_P(HttpLimitsTest, HalfClosedClientGetsItsAnswer) {
  StartServer(ServerOptions());
  for (int i = 0; i < 20; ++i) {
    std::string r = HalfClosedExchange(port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << "GET /health, try " << i << ": " << r;
    EXPECT_NE(r.find(R"({"status":"ok"})"), std::string::npos) << r;
    r = HalfClosedExchange(port(), CompletionRequest(R"({"prompt":[1,2],"max_tokens":2})"));
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << "POST /v1/completions, try " << i << ": " << r;
    EXPECT_NE(r.find(R"("object":"text_completion")"), std::string::npos) << r;
  }
}

// A body without Content-Length (or chunked coding) cannot be told from the
// next request: 411, and the body bytes are never read as a request.
TEST_P(HttpLimitsTest, BodyWithoutContentLengthIs411) {
  StartServer(ServerOptions());
  const int fd = Connect(port(), 20);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\n\r\n"
                      R"({"prompt":[1,2],"max_tokens":1})"));
  int err = 0;
  const std::string r = ReadToClose(fd, &err);
  ::close(fd);
  EXPECT_EQ(r.rfind("HTTP/1.1 411", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Length"), std::string::npos) << r;
  EXPECT_EQ(r.find("HTTP/1.1", 1), std::string::npos) << "a second answer: " << r;
  EXPECT_EQ(err, 0) << std::strerror(err);
}

// A Content-Length over the limit is answered 413 at the header; a client
// still writing its body then reads the 413 rather than a reset (the server
// reads and drops the rest of the body before it closes).
TEST_P(HttpLimitsTest, EarlyRefusalReachesAClientStillWriting) {
  ServerOptions o;
  o.listen.max_body_bytes = 4096;
  StartServer(o);
  constexpr size_t kBody = 1u << 20, kPiece = 64u << 10;
  const int fd = Connect(port(), 20);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(kBody) + "\r\n\r\n" + std::string(kPiece, ' ')));
  // The 413 arrives while most of the body is still to be sent.
  pollfd pfd{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 20000), 1) << "no answer to the head";
  int send_err = 0;
  for (size_t sent = kPiece; sent < kBody && send_err == 0; sent += kPiece)
    if (!SendAll(fd, std::string(kPiece, ' '))) send_err = errno;
  ::shutdown(fd, SHUT_WR);
  int read_err = 0;
  const std::string r = ReadToClose(fd, &read_err);
  ::close(fd);
  EXPECT_EQ(send_err, 0) << "writing the body: " << std::strerror(send_err);
  EXPECT_EQ(read_err, 0) << "reading the answer: " << std::strerror(read_err);
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  EXPECT_NE(r.find("--max-body-bytes"), std::string::npos) << r;
}

SPECD_HTTP_FRONTENDS(HttpLimitsTest);

}  // namespace
}  // namespace specd::server
