// ServeProxy against a fake rank 0 (a cpp-httplib server on its own thread)
// and real HTTP clients: the proxy's loop runs on the test's main thread, as
// it runs on the supervisor's.
#include "launch/serve_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace specd::launch {
namespace {

using Clock = std::chrono::steady_clock;

// Waits (bounded) for `flag` while the caller's thread is not the proxy's.
bool WaitFor(const std::atomic<bool>& flag, double secs = 10) {
  const auto until = Clock::now() + std::chrono::duration<double>(secs);
  while (!flag.load()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// The fake rank 0. /v1/completions answers JSON, or with "stream" in the
// body an SSE stream: one event, then (once the test says `release`) either
// a second event and [DONE] or, with cut_stream, a broken connection.
class FakeRank0 {
 public:
  FakeRank0() {
    srv_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    srv_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      last_authorization = req.get_header_value("Authorization");
      if (req.body.find("stream") == std::string::npos) {
        res.set_content("{\"echo\":" + nlohmann::json(req.body).dump() + "}", "application/json");
        return;
      }
      res.set_chunked_content_provider(
          "text/event-stream", [this](size_t, httplib::DataSink& sink) {
            const std::string first = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n";
            sink.write(first.data(), first.size());
            stream_started = true;
            const auto until = Clock::now() + std::chrono::seconds(10);
            while (!release.load() && sink.is_writable() && Clock::now() < until)
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
            released_in_time = release.load();
            if (cut_stream || !sink.is_writable()) return false;
            const std::string rest = "data: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n";
            sink.write(rest.data(), rest.size());
            sink.done();
            return true;
          });
    });
    port = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    while (!srv_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeRank0() { Stop(); }
  void Stop() {
    srv_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port = 0;
  std::atomic<bool> stream_started{false}, release{false}, released_in_time{false};
  std::atomic<bool> cut_stream{false};
  std::string last_authorization;

 private:
  httplib::Server srv_;
  std::thread thread_;
};

class ServeProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(ServeProxyOptions{}); }
  void Open(ServeProxyOptions o) {
    proxy_.reset();
    o.listen.host = "127.0.0.1";
    o.listen.port = 0;
    auto p = ServeProxy::Create(o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    proxy_ = std::move(p).value();
  }
  // Runs the proxy's loop until `f` is ready (at most 20 s) and returns its value.
  template <typename T>
  T Pump(std::future<T>& f, const std::function<void()>& each = {}) {
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      if (Clock::now() > until) {
        ADD_FAILURE() << "timed out";
        break;
      }
      proxy_->Poll(nullptr, 0, 5);
      if (each) each();
    }
    return f.get();
  }
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", proxy_->port());
    c.set_read_timeout(20, 0);
    return c;
  }
  // Streams a completion through the proxy; `on_first` runs on the client's
  // thread once the first event has arrived.
  std::future<std::string> Stream(std::function<void()> on_first = {}) {
    return std::async(std::launch::async, [this, on_first] {
      httplib::Client c = Client();
      std::string sse;
      bool first = true;
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = "{\"stream\": true}";
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
        sse.append(d, n);
        if (first && sse.find("\"a\"") != std::string::npos) {
          first = false;
          if (on_first) on_first();
        }
        return true;
      };
      auto res = c.send(req);
      return (res ? std::to_string(res->status) + "\n" : std::string("no response\n")) + sse;
    });
  }

  std::unique_ptr<ServeProxy> proxy_;
};

TEST_F(ServeProxyTest, ForwardsRequestsWithAuthorizationAndRelaysTheAnswer) {
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  auto f = std::async(std::launch::async, [this] {
    httplib::Client c = Client();
    httplib::Headers h = {{"Authorization", "Bearer k1"}};
    auto r1 = c.Post("/v1/completions", h, "{\"prompt\": \"x\"}", "application/json");
    auto r2 = c.Get("/health");  // same connection, kept alive
    return std::make_pair(r1 ? r1->status : -1, (r1 ? r1->body : "") + "|" +
                                                    (r2 ? r2->body : "no response"));
  });
  auto [status, body] = Pump(f);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "{\"echo\":\"{\\\"prompt\\\": \\\"x\\\"}\"}|{\"status\":\"ok\"}");
  EXPECT_EQ(up.last_authorization, "Bearer k1");
}

