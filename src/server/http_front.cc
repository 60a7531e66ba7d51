#include "server/http_front.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/logging.h"
#include "base/thread_annotations.h"
#include "http/request_limits.h"

namespace specd::server {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kMaxRejecting = 256;
constexpr double kLingerS = 2;
// Input buffered per connection before reading pauses (a request being
// handled while its client sends more).
constexpr size_t kReadHighWater = 256u << 10;

timeval Tv(double s) {
  s = std::max(0.0, s);
  timeval tv;
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

}  // namespace

// The queue through which other threads hand work to the loop thread: a
// locked list of closures and an event the loop runs them from. `wake` is
// null before Start and after Stop; posts then are dropped.
struct FrontMailbox {
  Mutex mu;
  std::vector<std::function<void(HttpFront::Impl&)>> queue GUARDED_BY(mu);
  event* wake GUARDED_BY(mu) = nullptr;

  void Post(std::function<void(HttpFront::Impl&)> fn) EXCLUDES(mu) {
    MutexLock l(&mu);
    if (!wake) return;
    queue.push_back(std::move(fn));
    event_active(wake, EV_READ, 0);
  }
};

// One accepted connection. Invariants: state kHandling <=> ex != null; the
// timer is pending in kHead/kBody (the deadline of the part being read),
// kIdle (keep-alive) and kLinger (final close), never in kHandling; once
// `read_eof` nothing more is read, and the connection closes when no request
// that had arrived whole is left to answer.
struct HttpFront::Conn {
  enum class State { kIdle, kHead, kBody, kHandling, kLinger };
  Impl* impl = nullptr;
  uint64_t id = 0;
  bool counted = true;  // toward max_connections (false: answered 503)
  bufferevent* bev = nullptr;
  event* timer = nullptr;
  State state = State::kHead;
  size_t scanned = 0;  // head bytes already searched for the blank line
  HttpRequest req;
  uint64_t body_left = 0;
  std::unique_ptr<ChunkedDecoder> chunked;
  std::shared_ptr<HttpExchange> ex;
  bool keep_alive = true;
  bool chunked_out = false;  // the streamed response uses chunked coding
  bool read_eof = false;     // the client has sent all it will (a FIN)
};

struct HttpFront::Impl {
  HttpFront* front = nullptr;
  event_base* base = nullptr;
  evconnlistener* listener = nullptr;
  event* wake = nullptr;
  event* resume_accept = nullptr;  // re-enables accept after EMFILE
  event* stop_check = nullptr;
  Clock::time_point flush_until;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  uint64_t next_id = 1;
  int rejecting = 0;  // connections answered 503, still closing

  // Loop thread: connection handling (static: libevent callbacks).
  using State = Conn::State;
  static void ArmTimer(Conn* c, double s) {
    const timeval tv = Tv(s);
    evtimer_add(c->timer, &tv);
  }

  static void CloseConn(Conn* c) {
    Impl* im = c->impl;
    if (c->ex) c->ex->gone_.store(true);
    c->ex.reset();
    bufferevent_free(c->bev);
    event_free(c->timer);
    if (c->counted) im->front->n_conns_.fetch_sub(1);
    else --im->rejecting;
    im->conns.erase(c->id);  // destroys *c
  }

  static void WriteHead(Conn* c, int status, const std::string& content_type, size_t content_length,
                 bool stream, const std::vector<std::pair<std::string, std::string>>& headers,
                 bool close) {
    std::string h = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n", status,
                                ReasonPhrase(status), content_type);
    if (stream) {
      if (c->chunked_out) h += "Transfer-Encoding: chunked\r\n";
    } else {
      h += fmt::format("Content-Length: {}\r\n", content_length);
    }
    for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
    if (close) h += "Connection: close\r\n";
    h += "\r\n";
    evbuffer_add(bufferevent_get_output(c->bev), h.data(), h.size());
    c->impl->front->log_(status);
  }

