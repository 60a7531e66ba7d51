// The public face of `specd serve` when the ranks run under the supervisor
// (--tp > 1 or --restart-ranks > 0): an event-driven HTTP/1.1 reverse proxy
// that owns the listening socket in the supervisor process and forwards each
// request to rank 0's server on 127.0.0.1 (libevent; the client side is
// evhttp). Because the connection to the client outlives rank 0, a dead rank
// ends every open stream with an error event instead of a cut connection, and
// the supervisor can start a fresh rank group behind the same address.
//
// States: loading (until rank 0 reports its port) -> serving -> recovering
// (the group failed and a fresh one is starting) -> serving ..., or failed
// (the group failed and no restart follows); stopping after SIGINT/SIGTERM.
//  - serving: every request goes to rank 0; responses are relayed as they
//    arrive (an SSE stream chunk by chunk, nothing buffered); the client's
//    headers (Authorization included) pass through except hop-by-hop ones.
//  - GroupFailed: each open SSE stream gets
//      data: {"error": {"message": "<cause>", "type": "server_error", ...}}
//      data: [DONE]
//    and is closed; a request whose response has not started gets 503 with
//    the same error JSON; a started non-stream body is cut (its
//    Content-Length tells the client).
//  - recovering: GET /health answers 503 {"status": "recovering", "cause"};
//    other requests are held (at most max_pending, else 503) and forwarded
//    once SetUpstream names the new rank 0.
//  - loading / failed / stopping: /health 503 {"status": "loading" |
//    "failed" | "stopping"}, other requests 503 with an error JSON.
// When the upstream connection breaks before the supervisor has said why, the
// response waits up to upstream_lost_wait_s for GroupFailed's cause. When the
// cause comes first, a response still open to rank 0 gets up to
// kFailedUpstreamGrace for what rank 0 had sent (the tokens decided before
// the failure, then rank 0's own error event) before the proxy ends it with
// the cause; a broken connection ends it at once.
//
// Limits of its own, judged and worded as the server's front end judges them
// (http/request_limits.h, http/listen_options.h): the request head must
// arrive whole within header_timeout_s of the connection becoming idle and
// the body within body_timeout_s of the head's end, neither extended by
// arriving bytes (408 otherwise, so a client trickling bytes cannot hold a
// connection), heads over max_header_bytes get 431, a body over
// max_body_bytes 413 (a Content-Length is judged before the body is read;
// chunked bodies are decoded and sent on with a Content-Length), a POST
// without either 411, and connections over max_connections are answered 503
// at accept (the cap is lowered to fit the process's descriptor limit, which
// Create raises to its hard cap). After a refusal, or the last response of a
// connection, the proxy shuts its write side and reads and drops what the
// client still sends until the client closes or kLingerS pass, so an early
// answer (413 while the body is still coming) is not lost to a reset. A
// client that half-closes after its request (shutdown(SHUT_WR)) gets its
// answer, then the connection closes. Requests on one connection are served
// one at a time. A slow client holds back rank 0: past 1 MiB of its response
// waiting in the proxy, rank 0's socket is not read until the client drains
// it.
//
// Thread safety: none; every call happens on the thread that runs Poll (the
// supervisor's main thread, which forks the ranks: the proxy starts no
// threads).
#pragma once

#include <poll.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <set>
#include <string>

#include "base/status.h"
#include "http/listen_options.h"

struct event_base;
struct evconnlistener;
struct evhttp_request;
struct sockaddr;

namespace specd::launch {

struct ServeProxyOptions {
  http::ListenOptions listen;  // port 0: any free port (see ServeProxy::port)
  int max_pending = 256;            // requests held while recovering
  double upstream_timeout_s = 3600;  // longest silence of rank 0 within a response
  double upstream_lost_wait_s = 1.0;
};

class ServeProxy {
 public:
  // Binds options.host:port (SO_REUSEADDR, no SO_REUSEPORT: a second server
  // on the port fails with IoError naming the address) and listens.
  static StatusOr<std::unique_ptr<ServeProxy>> Create(const ServeProxyOptions& options);
  ~ServeProxy();
  ServeProxy(const ServeProxy&) = delete;
  ServeProxy& operator=(const ServeProxy&) = delete;