TEST_F(ServeProxyTest, StreamsEachEventAsItArrives) {
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  // Rank 0 sends its second event only once the client has the first: a
  // proxy that buffered the response would make it wait out its 10 s.
  auto f = Stream([&] { up.release = true; });
  const std::string sse = Pump(f);
  EXPECT_TRUE(up.released_in_time.load());
  EXPECT_EQ(sse,
            "200\ndata: {\"choices\":[{\"text\":\"a\"}]}\n\n"
            "data: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: [DONE]\n\n");
}

TEST_F(ServeProxyTest, SlowClientHoldsBackTheUpstream) {
  // Rank 0 streams 32 MiB; the client reads nothing for 1 s, then all of it.
  constexpr size_t kTotal = 32u << 20, kPiece = 64u << 10;
  httplib::Server big;
  big.Get("/big", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/octet-stream",
                                     [&](size_t offset, httplib::DataSink& sink) {
                                       const std::string piece(kPiece, 'x');
                                       if (!sink.write(piece.data(), piece.size())) return false;
                                       if (offset + kPiece >= kTotal) sink.done();
                                       return true;
                                     });
  });
  const int port = big.bind_to_any_port("127.0.0.1");
  std::thread t([&] { big.listen_after_bind(); });
  while (!big.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  proxy_->SetUpstream(port);
  auto f = std::async(std::launch::async, [this] {
    httplib::Client c = Client();
    size_t got = 0;
    bool first = true;
    auto res = c.Get("/big", [&](const char*, size_t n) {
      if (first) std::this_thread::sleep_for(std::chrono::seconds(1));
      first = false;
      got += n;
      return true;
    });
    return res && res->status == 200 ? got : 0;
  });
  EXPECT_EQ(Pump(f), kTotal);
  big.stop();
  t.join();
  // The high-water mark plus what one read of rank 0's socket adds.
  EXPECT_LT(proxy_->peak_buffered_bytes(), 4u << 20);
}

TEST_F(ServeProxyTest, GroupFailureEndsOpenStreamsWithErrorEventAndDone) {
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  std::atomic<bool> first{false};
  auto f = Stream([&] { first = true; });
  bool failed = false;
  const std::string sse = Pump(f, [&] {
    if (first && !failed) {
      failed = true;
      proxy_->GroupFailed("rank 1 died: killed by signal 9 (SIGKILL)", false);
    }
  });
  const size_t err = sse.find("data: {\"error\":");
  ASSERT_NE(err, std::string::npos) << sse;
  EXPECT_NE(sse.find("rank 1 died: killed by signal 9 (SIGKILL)", err), std::string::npos) << sse;
  EXPECT_NE(sse.find("\"type\":\"server_error\"", err), std::string::npos) << sse;
  EXPECT_NE(sse.find("data: [DONE]\n\n", err), std::string::npos) << sse;
  EXPECT_EQ(sse.find("\"b\""), std::string::npos) << sse;
  up.release = true;
  // Failed for good: /health and new requests say why.
  auto h = std::async(std::launch::async, [this] {
    httplib::Client c = Client();
    auto r = c.Get("/health");
    auto p = c.Post("/v1/completions", "{}", "application/json");
    return std::to_string(r ? r->status : -1) + " " + (r ? r->body : "") + " " +
           std::to_string(p ? p->status : -1) + " " + (p ? p->body : "");
  });
  const std::string got = Pump(h);
  EXPECT_EQ(got.find("503 {\"cause\":\"rank 1 died"), 0u) << got;
  EXPECT_NE(got.find("\"status\":\"failed\""), std::string::npos) << got;
  EXPECT_NE(got.find(" 503 {\"error\":{\"code\":\"rank_failed\""), std::string::npos) << got;
}

