#include "launch/serve_proxy.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "http/http_request.h"
#include "http/request_limits.h"
#include "launch/serve_proxy_conn.h"

namespace specd::launch {

namespace proxy_detail {

timeval Tv(double s) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool HopByHop(const std::string& lower_name) {
  static const char* const kNames[] = {"connection", "keep-alive", "proxy-connection",
                                       "proxy-authenticate", "proxy-authorization", "te",
                                       "trailer", "transfer-encoding", "upgrade", "host",
                                       "content-length", "expect"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](const char* n) { return lower_name == n; });
}

std::string ErrorJson(const std::string& message, const std::string& type,
                      const std::string& code) {
  nlohmann::json j = {{"error",
                       {{"message", message},
                        {"type", type},
                        {"param", nullptr},
                        {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace proxy_detail

namespace {

using proxy_detail::ErrorJson;
using proxy_detail::HopByHop;
using proxy_detail::Lower;
using proxy_detail::Tv;

std::string PathOf(const std::string& target) { return target.substr(0, target.find('?')); }

}  // namespace

ServeProxy::ServeProxy(const ServeProxyOptions& options) : options_(options) {}

StatusOr<std::unique_ptr<ServeProxy>> ServeProxy::Create(const ServeProxyOptions& options) {
  if (options.listen.port < 0 || options.listen.port > 65535) {
    return InvalidArgumentError("--port: expected 0..65535, got " + std::to_string(options.listen.port));
  }
  std::unique_ptr<ServeProxy> p(new ServeProxy(options));
  if (p->options_.listen.max_connections <= 0) p->options_.listen.max_connections = 4096;
  // Each proxied request holds two sockets (client and rank 0): raise the
  // descriptor limit to its hard cap and keep the connection cap inside it,
  // so accept() never fails for want of descriptors.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    if (nofile.rlim_cur < nofile.rlim_max) {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit(RLIMIT_NOFILE, &nofile);
      getrlimit(RLIMIT_NOFILE, &nofile);
    }
    const rlim_t fit = nofile.rlim_cur > 128 ? (nofile.rlim_cur - 64) / 2 : 32;
    if (static_cast<rlim_t>(p->options_.listen.max_connections) > fit) {
      LOG_WARN("serve", "proxy connection cap lowered from {} to {} (descriptor limit {})",
               p->options_.listen.max_connections, fit, static_cast<uint64_t>(nofile.rlim_cur));
      p->options_.listen.max_connections = static_cast<int>(fit);
    }
  }
  // The supervisor writes to sockets whose peer may be gone: EPIPE, not death.
  ::signal(SIGPIPE, SIG_IGN);
  p->base_ = event_base_new();
  if (p->base_ == nullptr) return IoError("cannot create the proxy's event loop");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string where = options.listen.host + ":" + std::to_string(options.listen.port);
  if (int rc = getaddrinfo(options.listen.host.c_str(), std::to_string(options.listen.port).c_str(), &hints,
                           &res);
      rc != 0) {
    return InvalidArgumentError("--host: cannot resolve '" + options.listen.host +
                                "': " + gai_strerror(rc));
  }
  p->listener_ = evconnlistener_new_bind(
      p->base_, &ServeProxy::OnAccept, p.get(),
      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
      options.listen.listen_backlog, res->ai_addr, static_cast<int>(res->ai_addrlen));
  const int err = errno;
  freeaddrinfo(res);
  if (p->listener_ == nullptr) {
    return IoError("cannot listen on " + where + ": " + std::strerror(err) +
                   (err == EADDRINUSE ? " (another server holds the port)" : ""));
  }
  // accept() failing (e.g. EMFILE) leaves the connection queued and the
  // socket readable: pause accepting for 100 ms instead of spinning.
  evconnlistener_set_error_cb(p->listener_, [](evconnlistener* l, void* arg) {
    auto* proxy = static_cast<ServeProxy*>(arg);
    LOG_WARN("serve", "proxy accept failed: {}: pausing new connections for 100 ms",
             std::strerror(errno));
    evconnlistener_disable(l);
    timeval tv = Tv(0.1);
    event_base_once(
        proxy->base_, -1, EV_TIMEOUT,
        [](evutil_socket_t, short, void* arg) {
          auto* proxy = static_cast<ServeProxy*>(arg);
          if (proxy->listener_ != nullptr && proxy->state_ != State::kStopping)
            evconnlistener_enable(proxy->listener_);
        },
        proxy, &tv);
  });
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(evconnlistener_get_fd(p->listener_), reinterpret_cast<sockaddr*>(&ss), &len);
  p->port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return p;
}

ServeProxy::~ServeProxy() {
  while (!conns_.empty()) FreeConn(*conns_.begin());
  if (listener_ != nullptr) evconnlistener_free(listener_);
  listener_ = nullptr;
  // Deferred upstream frees still queued run now.
  if (base_ != nullptr) {
    event_base_loop(base_, EVLOOP_NONBLOCK);
    event_base_free(base_);
  }
}

const char* ServeProxy::state_name() const {
  switch (state_) {
    case State::kLoading: return "loading";
    case State::kServing: return "serving";
    case State::kRecovering: return "recovering";
    case State::kFailed: return "failed";
    case State::kStopping: return "stopping";
  }
  return "?";
}

int ServeProxy::Poll(pollfd* fds, size_t n, int timeout_ms) {
  struct Waiter {
    pollfd* pfd;
    int* fired;
  };
  int fired = 0;
  bool timed_out = false;
  std::vector<Waiter> waiters(n);
  std::vector<event*> evs;
  for (size_t i = 0; i < n; ++i) {
    fds[i].revents = 0;
    waiters[i] = {&fds[i], &fired};
    event* ev = event_new(
        base_, fds[i].fd, EV_READ,
        [](evutil_socket_t, short, void* arg) {
          auto* w = static_cast<Waiter*>(arg);
          w->pfd->revents |= POLLIN;
          ++*w->fired;
        },
        &waiters[i]);
    event_add(ev, nullptr);
    evs.push_back(ev);
  }
  event* timer = nullptr;
  if (timeout_ms >= 0) {
    timer = evtimer_new(
        base_, [](evutil_socket_t, short, void* arg) { *static_cast<bool*>(arg) = true; },
        &timed_out);
    timeval tv = Tv(timeout_ms / 1000.0);
    evtimer_add(timer, &tv);
  }
  while (fired == 0 && !timed_out) {
    if (event_base_loop(base_, EVLOOP_ONCE) < 0) break;
  }
  for (event* ev : evs) event_free(ev);
  if (timer != nullptr) event_free(timer);
  return fired;
}

void ServeProxy::OnAccept(evconnlistener*, int fd, sockaddr*, int, void* arg) {
  static_cast<ServeProxy*>(arg)->Accept(fd);
}

void ServeProxy::Accept(int fd) {
  const bool over = static_cast<int>(open_connections()) >= options_.listen.max_connections;
  if (over || state_ == State::kStopping) {
    // Answered 503 and closed, lingering as any refusal does, unless too
    // many are lingering already.
    if (rejecting_ >= kMaxRejecting) {
      ::close(fd);
      return;
    }
    Conn* c = NewConn(fd, /*counted=*/false);
    if (!over) {
      return ReplyError(c, 503, "the server is shutting down", "server_error", "shutting_down");
    }
    return Refuse(c, 503, http::TooManyConnectionsMessage(options_.listen.max_connections));
  }
  NewConn(fd, /*counted=*/true);
}

ServeProxy::Conn* ServeProxy::NewConn(int fd, bool counted) {
  // Relayed pieces (a response head, then its body; SSE events) go out at
  // once: with Nagle, a second small write waits for the client's delayed ACK
  // (40 ms on Linux).
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto* c = new Conn;
  c->proxy = this;
  c->counted = counted;
  c->bev = bufferevent_socket_new(base_, fd, BEV_OPT_CLOSE_ON_FREE);
  c->deadline = evtimer_new(
      base_,
      [](evutil_socket_t, short, void* arg) {
        auto* c = static_cast<Conn*>(arg);
        ServeProxy* p = c->proxy;
        if (c->state == Conn::kClosing) return p->FreeConn(c);  // the linger is over
        if (c->state != Conn::kHead && c->state != Conn::kBody) return;
        const bool started =
            c->state == Conn::kBody || evbuffer_get_length(bufferevent_get_input(c->bev)) > 0;
        if (!started) return p->FreeConn(c);  // idle keep-alive connection
        p->Refuse(c, 408,
                  c->state == Conn::kBody
                      ? http::BodyTimeoutMessage(p->options_.listen.body_timeout_s)
                      : http::HeadTimeoutMessage(p->options_.listen.header_timeout_s));
      },
      c);
  bufferevent_setcb(
      c->bev, [](bufferevent*, void* arg) { auto* c = static_cast<Conn*>(arg); c->proxy->OnRead(c); },
      [](bufferevent* bev, void* arg) {
        auto* c = static_cast<Conn*>(arg);
        if (c->upstream_paused && c->up != nullptr) {
          c->upstream_paused = false;
          bufferevent_enable(evhttp_connection_get_bufferevent(c->up->conn), EV_READ);
        }
        if (c->state == Conn::kClosing && !c->shut_wr &&
            evbuffer_get_length(bufferevent_get_output(bev)) == 0)
          c->proxy->Linger(c);
      },
      [](bufferevent*, short what, void* arg) {
        auto* c = static_cast<Conn*>(arg);
        if ((what & BEV_EVENT_EOF) && !(what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
          return c->proxy->OnClientEof(c);
        c->proxy->FreeConn(c);
      },
      c);
  bufferevent_enable(c->bev, EV_READ | EV_WRITE);
  conns_.insert(c);
  if (!counted) ++rejecting_;
  ArmDeadline(c, options_.listen.header_timeout_s);
  return c;
}

void ServeProxy::ArmDeadline(Conn* c, double seconds) {
  timeval tv = Tv(seconds);
  evtimer_add(c->deadline, &tv);
}

void ServeProxy::OnRead(Conn* c) {
  evbuffer* in = bufferevent_get_input(c->bev);
  if (c->state == Conn::kClosing) {  // lingering: what the client still sends is dropped
    evbuffer_drain(in, evbuffer_get_length(in));
    return;
  }
  if (c->state == Conn::kHead) {
    evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, nullptr);
    const size_t avail = evbuffer_get_length(in);
    if (end.pos < 0) {
      if (avail > options_.listen.max_header_bytes)
        Refuse(c, 431, http::HeadTooLargeMessage(options_.listen.max_header_bytes));
      return;
    }
    const size_t head_len = static_cast<size_t>(end.pos) + 4;
    if (head_len > options_.listen.max_header_bytes) {
      Refuse(c, 431, http::HeadTooLargeMessage(options_.listen.max_header_bytes));
      return;
    }
    std::string head(head_len - 4, '\0');
    evbuffer_remove(in, head.data(), head_len - 4);
    evbuffer_drain(in, 4);
    c->body.clear();
    c->content_length = 0;
    c->chunked.reset();
    c->sse = false;
    c->head_sent = c->chunked_out = false;
    c->version = "HTTP/1.1";  // for an error reply to a head that does not parse
    StatusOr<http::HttpRequest> parsed = http::ParseRequestHead(head);
    if (!parsed.ok()) {
      Refuse(c, 400, parsed.status().message());
      return;
    }
    http::HttpRequest& r = *parsed;
    c->method = r.method;
    c->target = r.target;
    c->version = "HTTP/1." + std::to_string(r.minor_version);
    c->keep_alive = r.KeepAlive();
    const bool expect_continue = Lower(r.Header("expect")) == "100-continue";
    const http::BodyFraming framing = http::JudgeBodyFraming(r, options_.listen.max_body_bytes);
    if (framing.status != 0) {
      Refuse(c, framing.status, framing.message);
      return;
    }
    if (framing.chunked)
      c->chunked = std::make_unique<http::ChunkedDecoder>(options_.listen.max_body_bytes);
    c->content_length = static_cast<size_t>(framing.content_length);
    c->headers = std::move(r.headers);
    c->state = Conn::kBody;
    ArmDeadline(c, options_.listen.body_timeout_s);
    if (expect_continue && (c->chunked || c->content_length > evbuffer_get_length(in))) {
      bufferevent_write(c->bev, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
  }
  if (c->state == Conn::kBody && c->chunked) {
    const size_t avail = evbuffer_get_length(in);
    if (avail == 0) return;
    const char* data = reinterpret_cast<const char*>(evbuffer_pullup(in, -1));
    StatusOr<size_t> used = c->chunked->Consume(std::string_view(data, avail), &c->body);
    if (!used.ok()) {
      if (used.status().code() == StatusCode::kOutOfRange)
        Refuse(c, 413, http::ChunkedBodyTooLargeMessage(options_.listen.max_body_bytes));
      else
        Refuse(c, 400, used.status().message());
      return;
    }
    evbuffer_drain(in, *used);
    if (!c->chunked->done()) return;
    c->chunked.reset();
    evtimer_del(c->deadline);
    Dispatch(c);
    return;
  }
  if (c->state == Conn::kBody) {
    if (evbuffer_get_length(in) < c->content_length) return;
    c->body.resize(c->content_length);
    evbuffer_remove(in, c->body.data(), c->content_length);
    evtimer_del(c->deadline);
    Dispatch(c);
    return;
  }
  // A response is in progress: later bytes wait (one request at a time), but
  // not without bound.
  if (evbuffer_get_length(in) > options_.listen.max_header_bytes + options_.listen.max_body_bytes) FreeConn(c);
}

void ServeProxy::Dispatch(Conn* c) {
  const std::string path = PathOf(c->target);
  const bool health = path == "/health";
  switch (state_) {
    case State::kServing:
      return Forward(c);
    case State::kRecovering:
      if (health) {
        nlohmann::json j = {{"status", "recovering"}, {"cause", cause_}};
        return Reply(c, 503, "application/json",
                     j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), false);
      }
      if (static_cast<int>(pending_.size()) >= options_.max_pending) {
        return ReplyError(c, 503,
                          "the rank group is restarting and " + std::to_string(pending_.size()) +
                              " requests already wait for it (" + cause_ + ")",
                          "server_error", "recovering");
      }
      c->state = Conn::kQueued;
      pending_.push_back(c);
      return;
    case State::kLoading:
      if (health) return Reply(c, 503, "application/json", "{\"status\":\"loading\"}", false);
      return ReplyError(c, 503, "the model is still loading", "server_error", "loading");
    case State::kFailed:
      if (health) {
        nlohmann::json j = {{"status", "failed"}, {"cause", cause_}};
        return Reply(c, 503, "application/json",
                     j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), false);
      }
      return ReplyError(c, 503, "the server failed: " + cause_, "server_error", "rank_failed");
    case State::kStopping:
      if (health) return Reply(c, 503, "application/json", "{\"status\":\"stopping\"}", false);
      return ReplyError(c, 503, "the server is shutting down", "server_error", "shutting_down");
  }
}

void ServeProxy::Reply(Conn* c, int code, const std::string& content_type,
                       const std::string& body, bool close) {
  if (close) c->keep_alive = false;
  std::string head = c->version.empty() ? "HTTP/1.1" : c->version;
  head += " " + std::to_string(code) + " " + http::ReasonPhrase(code) + "\r\nContent-Type: " + content_type +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (code == 503 && state_ == State::kRecovering) head += "Retry-After: 1\r\n";
  head += c->keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  bufferevent_write(c->bev, head.data(), head.size());
  if (c->method != "HEAD") bufferevent_write(c->bev, body.data(), body.size());
  c->head_sent = true;
  c->chunked_out = false;
  FinishResponse(c);
}

void ServeProxy::ReplyError(Conn* c, int code, const std::string& message,
                            const std::string& type, const std::string& code_name) {
  // A request the proxy could not read completely leaves the connection in
  // an unknown state: close it.
  const bool unread = c->state == Conn::kHead || c->state == Conn::kBody;
  if (unread) evtimer_del(c->deadline);
  Reply(c, code, "application/json", ErrorJson(message, type, code_name), unread);
}

void ServeProxy::Refuse(Conn* c, int code, const std::string& message) {
  ReplyError(c, code, message, http::RefusalType(code), "");
}

void ServeProxy::CloseAfterWrite(Conn* c) {
  c->state = Conn::kClosing;
  evtimer_del(c->deadline);
  if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) Linger(c);
}

void ServeProxy::Linger(Conn* c) {
  if (c->read_eof) return FreeConn(c);
  // Closing now, with request bytes unread, would send a reset that can
  // discard the response before the client reads it.
  c->shut_wr = true;
  ::shutdown(bufferevent_getfd(c->bev), SHUT_WR);
  ArmDeadline(c, kLingerS);
}

void ServeProxy::OnClientEof(Conn* c) {
  c->read_eof = true;
  if (c->state == Conn::kQueued || c->state == Conn::kUpstream) {
    // Answered, then closed; unless another request has already arrived
    // behind this one, this answer is the last.
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) c->keep_alive = false;
    return;
  }
  // Output already queued (the last answer) is written out; a request not
  // yet whole is dropped.
  if (c->state != Conn::kClosing) return CloseAfterWrite(c);
  if (c->shut_wr || evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) FreeConn(c);
}

void ServeProxy::FreeConn(Conn* c) {
  if (conns_.erase(c) == 0) return;
  if (!c->counted) --rejecting_;
  pending_.erase(std::remove(pending_.begin(), pending_.end(), c), pending_.end());
  DetachUpstream(c);
  if (c->lost_timer != nullptr) event_free(c->lost_timer);
  event_free(c->deadline);
  bufferevent_free(c->bev);
  delete c;
}

void ServeProxy::SetUpstream(int port) {
  if (state_ == State::kStopping) return;
  upstream_port_ = port;
  state_ = State::kServing;
  std::deque<Conn*> held;
  held.swap(pending_);
  if (!held.empty()) LOG_INFO("serve", "forwarding {} requests held during recovery", held.size());
  for (Conn* c : held) Forward(c);
}

void ServeProxy::GroupFailed(const std::string& cause, bool restarting) {
  cause_ = cause;
  if (state_ != State::kStopping) state_ = restarting ? State::kRecovering : State::kFailed;
  // Streams waiting for the cause of their broken upstream get it now.
  std::vector<Conn*> lost;
  for (Conn* c : conns_)
    if (c->lost_timer != nullptr) lost.push_back(c);
  for (Conn* c : lost) FailResponse(c, cause);
  FailInFlight(cause);
  if (!restarting) {
    std::deque<Conn*> held;
    held.swap(pending_);
    for (Conn* c : held) ReplyError(c, 503, "the server failed: " + cause, "server_error",
                                    "rank_failed");
  }
}

void ServeProxy::Stopping() {
  state_ = State::kStopping;
  std::deque<Conn*> held;
  held.swap(pending_);
  for (Conn* c : held)
    ReplyError(c, 503, "the server is shutting down", "server_error", "shutting_down");
}

void ServeProxy::Drain(double seconds) {
  if (listener_ != nullptr) evconnlistener_free(listener_);
  listener_ = nullptr;
  if (state_ != State::kFailed) state_ = State::kStopping;
  for (Conn* c : std::vector<Conn*>(pending_.begin(), pending_.end()))
    ReplyError(c, 503, "the server is shutting down", "server_error", "shutting_down");
  bool timed_out = false;
  event* timer = evtimer_new(
      base_, [](evutil_socket_t, short, void* arg) { *static_cast<bool*>(arg) = true; },
      &timed_out);
  timeval tv = Tv(seconds);
  evtimer_add(timer, &tv);
  auto busy = [&] {
    for (Conn* c : conns_) {
      if (c->state == Conn::kUpstream || (c->state == Conn::kClosing && !c->shut_wr)) return true;
      if (evbuffer_get_length(bufferevent_get_output(c->bev)) > 0) return true;
    }
    return false;
  };
  while (busy() && !timed_out) {
    if (event_base_loop(base_, EVLOOP_ONCE) < 0) break;
  }
  event_free(timer);
  // What is still open has no response coming.
  while (!conns_.empty()) FreeConn(*conns_.begin());
}

void CloseInheritedSockets() {
  ::signal(SIGPIPE, SIG_DFL);
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return;
  std::vector<int> socks;
  const int dir_fd = dirfd(d);
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dir_fd) continue;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) socks.push_back(fd);
  }
  closedir(d);
  for (int fd : socks) ::close(fd);
}

}  // namespace specd::launch
