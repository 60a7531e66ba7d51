// The HTTP/1.1 front end of the server: one event-loop thread (libevent 2.1
// core: event_base, bufferevent, evconnlistener) does all socket I/O for
// every connection, so a slow client holds a few hundred bytes of buffer and
// a timer, never a thread. Handlers run on the loop thread and must not
// block; work that does (tokenizing, waiting for the engine) is handed to
// other threads, which answer through HttpExchange (thread-safe: each call
// is queued and carried out on the loop thread).
//
// Deadlines, none of them restarted by arriving bytes:
//   header:     the request line and header fields, complete within
//               header_timeout_s of the connection opening (or of the first
//               byte of a later request on a kept-alive connection), else
//               408 and close;
//   body:       the whole body within body_timeout_s of the header's end,
//               else 408 and close;
//   keep-alive: an idle connection closes after keep_alive_timeout_s;
//   write:      a response the client stops reading for write_timeout_s
//               (no progress at all) is dropped with its connection.
// Limits judged at the header, before any body byte is read (then the
// connection closes): a header over max_header_bytes (431), a POST without
// Content-Length or chunked coding (411), a malformed or repeated
// Content-Length (400), one over max_body_bytes (413; a chunked body is
// stopped at the limit), and whatever `head_check` refuses; judged and worded
// by http/request_limits.h, as the serve proxy judges them. Connections
// beyond max_connections are answered 503 and closed at once. After a
// refusal or a connection's last response, the write side is shut and what
// the client still sends is read and dropped (for at most 2 s) before the
// close, so the answer is not lost to a reset. A client that half-closes
// after its request (shutdown(SHUT_WR)) gets the answer, then the connection
// closes.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/http_request.h"
#include "http/listen_options.h"

namespace specd::server {

using http::ChunkedDecoder;
using http::HttpRequest;
using http::ParseContentLength;
using http::ParseRequestHead;
using http::ReasonPhrase;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields
};

struct HttpFrontOptions {
  http::ListenOptions listen;
  double keep_alive_timeout_s = 5;
  double write_timeout_s = 30;
};

class HttpFront;
struct FrontMailbox;

// One request and its answer. Thread-safe. Exactly one of Reply() or
// StartStream() .. End() answers it; calls after the first answer (and all
// calls once the client has gone) are ignored.
class HttpExchange : public std::enable_shared_from_this<HttpExchange> {
 public:
  HttpExchange(std::shared_ptr<FrontMailbox> mailbox, uint64_t conn_id, HttpRequest request);
  const HttpRequest& request() const { return request_; }
  // Frees the request body (large prompts: before malloc_trim).
  void ReleaseBody() { std::string().swap(request_.body); }
  void Reply(HttpResponse response);
  // Starts a chunked response (status 200); Send() writes one chunk.
  void StartStream(std::string content_type, std::vector<std::pair<std::string, std::string>> headers);
  // False once the client has gone (the data is then dropped).
  bool Send(std::string data);
  void End();
  // The connection closed before the answer was complete (client hung up,
  // reset, or stopped reading; or the server stopped).
  bool client_gone() const { return gone_.load(); }

 private:
  friend class HttpFront;
  std::shared_ptr<FrontMailbox> mailbox_;
  const uint64_t conn_id_;
  HttpRequest request_;
  std::atomic<bool> gone_{false};
  std::atomic<bool> answered_{false};
};

class HttpFront {
 public:
  // Both run on the loop thread and must not block. `head_check` sees each
  // request head before its body is read: a response refuses the request
  // (the connection then closes). `handler` gets each complete request.
  using HeadCheck = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  using Handler = std::function<void(std::shared_ptr<HttpExchange>)>;
  // Runs (on the loop thread) for every response status sent.
  using StatusLog = std::function<void(int status)>;
  // The response the front end itself sends for an error it detects (408,
  // 411, 413, 503, ...); `message` says what was wrong.
  using ErrorPage = std::function<HttpResponse(int status, const std::string& message)>;

  HttpFront(HttpFrontOptions options, HeadCheck head_check, Handler handler, StatusLog log,
            ErrorPage error_page);
  ~HttpFront();

  // Binds host:port exclusively (SO_REUSEADDR, no SO_REUSEPORT), listens and
  // starts the loop thread. InvalidArgument for a port outside 0..65535;
  // IoError naming the address when it cannot be bound.
  Status Start();
  int port() const { return port_; }
  int max_connections() const { return max_connections_; }
  // Open connections (rejected ones excluded). Any thread.
  int connections() const { return n_conns_.load(); }
  // Lets pending responses drain for up to `flush_s`, closes every
  // connection (open exchanges see client_gone()) and joins the loop thread.
  // Idempotent.
  void Stop(double flush_s);

  // Loop-thread internals (public for the C callbacks in http_front.cc).
  struct Conn;
  struct Impl;

 private:
  friend class HttpExchange;
  HttpFrontOptions options_;
  HeadCheck head_check_;
  Handler handler_;
  StatusLog log_;
  ErrorPage error_page_;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<FrontMailbox> mailbox_;
  std::thread loop_thread_;
  int port_ = 0;
  int max_connections_ = 0;
  std::atomic<int> n_conns_{0};
  bool stopped_ = false;
};

}  // namespace specd::server