// The supervisor's cause can arrive before the proxy has read what rank 0
// sent: a stream still open to rank 0 gets its remaining bytes through.
TEST_F(ServeProxyTest, GroupFailureLetsRank0FinishWhatItHadSent) {
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  std::atomic<bool> first{false};
  auto f = Stream([&] { first = true; });
  bool failed = false;
  const std::string sse = Pump(f, [&] {
    if (first && !failed) {
      failed = true;
      proxy_->GroupFailed("rank 1 died: killed by signal 9 (SIGKILL)", false);
      up.release = true;  // rank 0 sends the rest and ends the response
    }
  });
  EXPECT_NE(sse.find("\"b\""), std::string::npos) << sse;
  EXPECT_NE(sse.find("data: [DONE]\n\n"), std::string::npos) << sse;
  EXPECT_EQ(sse.find("rank 1 died"), std::string::npos) << "rank 0's own end, not the proxy's";
}

TEST_F(ServeProxyTest, BrokenUpstreamWaitsForTheSupervisorsCause) {
  FakeRank0 up;
  up.cut_stream = true;
  proxy_->SetUpstream(up.port);
  std::atomic<bool> first{false};
  auto f = Stream([&] { first = true; });
  // Rank 0's connection breaks first; the cause arrives a little later.
  bool cut = false, told = false;
  std::chrono::steady_clock::time_point cut_at;
  const std::string sse = Pump(f, [&] {
    if (first && !cut) {
      cut = true;
      up.release = true;
      cut_at = Clock::now();
    }
    if (cut && !told && Clock::now() - cut_at > std::chrono::milliseconds(100)) {
      told = true;
      proxy_->GroupFailed("rank 0 died: killed by signal 9 (SIGKILL)", true);
    }
  });
  EXPECT_NE(sse.find("rank 0 died: killed by signal 9 (SIGKILL)"), std::string::npos) << sse;
  EXPECT_NE(sse.find("data: [DONE]\n\n"), std::string::npos) << sse;
}

TEST_F(ServeProxyTest, BrokenUpstreamWithoutCauseSaysWhatItSaw) {
  FakeRank0 up;
  up.cut_stream = true;
  proxy_->SetUpstream(up.port);
  auto f = Stream([&] { up.release = true; });
  const std::string sse = Pump(f);
  EXPECT_NE(sse.find("data: {\"error\":"), std::string::npos) << sse;
  EXPECT_NE(sse.find("rank 0"), std::string::npos) << sse;
  EXPECT_NE(sse.find("data: [DONE]\n\n"), std::string::npos) << sse;
}

TEST_F(ServeProxyTest, NonStreamRequestInFlightGets503NamingTheCause) {
  httplib::Server slow;
  std::atomic<bool> arrived{false}, leave{false};
  slow.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
    arrived = true;
    WaitFor(leave);
    res.set_content("{}", "application/json");
  });
  const int port = slow.bind_to_any_port("127.0.0.1");
  std::thread t([&] { slow.listen_after_bind(); });
  while (!slow.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  proxy_->SetUpstream(port);
  auto f = std::async(std::launch::async, [this] {
    auto r = Client().Post("/v1/completions", "{}", "application/json");
    return std::to_string(r ? r->status : -1) + " " + (r ? r->body : "");
  });
  bool failed = false;
  const std::string got = Pump(f, [&] {
    if (arrived && !failed) {
      failed = true;
      proxy_->GroupFailed("rank 1 failed: boom", true);
    }
  });
  leave = true;
  slow.stop();
  t.join();
  EXPECT_EQ(got.find("503 {\"error\":"), 0u) << got;
  EXPECT_NE(got.find("rank 1 failed: boom"), std::string::npos) << got;
}

