// One HTTP test suite, two front ends. Each test of the server's HTTP
// behaviour runs against the server answering its clients itself ("direct")
// and against the serve proxy in front of it ("proxy", what `specd serve`
// puts there with --tp > 1 or --restart-ranks > 0): the proxy must answer
// every case exactly as the server does.
//
// In process (StartServer): an OpenAiServer over a random-weight tiny model
// (no tokenizer unless one is given: token-id prompts) and, for "proxy", a
// ServeProxy on its own thread with the same listen options, told the
// server's port once the server is attached, as rank 0 reports it. As a
// child process (ServeArgs): `specd serve`, with --restart-ranks 1 for
// "proxy" (a supervised group of one behind the proxy).
//
// Used by the server's unit tests (http_server_test.cc, http_limits_test.cc:
// in process, so the sanitizer builds run them against both) and by
// tests/slow_clients_test.cc (the binary).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "launch/serve_proxy.h"
#include "modelgen/fixture.h"
#include "server/http_server.h"

namespace specd::testing {

enum class Frontend { kDirect, kProxy };

inline std::string FrontendName(const ::testing::TestParamInfo<Frontend>& info) {
  return info.param == Frontend::kDirect ? "direct" : "proxy";
}

// The tiny model's folder, made once per test binary.
inline const std::string& HttpTinyModel() {
  static const std::string path = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specd-http-XXXXXX").string();
    const std::string dir = ::mkdtemp(tmpl.data());
    FixtureOptions o;
    o.preset = "tiny";
    o.out = dir + "/tiny";
    const Status s = MakeFixture(o);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return o.out;
  }();
  return path;
}

// A ServeProxy whose loop runs on a thread of its own (in `specd serve` it
// runs on the supervisor's main thread). Every call on the proxy happens on
// that thread; SetUpstream hands the port over.
class ProxyThread {
 public:
  static StatusOr<std::unique_ptr<ProxyThread>> Start(const launch::ServeProxyOptions& o) {
    auto p = launch::ServeProxy::Create(o);
    if (!p.ok()) return p.status();
    std::unique_ptr<ProxyThread> t(new ProxyThread(std::move(p).value()));
    t->thread_ = std::thread([raw = t.get()] { raw->Loop(); });
    return t;
  }
  ~ProxyThread() {
    stop_.store(true);
    thread_.join();
  }
  int port() const { return port_; }
  // Any thread: the proxy forwards to 127.0.0.1:port once this returns.
  void SetUpstream(int port) {
    upstream_.store(port);
    for (int i = 0; i < 1000 && upstream_.load() != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(upstream_.load(), 0) << "the proxy's loop did not take the upstream port";
  }

 private:
  explicit ProxyThread(std::unique_ptr<launch::ServeProxy> proxy)
      : proxy_(std::move(proxy)), port_(proxy_->port()) {}
  void Loop() {
    while (!stop_.load()) {
      if (const int up = upstream_.exchange(0); up != 0) proxy_->SetUpstream(up);
      proxy_->Poll(nullptr, 0, 10);
    }
    proxy_.reset();  // on the thread that ran it
  }

  std::unique_ptr<launch::ServeProxy> proxy_;
  const int port_;
  std::atomic<int> upstream_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class HttpFrontendTest : public ::testing::TestWithParam<Frontend> {
 protected:
  bool proxied() const { return GetParam() == Frontend::kProxy; }

  // Starts the front end in process (a running one is stopped first); the
  // server is attached to the tiny model when `attach` (else see Attach).
  // The listen host and port are always 127.0.0.1 and any free port.
  void StartServer(server::ServerOptions o, bool attach = true,
                   const Tokenizer* tokenizer = nullptr) {
    StopServer();
    RunnerOptions ro;
    ro.model_path = HttpTinyModel();
    ro.threads = 2;
    auto r = ModelRunner::Create(ro, comm_.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(r).value();
    engine_ = std::make_unique<Engine>(runner_.get());
    o.listen.host = "127.0.0.1";
    o.listen.port = 0;
    o.model_path = ro.model_path;
    o.served_model_name = "tiny";
    server_ = std::make_unique<server::OpenAiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    if (proxied()) {
      // As `specd serve` configures the supervisor's proxy (app/cmd_serve.cc).
      launch::ServeProxyOptions po;
      po.listen = o.listen;
      po.max_pending = o.scheduler.max_queue;
      auto p = ProxyThread::Start(po);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      proxy_ = std::move(p).value();
    }
    if (attach) Attach(tokenizer);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port());
    client_->set_read_timeout(30, 0);
  }

  // Attaches the server to the engine; the proxy then forwards to it.
  void Attach(const Tokenizer* tokenizer = nullptr) {
    ASSERT_TRUE(server_->Attach(engine_.get(), tokenizer, nullptr).ok());
    if (proxy_) proxy_->SetUpstream(server_->port());
  }

  // The address clients use: the proxy's port, or the server's.
  int port() const { return proxy_ ? proxy_->port() : server_->port(); }

  // Starts and stops a front end of this kind on `listen` (the second
  // server of a port, an invalid port) and returns how Start went.
  Status StartAnother(const http::ListenOptions& listen) {
    if (proxied()) {
      launch::ServeProxyOptions po;
      po.listen = listen;
      return launch::ServeProxy::Create(po).status();
    }
    server::ServerOptions o;
    o.listen = listen;
    server::OpenAiServer s(o);
    return s.Start();
  }

  // The arguments of `specd ARGS` (a `serve` command) for this front end.
  std::vector<std::string> ServeArgs(std::vector<std::string> args) const {
    if (proxied()) {
      args.push_back("--restart-ranks");
      args.push_back("1");
    }
    return args;
  }

  void StopServer() {
    proxy_.reset();
    if (server_) server_->Shutdown();
    // The old server and engine go before the runner they use.
    server_.reset();
    engine_.reset();
    runner_.reset();
  }
  void TearDown() override { StopServer(); }

  std::unique_ptr<Communicator> comm_ = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::OpenAiServer> server_;
  std::unique_ptr<ProxyThread> proxy_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace specd::testing

// Runs the suite `fixture` (derived from HttpFrontendTest) against both.
#define SPECD_HTTP_FRONTENDS(fixture)                                                             \
  INSTANTIATE_TEST_SUITE_P(                                                                       \
      Frontends, fixture,                                                                         \
      ::testing::Values(::specd::testing::Frontend::kDirect, ::specd::testing::Frontend::kProxy), \
      ::specd::testing::FrontendName)