  int port() const { return port_; }

  // poll(2) for readability of `fds` (revents gets POLLIN on readable or
  // hung-up fds) with the proxy's events served meanwhile. Returns the number
  // of ready fds, 0 on timeout (timeout_ms < 0: none).
  int Poll(pollfd* fds, size_t n, int timeout_ms);

  // Rank 0's server listens on 127.0.0.1:port: forward there (held requests first).
  void SetUpstream(int port);
  // The rank group failed; `cause` names the root cause (see the header comment).
  void GroupFailed(const std::string& cause, bool restarting);
  // SIGINT/SIGTERM: refuse new requests; in-flight ones run on.
  void Stopping();
  // Stops listening and serves until every response is complete or `seconds` passed.
  void Drain(double seconds);

  // Observability for tests and logs.
  const char* state_name() const;
  // Client connections held (those answered 503 at accept excluded).
  size_t open_connections() const { return conns_.size() - static_cast<size_t>(rejecting_); }
  // Most response bytes ever waiting for one client.
  size_t peak_buffered_bytes() const { return peak_buffered_; }

  struct Conn;
  struct Upstream;

 private:
  enum class State { kLoading, kServing, kRecovering, kFailed, kStopping };
  explicit ServeProxy(const ServeProxyOptions& options);

  static void OnAccept(evconnlistener*, int fd, sockaddr*, int, void* arg);
  void Accept(int fd);
  Conn* NewConn(int fd, bool counted);
  void OnRead(Conn* c);
  // The client's FIN arrived (see the class comment).
  void OnClientEof(Conn* c);
  void Dispatch(Conn* c);
  void Forward(Conn* c);
  void Reply(Conn* c, int code, const std::string& content_type, const std::string& body,
             bool close);
  void ReplyError(Conn* c, int code, const std::string& message, const std::string& type,
                  const std::string& code_name);
  // A request the proxy will not forward, answered as the server's front end
  // answers it (then the connection closes).
  void Refuse(Conn* c, int code, const std::string& message);
  void FailResponse(Conn* c, const std::string& message);
  void FinishResponse(Conn* c);
  void CloseAfterWrite(Conn* c);
  // The last response is written: shut the write side and wait for the
  // client's close (at most kLingerS), or free the connection now if the
  // client has closed its side already.
  void Linger(Conn* c);
  void FreeConn(Conn* c);
  void DetachUpstream(Conn* c);
  void ArmDeadline(Conn* c, double seconds);
  // Ends responses in flight at a group failure (see the class comment).
  void FailInFlight(const std::string& cause);
  static constexpr double kFailedUpstreamGrace = 0.5;
  static constexpr double kLingerS = 2;
  // Connections answered 503 at accept that may linger at once; beyond it
  // they are closed unanswered.
  static constexpr int kMaxRejecting = 256;

  // Upstream callbacks (evhttp).
  static int OnUpstreamHead(evhttp_request* req, void* arg);
  static void OnUpstreamChunk(evhttp_request* req, void* arg);
  static void OnUpstreamDone(evhttp_request* req, void* arg);
  void UpstreamLost(Conn* c, const std::string& why);
  // FailResponse(c, why) after `seconds`, unless the response ends first
  // (FinishResponse or FailResponse free the timer).
  void ArmFailTimer(Conn* c, const std::string& why, double seconds);

  ServeProxyOptions options_;
  event_base* base_ = nullptr;
  evconnlistener* listener_ = nullptr;
  int port_ = 0;
  State state_ = State::kLoading;
  int upstream_port_ = 0;
  std::string cause_;  // the last GroupFailed cause
  std::set<Conn*> conns_;
  int rejecting_ = 0;          // of conns_, those answered 503 at accept
  std::deque<Conn*> pending_;  // held while recovering, oldest first
  size_t peak_buffered_ = 0;
};

// For a forked rank: closes every socket the process inherited (the proxy's
// listener and client connections stay with the supervisor) and restores
// SIGPIPE's default action.
void CloseInheritedSockets();

}  // namespace specd::launch