TEST_F(ServeProxyTest, RecoveringHoldsRequestsUntilTheNewRank0) {
  FakeRank0 old_up;
  proxy_->SetUpstream(old_up.port);
  proxy_->GroupFailed("rank 1 died: killed by signal 9 (SIGKILL)", true);
  EXPECT_STREQ(proxy_->state_name(), "recovering");
  auto health = std::async(std::launch::async, [this] {
    auto r = Client().Get("/health");
    return std::to_string(r ? r->status : -1) + " " + (r ? r->body : "");
  });
  const std::string h = Pump(health);
  EXPECT_EQ(h.find("503 "), 0u) << h;
  EXPECT_NE(h.find("\"status\":\"recovering\""), std::string::npos) << h;
  EXPECT_NE(h.find("rank 1 died"), std::string::npos) << h;
  // A request sent now waits for the new group.
  std::atomic<bool> sent{false};
  auto f = std::async(std::launch::async, [&] {
    sent = true;
    auto r = Client().Post("/v1/completions", "{\"n\": 1}", "application/json");
    return std::to_string(r ? r->status : -1) + " " + (r ? r->body : "");
  });
  // Let it reach the proxy's queue, then bring up "the new rank 0".
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::milliseconds(200)) proxy_->Poll(nullptr, 0, 5);
  EXPECT_NE(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  FakeRank0 new_up;
  proxy_->SetUpstream(new_up.port);
  EXPECT_EQ(Pump(f), "200 {\"echo\":\"{\\\"n\\\": 1}\"}");
}

TEST_F(ServeProxyTest, GivingUpAnswersHeldRequests503) {
  proxy_->GroupFailed("rank 1 died", true);
  auto f = std::async(std::launch::async, [this] {
    auto r = Client().Post("/v1/completions", "{}", "application/json");
    return std::to_string(r ? r->status : -1) + " " + (r ? r->body : "");
  });
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::milliseconds(200)) proxy_->Poll(nullptr, 0, 5);
  proxy_->GroupFailed("rank 0 died", false);
  const std::string got = Pump(f);
  EXPECT_EQ(got.find("503 "), 0u) << got;
  EXPECT_NE(got.find("rank 0 died"), std::string::npos) << got;
}

TEST_F(ServeProxyTest, HeldRequestsAreBounded) {
  ServeProxyOptions o;
  o.max_pending = 1;
  Open(o);
  proxy_->GroupFailed("rank 1 died", true);
  auto post = [this] {
    auto r = Client().Post("/v1/completions", "{}", "application/json");
    return std::to_string(r ? r->status : -1) + " " + (r ? r->body : "");
  };
  auto first = std::async(std::launch::async, post);
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::milliseconds(200)) proxy_->Poll(nullptr, 0, 5);
  // The queue is full: the second is refused at once, the first still waits.
  auto second = std::async(std::launch::async, post);
  const std::string refused = Pump(second);
  EXPECT_EQ(refused.find("503 "), 0u) << refused;
  EXPECT_NE(refused.find("1 requests already wait"), std::string::npos) << refused;
  EXPECT_NE(first.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  proxy_->GroupFailed("rank 1 died", false);
  EXPECT_EQ(Pump(first).find("503 "), 0u);
}

// Raw requests for the limits; returns what the proxy sent before closing.
std::string RawExchange(int port, const std::string& send_first, const std::string& trickle = "",
                        int trickle_ms = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return "connect failed";
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)!::send(fd, send_first.data(), send_first.size(), MSG_NOSIGNAL);
  for (char ch : trickle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(trickle_ms));
    if (::send(fd, &ch, 1, MSG_NOSIGNAL) != 1) break;
  }
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return got;
}

TEST_F(ServeProxyTest, HeadMustArriveWholeWithinTheDeadline) {
  ServeProxyOptions o;
  o.listen.header_timeout_s = 0.3;
  Open(o);
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  // One header byte every 50 ms keeps the connection busy but never finishes
  // the head: the whole-head deadline answers 408 and closes.
  const int port = proxy_->port();
  auto f = std::async(std::launch::async, [port] {
    return RawExchange(port, "GET /health HTTP/1.1\r\nHost: x\r\n", std::string(200, 'a'), 50);
  });
  const std::string got = Pump(f);
  EXPECT_EQ(got.find("HTTP/1.1 408 "), 0u) << got;
}