  // After the last response byte: half-close once the output has drained, read
  // and drop whatever the client still sends (so its unread request bytes do
  // not turn our close into a reset that discards the response), and close
  // for good on EOF or after kLingerS. A client that has closed its side
  // already is closed once the output has drained.
  static void Linger(Conn* c) {
    c->state = Conn::State::kLinger;
    c->ex.reset();
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
      if (c->read_eof) return CloseConn(c);
      ::shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    }
    ArmTimer(c, kLingerS);
  }

  static void WriteResponse(Conn* c, const HttpResponse& r, bool close) {
    WriteHead(c, r.status, r.content_type, r.body.size(), false, r.headers, close);
    evbuffer_add(bufferevent_get_output(c->bev), r.body.data(), r.body.size());
  }

  // Answers an error the front end found itself, then closes.
  static void Refuse(Conn* c, int status, const std::string& message) {
    WriteResponse(c, c->impl->front->error_page_(status, message), /*close=*/true);
    Linger(c);
  }

  static void FinishExchange(Conn* c) {
    c->ex.reset();
    if (!c->keep_alive) return Linger(c);
    c->state = Conn::State::kIdle;
    ArmTimer(c, c->impl->front->options_.keep_alive_timeout_s);
    ProcessInput(c);  // a pipelined request may be waiting
    // After the client's FIN, a request not yet whole never will be.
    if (c->read_eof && c->state != Conn::State::kHandling && c->state != Conn::State::kLinger)
      Linger(c);
  }

  static void Dispatch(Conn* c) {
    evtimer_del(c->timer);
    c->state = Conn::State::kHandling;
    c->keep_alive = c->req.KeepAlive();
    c->ex = std::make_shared<HttpExchange>(c->impl->front->mailbox_, c->id, std::move(c->req));
    c->req = HttpRequest();
    c->impl->front->handler_(c->ex);  // answers later, through the mailbox
  }

  // Judges a complete head: framing, limits, the owner's check. False when the
  // request was refused (the connection is lingering).
  static bool AcceptHead(Conn* c) {
    const HttpFrontOptions& o = c->impl->front->options_;
    HttpRequest& r = c->req;
    const http::BodyFraming framing = http::JudgeBodyFraming(r, o.listen.max_body_bytes);
    if (framing.status != 0) {
      Refuse(c, framing.status, framing.message);
      return false;
    }
    c->body_left = framing.content_length;
    c->chunked.reset();
    if (framing.chunked) c->chunked = std::make_unique<ChunkedDecoder>(o.listen.max_body_bytes);
    if (auto refusal = c->impl->front->head_check_(r)) {
      WriteResponse(c, *refusal, /*close=*/true);
      Linger(c);
      return false;
    }
    const bool has_body = c->chunked || c->body_left > 0;
    if (has_body && r.minor_version >= 1) {
      std::string expect = r.Header("expect");
      for (char& ch : expect) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (expect == "100-continue") {
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        evbuffer_add(bufferevent_get_output(c->bev), kContinue, sizeof(kContinue) - 1);
      }
    }
    return true;
  }

  static void ProcessInput(Conn* c) {
    const HttpFrontOptions& o = c->impl->front->options_;
    evbuffer* in = bufferevent_get_input(c->bev);
    for (;;) {
      const size_t len = evbuffer_get_length(in);
      switch (c->state) {
        case Conn::State::kLinger:
          evbuffer_drain(in, len);
          return;
        case Conn::State::kHandling:
          return;
        case Conn::State::kIdle:
          if (len == 0) return;
          c->state = Conn::State::kHead;
          c->scanned = 0;
          ArmTimer(c, o.listen.header_timeout_s);
          break;
        case Conn::State::kHead: {
          evbuffer_ptr from;
          evbuffer_ptr_set(in, &from, c->scanned > 3 ? c->scanned - 3 : 0, EVBUFFER_PTR_SET);
          const evbuffer_ptr at = evbuffer_search(in, "\r\n\r\n", 4, &from);
          if (at.pos < 0) {
            if (len > o.listen.max_header_bytes)
              return Refuse(c, 431, http::HeadTooLargeMessage(o.listen.max_header_bytes));
            c->scanned = len;
            return;
          }
          const size_t head_len = static_cast<size_t>(at.pos);
          if (head_len + 4 > o.listen.max_header_bytes)
            return Refuse(c, 431, http::HeadTooLargeMessage(o.listen.max_header_bytes));
          std::string head(head_len, '\0');
          evbuffer_remove(in, head.data(), head_len);
          evbuffer_drain(in, 4);
          auto parsed = ParseRequestHead(head);
          if (!parsed.ok()) return Refuse(c, 400, parsed.status().message());
          c->req = std::move(parsed).value();
          if (!AcceptHead(c)) return;
          if (!c->chunked && c->body_left == 0) {
            Dispatch(c);
            return;
          }
          c->state = Conn::State::kBody;
          ArmTimer(c, o.listen.body_timeout_s);
          break;
        }
        case Conn::State::kBody: {
          if (len == 0) return;
          if (c->chunked) {
            const unsigned char* data = evbuffer_pullup(in, -1);
            auto used = c->chunked->Consume(
                std::string_view(reinterpret_cast<const char*>(data), len), &c->req.body);
            if (!used.ok()) {
              if (used.status().code() == StatusCode::kOutOfRange)
                return Refuse(c, 413, http::ChunkedBodyTooLargeMessage(o.listen.max_body_bytes));
              return Refuse(c, 400, used.status().message());
            }
            evbuffer_drain(in, *used);
            if (!c->chunked->done()) return;
          } else {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(c->body_left, len));
            const size_t old = c->req.body.size();
            if (old == 0) c->req.body.reserve(static_cast<size_t>(c->body_left));
            c->req.body.resize(old + n);
            evbuffer_remove(in, c->req.body.data() + old, n);
            c->body_left -= n;
            if (c->body_left > 0) return;
          }
          Dispatch(c);
          return;
        }
      }
    }
  }

  static void OnRead(bufferevent*, void* arg) { ProcessInput(static_cast<Conn*>(arg)); }

  static void OnWrite(bufferevent* bev, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    if (c->state != Conn::State::kLinger || evbuffer_get_length(bufferevent_get_output(bev)) != 0)
      return;
    if (c->read_eof) return CloseConn(c);
    ::shutdown(bufferevent_getfd(bev), SHUT_WR);
  }

  // A socket error or the write timeout: the client is gone. EOF: the client
  // has sent all it will, which is a half-close (shutdown(SHUT_WR) after the
  // request) as often as a hang-up; the two look alike until a write fails.
  // A request being handled is answered (a client that has hung up shows at
  // the answer's first write); output already queued is written out; a
  // request not yet whole is dropped.
  static void OnEvent(bufferevent* bev, short what, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    if (!(what & BEV_EVENT_EOF) || (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
      return CloseConn(c);
    c->read_eof = true;
    if (c->state != Conn::State::kHandling) return Linger(c);
    // Unless another request has arrived behind it, this answer is the last.
    if (evbuffer_get_length(bufferevent_get_input(bev)) == 0) c->keep_alive = false;
  }

  static void OnTimer(evutil_socket_t, short, void* arg) {
    auto* c = static_cast<Conn*>(arg);
    const HttpFrontOptions& o = c->impl->front->options_;
    switch (c->state) {
      case Conn::State::kHead:
        return Refuse(c, 408, http::HeadTimeoutMessage(o.listen.header_timeout_s));
      case Conn::State::kBody:
        return Refuse(c, 408, http::BodyTimeoutMessage(o.listen.body_timeout_s));
      case Conn::State::kHandling:
        return;
      case Conn::State::kIdle:
      case Conn::State::kLinger:
        return CloseConn(c);
    }
  }

  static Conn* NewConn(Impl* im, evutil_socket_t fd, bool counted) {
    auto owned = std::make_unique<Conn>();
    Conn* c = owned.get();
    c->impl = im;
    c->id = im->next_id++;
    c->counted = counted;
    c->bev = bufferevent_socket_new(im->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(im->base, OnTimer, c);
    if (!c->bev || !c->timer) {
      if (c->bev) bufferevent_free(c->bev);
      else ::close(fd);
      if (c->timer) event_free(c->timer);
      return nullptr;
    }
    im->conns.emplace(c->id, std::move(owned));
    if (counted) im->front->n_conns_.fetch_add(1);
    else ++im->rejecting;
    bufferevent_setcb(c->bev, OnRead, OnWrite, OnEvent, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, kReadHighWater);
    const timeval wt = Tv(im->front->options_.write_timeout_s);
    bufferevent_set_timeouts(c->bev, nullptr, &wt);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    return c;
  }

  static void OnAccept(evconnlistener*, evutil_socket_t fd, sockaddr*, int, void* arg) {
    auto* im = static_cast<Impl*>(arg);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (im->front->n_conns_.load() >= im->front->max_connections_) {
      if (im->rejecting >= kMaxRejecting) {
        ::close(fd);
        return;
      }
      if (Conn* c = NewConn(im, fd, /*counted=*/false))
        Refuse(c, 503, http::TooManyConnectionsMessage(im->front->max_connections_));
      return;
    }
    if (Conn* c = NewConn(im, fd, /*counted=*/true)) {
      c->state = Conn::State::kHead;
      ArmTimer(c, im->front->options_.listen.header_timeout_s);
    }
  }

  // accept() failed (out of file descriptors, most likely): pause accepting
  // for 100 ms instead of spinning on a listener that stays readable.
  static void OnAcceptError(evconnlistener* l, void* arg) {
    auto* im = static_cast<Impl*>(arg);
    const int err = EVUTIL_SOCKET_ERROR();
    static Clock::time_point last_log;
    if (Clock::now() - last_log > std::chrono::seconds(10)) {
      last_log = Clock::now();
      LOG_WARN("serve", "accept failed: {} (open connections: {})", std::strerror(err),
               im->front->n_conns_.load());
    }
    evconnlistener_disable(l);
    const timeval tv = Tv(0.1);
    evtimer_add(im->resume_accept, &tv);
  }

  static void OnResumeAccept(evutil_socket_t, short, void* arg) {
    evconnlistener_enable(static_cast<Impl*>(arg)->listener);
  }

  static void OnWake(evutil_socket_t, short, void* arg) {
    auto* im = static_cast<Impl*>(arg);
    std::vector<std::function<void(Impl&)>> batch;
    {
      FrontMailbox& mb = *im->front->mailbox_;
      MutexLock l(&mb.mu);
      batch.swap(mb.queue);
    }
    for (auto& fn : batch) fn(*im);
  }

  // Stop: waits until every connection's output has drained (or the flush
  // deadline passed), then ends the loop.
  static void OnStopCheck(evutil_socket_t, short, void* arg) {
    auto* im = static_cast<Impl*>(arg);
    bool pending = false;
    for (const auto& [id, c] : im->conns)
      pending |= evbuffer_get_length(bufferevent_get_output(c->bev)) > 0;
    if (!pending || Clock::now() >= im->flush_until) {
      event_base_loopbreak(im->base);
      return;
    }
    const timeval tv = Tv(0.01);
    evtimer_add(im->stop_check, &tv);
  }

  // The connection of `ex` while `ex` is its current exchange, else null.
  static Conn* ConnOf(Impl& im, const HttpExchange& ex, uint64_t id) {
    auto it = im.conns.find(id);
    if (it == im.conns.end() || it->second->ex.get() != &ex) return nullptr;
    return it->second.get();
  }
};

// ---- HttpExchange (any thread) ----

using Conn = HttpFront::Conn;
using Impl = HttpFront::Impl;

HttpExchange::HttpExchange(std::shared_ptr<FrontMailbox> mailbox, uint64_t conn_id,
                           HttpRequest request)
    : mailbox_(std::move(mailbox)), conn_id_(conn_id), request_(std::move(request)) {}

void HttpExchange::Reply(HttpResponse response) {
  if (answered_.exchange(true)) return;
  auto self = shared_from_this();
  mailbox_->Post([self, r = std::move(response)](Impl& im) {
    Conn* c = Impl::ConnOf(im, *self, self->conn_id_);
    if (!c) return;
    Impl::WriteResponse(c, r, !c->keep_alive);
    Impl::FinishExchange(c);
  });
}

void HttpExchange::StartStream(std::string content_type,
                               std::vector<std::pair<std::string, std::string>> headers) {
  if (answered_.exchange(true)) return;
  auto self = shared_from_this();
  mailbox_->Post([self, ct = std::move(content_type), h = std::move(headers)](Impl& im) {
    Conn* c = Impl::ConnOf(im, *self, self->conn_id_);
    if (!c) return;
    // HTTP/1.0 has no chunked coding: the body then ends when the connection does.
    c->chunked_out = self->request_.minor_version >= 1;
    if (!c->chunked_out) c->keep_alive = false;
    Impl::WriteHead(c, 200, ct, 0, /*stream=*/true, h, !c->keep_alive);
  });
}

bool HttpExchange::Send(std::string data) {
  if (gone_.load()) return false;
  if (data.empty()) return true;
  auto self = shared_from_this();
  mailbox_->Post([self, d = std::move(data)](Impl& im) {
    Conn* c = Impl::ConnOf(im, *self, self->conn_id_);
    if (!c) return;
    evbuffer* out = bufferevent_get_output(c->bev);
    if (c->chunked_out) evbuffer_add_printf(out, "%zx\r\n", d.size());
    evbuffer_add(out, d.data(), d.size());
    if (c->chunked_out) evbuffer_add(out, "\r\n", 2);
  });
  return !gone_.load();
}

void HttpExchange::End() {
  auto self = shared_from_this();
  mailbox_->Post([self](Impl& im) {
    Conn* c = Impl::ConnOf(im, *self, self->conn_id_);
    if (!c) return;
    if (c->chunked_out) evbuffer_add(bufferevent_get_output(c->bev), "0\r\n\r\n", 5);
    Impl::FinishExchange(c);
  });
}

// ---- HttpFront ----

HttpFront::HttpFront(HttpFrontOptions options, HeadCheck head_check, Handler handler,
                     StatusLog log, ErrorPage error_page)
    : options_(std::move(options)),
      head_check_(std::move(head_check)),
      handler_(std::move(handler)),
      log_(std::move(log)),
      error_page_(std::move(error_page)),
      impl_(std::make_unique<Impl>()),
      mailbox_(std::make_shared<FrontMailbox>()) {
  impl_->front = this;
}

HttpFront::~HttpFront() { Stop(0); }

Status HttpFront::Start() {
  if (options_.listen.port < 0 || options_.listen.port > 65535)
    return InvalidArgumentError(fmt::format("--port: expected 0..65535 (0: any free port), got {}",
                                            options_.listen.port))
        .WithStage("serve");
  static std::once_flag threads_once;
  std::call_once(threads_once, [] { evthread_use_pthreads(); });

  // Room for every allowed connection: the soft open-file limit goes up to
  // the hard one; connections are capped below what it leaves.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  const long fd_room = std::max<long>(16, static_cast<long>(rl.rlim_cur) - 128);
  max_connections_ = options_.listen.max_connections > 0 ? options_.listen.max_connections : 4096;
  if (max_connections_ > fd_room) {
    if (options_.listen.max_connections > 0)
      LOG_WARN("serve", "--max-connections {} lowered to {}: the open-file limit is {}",
               max_connections_, fd_room, static_cast<long>(rl.rlim_cur));
    max_connections_ = static_cast<int>(fd_room);
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* ai = nullptr;
  const std::string where = fmt::format("{}:{}", options_.listen.host, options_.listen.port);
  if (int rc = ::getaddrinfo(options_.listen.host.c_str(), std::to_string(options_.listen.port).c_str(), &hints,
                             &ai);
      rc != 0)
    return IoError(fmt::format("cannot listen on {}: {}", where, gai_strerror(rc))).WithStage("serve");
  const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ::freeaddrinfo(ai);
    return IoError(fmt::format("cannot listen on {}: socket: {}", where, std::strerror(errno)))
        .WithStage("serve");
  }
  // Exclusive bind: SO_REUSEADDR (restart while old connections linger in
  // TIME_WAIT) but not SO_REUSEPORT, with which a second server on the same
  // port would listen too and take half the connections.
  int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const int bind_rc = ::bind(fd, ai->ai_addr, ai->ai_addrlen);
  const int bind_err = errno;
  ::freeaddrinfo(ai);
  if (bind_rc != 0 || ::listen(fd, std::max(16, options_.listen.listen_backlog)) != 0) {
    const int err = bind_rc != 0 ? bind_err : errno;
    ::close(fd);
    return IoError(fmt::format("cannot listen on {} ({}: address in use or not local?)", where,
                               std::strerror(err)))
        .WithStage("serve");
  }
  sockaddr_storage ss{};
  socklen_t ss_len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &ss_len);
  port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                         : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  evutil_make_socket_nonblocking(fd);

  Impl* im = impl_.get();
  im->base = event_base_new();
  if (!im->base) {
    ::close(fd);
    return InternalError("libevent: event_base_new failed").WithStage("serve");
  }
  // backlog 0: the socket listens already (with our backlog).
  im->listener = evconnlistener_new(im->base, Impl::OnAccept, im,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
  im->wake = event_new(im->base, -1, 0, Impl::OnWake, im);
  im->resume_accept = evtimer_new(im->base, Impl::OnResumeAccept, im);
  im->stop_check = evtimer_new(im->base, Impl::OnStopCheck, im);
  if (!im->listener || !im->wake || !im->resume_accept || !im->stop_check) {
    if (!im->listener) ::close(fd);
    return InternalError("libevent: could not create the listener").WithStage("serve");
  }
  evconnlistener_set_error_cb(im->listener, Impl::OnAcceptError);
  {
    MutexLock l(&mailbox_->mu);
    mailbox_->wake = im->wake;
  }
  loop_thread_ = std::thread([im] { event_base_loop(im->base, EVLOOP_NO_EXIT_ON_EMPTY); });
  return Status::Ok();
}

void HttpFront::Stop(double flush_s) {
  if (stopped_) return;
  stopped_ = true;
  Impl* im = impl_.get();
  if (loop_thread_.joinable()) {
    mailbox_->Post([flush_s](Impl& im) {
      im.flush_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(flush_s));
      evconnlistener_disable(im.listener);
      const timeval tv = Tv(0);
      evtimer_add(im.stop_check, &tv);
    });
    loop_thread_.join();
  }
  {
    MutexLock l(&mailbox_->mu);
    mailbox_->wake = nullptr;
    mailbox_->queue.clear();
  }
  // The loop has ended: everything below is this thread's alone.
  while (!im->conns.empty()) Impl::CloseConn(im->conns.begin()->second.get());
  if (im->listener) evconnlistener_free(im->listener);
  for (event* e : {im->wake, im->resume_accept, im->stop_check})
    if (e) event_free(e);
  if (im->base) event_base_free(im->base);
  *im = Impl();
  im->front = this;
}

}  // namespace specd::server
