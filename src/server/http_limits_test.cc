// Limits of the HTTP front end that must hold before any work is done:
// exclusive bind and port validation, the listen backlog, Content-Length
// judged at the header (no wait for a body that never comes), prompts too
// large to fit refused before tokenization, and memory handed back after a
// flood of rejected large requests. Loopback only; bounded counts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "modelgen/fixture.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace specd::server {
namespace {

std::string TinyModel() {
  static const std::string path = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specd-limits-XXXXXX").string();
    std::string dir = ::mkdtemp(tmpl.data());
    FixtureOptions o;
    o.preset = "tiny";
    o.out = dir + "/tiny";
    EXPECT_TRUE(MakeFixture(o).ok());
    return o.out;
  }();
  return path;
}

// True once `r` holds a whole response: headers and Content-Length bytes.
bool ResponseComplete(const std::string& r) {
  const size_t end = r.find("\r\n\r\n");
  if (end == std::string::npos) return false;
  const size_t at = r.find("Content-Length: ");
  if (at == std::string::npos || at > end) return true;
  return r.size() >= end + 4 + std::stoul(r.substr(at + 16));
}

// Sends `raw` on a fresh loopback connection and returns the server's
// response, or what arrived of it within `wait_s`.
std::string RawExchange(int port, const std::string& raw, int wait_s) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{wait_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(raw.size())) {
    char buf[4096];
    for (ssize_t n; !ResponseComplete(out) && (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class HttpLimitsTest : public ::testing::Test {
 protected:
  // A server on a free port; attached to the tiny model when `attach`.
  void Start(ServerOptions o, bool attach, const Tokenizer* tok = nullptr) {
    RunnerOptions ro;
    ro.model_path = TinyModel();
    ro.threads = 1;
    auto r = ModelRunner::Create(ro, comm_.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(r).value();
    engine_ = std::make_unique<Engine>(runner_.get());
    o.listen.host = "127.0.0.1";
    o.model_path = ro.model_path;
    o.served_model_name = "tiny";
    server_ = std::make_unique<OpenAiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    if (attach) {
      ASSERT_TRUE(server_->Attach(engine_.get(), tok, nullptr).ok());
    }
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::unique_ptr<Communicator> comm_ = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<OpenAiServer> server_;
};

TEST_F(HttpLimitsTest, SecondServerOnTheSamePortFails) {
  ServerOptions o;
  o.listen.port = 0;
  Start(o, false);
  ServerOptions again;
  again.listen.host = "127.0.0.1";
  again.listen.port = server_->port();
  OpenAiServer second(again);
  Status s = second.Start();
  ASSERT_FALSE(s.ok()) << "a second server bound port " << again.listen.port;
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(again.listen.port)), std::string::npos) << s.message();
}

TEST_F(HttpLimitsTest, PortOutsideTheTcpRangeIsRejectedByName) {
  for (int port : {65536, 99999, -1}) {
    ServerOptions o;
    o.listen.host = "127.0.0.1";
    o.listen.port = port;
    OpenAiServer s(o);
    Status st = s.Start();
    ASSERT_FALSE(st.ok()) << port;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("--port"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(std::to_string(port)), std::string::npos) << st.message();
  }
}

// The kernel reports a listening socket's backlog as its Send-Q (ss -ltn).
TEST_F(HttpLimitsTest, ListenBacklogIsSizedForBursts) {
  ServerOptions o;
  o.listen.port = 0;
  o.listen.listen_backlog = 512;
  Start(o, false);
  int st = 0;
  std::string out;
  {
    const std::string cmd = "ss -ltnH 'sport = :" + std::to_string(server_->port()) + "' 2>/dev/null";
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

TEST_F(HttpLimitsTest, ContentLengthIsJudgedAtTheHeader) {
  ServerOptions o;
  o.listen.port = 0;
  o.listen.max_body_bytes = 4096;
  o.listen.body_timeout_s = 120;  // a server waiting for the body would answer after the client gave up
  Start(o, true);
  const int port = server_->port();
  auto head = [](const std::string& len) {
    return "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: " + len + "\r\n\r\n";
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
  const std::string body = R"({"prompt":[1,2],"max_tokens":1})";
  r = RawExchange(port, head(std::to_string(body.size())) + body, 20);
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST_F(HttpLimitsTest, OversizedPromptIsRefusedBeforeTokenizingAndMemoryReturns) {
  const std::string demo = std::string(SPECD_SOURCE_DIR) + "/models/demo";
  auto tok = LoadHfTokenizer(demo);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ServerOptions o;
  o.listen.port = 0;
  Start(o, true, tok->get());
  // (The tiny model's vocabulary is 256: a tokenized prompt fails on its
  // token ids, an untokenized one on its byte count.)
  httplib::Client client("127.0.0.1", server_->port());
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
  res = client.Post("/v1/completions", "{\"prompt\":\"x y z\",\"max_tokens\":1}",
                    "application/json");
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

}  // namespace
}  // namespace specd::server