TEST_F(ServeProxyTest, BodyMustArriveWholeWithinItsDeadline) {
  ServeProxyOptions o;
  o.listen.body_timeout_s = 0.3;
  Open(o);
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  const int port = proxy_->port();
  auto f = std::async(std::launch::async, [port] {
    return RawExchange(port, "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n",
                       std::string(100, 'a'), 50);
  });
  const std::string got = Pump(f);
  EXPECT_EQ(got.find("HTTP/1.1 408 "), 0u) << got;
  EXPECT_NE(got.find("the request body was not complete within 0.3 s"), std::string::npos) << got;
}

TEST_F(ServeProxyTest, LimitsAnsweredBeforeForwarding) {
  ServeProxyOptions o;
  o.listen.max_body_bytes = 100;
  o.listen.max_header_bytes = 512;
  Open(o);
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  const int port = proxy_->port();
  auto f = std::async(std::launch::async, [port] {
    return RawExchange(port, "POST /v1/completions HTTP/1.1\r\nContent-Length: 101\r\n\r\n") +
           "|" +
           RawExchange(port,
                       "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "c8\r\n" + std::string(200, 'a') + "\r\n0\r\n\r\n") +
           "|" +
           RawExchange(port, "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n") +
           "|" + RawExchange(port, "GET /health HTTP/1.1\r\nX: " + std::string(600, 'a') +
                                       "\r\n\r\n") +
           "|" + RawExchange(port, "POST /v1/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n");
  });
  const std::string got = Pump(f);
  // Over the body limit, by Content-Length and by a chunked body.
  EXPECT_NE(got.find("HTTP/1.1 413 "), std::string::npos) << got;
  EXPECT_NE(got.find("HTTP/1.1 413 ", got.find("HTTP/1.1 413 ") + 1), std::string::npos) << got;
  EXPECT_NE(got.find("HTTP/1.1 501 "), std::string::npos) << got;
  EXPECT_NE(got.find("HTTP/1.1 431 "), std::string::npos) << got;
  EXPECT_NE(got.find("HTTP/1.1 400 "), std::string::npos) << got;
}

// A chunked request body (as the front end accepts at TP 1) reaches rank 0
// whole, re-framed with a Content-Length.
TEST_F(ServeProxyTest, ChunkedBodyIsForwardedWhole) {
  FakeRank0 up;
  proxy_->SetUpstream(up.port);
  const int port = proxy_->port();
  auto f = std::async(std::launch::async, [port] {
    return RawExchange(port,
                       "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                       "Connection: close\r\n\r\n5\r\n{\"a\":\r\n3;ext=1\r\n12}\r\n0\r\n\r\n");
  });
  const std::string got = Pump(f);
  EXPECT_EQ(got.find("HTTP/1.1 200 "), 0u) << got;
  EXPECT_NE(got.find(R"({"echo":"{\"a\":12}"})"), std::string::npos) << got;
}

TEST_F(ServeProxyTest, ConnectionsOverTheCapAre503) {
  ServeProxyOptions o;
  o.listen.max_connections = 2;
  Open(o);
  const int port = proxy_->port();
  // Two idle connections hold the cap; the third is refused.
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    held.push_back(fd);
  }
  for (int i = 0; i < 20 && proxy_->open_connections() < 2; ++i) proxy_->Poll(nullptr, 0, 10);
  EXPECT_EQ(proxy_->open_connections(), 2u);
  auto f = std::async(std::launch::async,
                      [port] { return RawExchange(port, "GET /health HTTP/1.1\r\n\r\n"); });
  const std::string got = Pump(f);
  EXPECT_EQ(got.find("HTTP/1.1 503 "), 0u) << got;
  EXPECT_NE(got.find("too many open connections"), std::string::npos) << got;
  for (int fd : held) ::close(fd);
}

TEST_F(ServeProxyTest, PollReportsReadyDescriptors) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pollfd fds[1] = {{p[0], POLLIN, 0}};
  EXPECT_EQ(proxy_->Poll(fds, 1, 10), 0);
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  EXPECT_EQ(proxy_->Poll(fds, 1, 1000), 1);
  EXPECT_TRUE(fds[0].revents & POLLIN);
  ::close(p[1]);
  ::close(p[0]);
}

}  // namespace
}  // namespace specd::launch
