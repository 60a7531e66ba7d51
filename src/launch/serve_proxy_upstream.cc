// The relay half of the serve proxy: a request forwarded to rank 0 with
// evhttp, its response streamed back to the client as it arrives, and what a
// broken upstream does to the response (serve_proxy.h).
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <algorithm>
#include <string>

#include "launch/serve_proxy.h"
#include "launch/serve_proxy_conn.h"

namespace specd::launch {
namespace {

using proxy_detail::ErrorJson;
using proxy_detail::HopByHop;
using proxy_detail::kClientHighWater;
using proxy_detail::Lower;
using proxy_detail::Tv;

bool ParseMethod(const std::string& m, evhttp_cmd_type* out) {
  static const std::pair<const char*, evhttp_cmd_type> kMethods[] = {
      {"GET", EVHTTP_REQ_GET},     {"POST", EVHTTP_REQ_POST},     {"HEAD", EVHTTP_REQ_HEAD},
      {"PUT", EVHTTP_REQ_PUT},     {"DELETE", EVHTTP_REQ_DELETE}, {"OPTIONS", EVHTTP_REQ_OPTIONS},
      {"PATCH", EVHTTP_REQ_PATCH}};
  for (const auto& [name, type] : kMethods) {
    if (m == name) {
      *out = type;
      return true;
    }
  }
  return false;
}

std::string UpstreamErrorText(evhttp_request_error error) {
  switch (error) {
    case EVREQ_HTTP_TIMEOUT: return "rank 0 did not answer in time";
    case EVREQ_HTTP_EOF: return "rank 0 closed the connection";
    case EVREQ_HTTP_INVALID_HEADER: return "rank 0 sent an invalid response";
    case EVREQ_HTTP_BUFFER_ERROR: return "the connection to rank 0 broke";
    case EVREQ_HTTP_DATA_TOO_LONG: return "rank 0's response was too large";
    default: return "the request to rank 0 was cancelled";
  }
}

}  // namespace

void ServeProxy::Forward(Conn* c) {
  evhttp_cmd_type type;
  if (!ParseMethod(c->method, &type)) {
    return ReplyError(c, 405, "method " + c->method + " is not supported",
                      "invalid_request_error", "method_not_allowed");
  }
  evhttp_connection* conn = evhttp_connection_base_new(base_, nullptr, "127.0.0.1",
                                                       static_cast<uint16_t>(upstream_port_));
  if (conn == nullptr) {
    return ReplyError(c, 502, "cannot open a connection to rank 0", "server_error", "upstream");
  }
  auto* up = new Upstream;
  up->proxy = this;
  up->client = c;
  up->conn = conn;
  timeval tv = Tv(options_.upstream_timeout_s);
  evhttp_connection_set_timeout_tv(up->conn, &tv);
  evhttp_connection_set_retries(up->conn, 0);
  evhttp_request* req = evhttp_request_new(&ServeProxy::OnUpstreamDone, up);
  evhttp_request_set_header_cb(req, &ServeProxy::OnUpstreamHead);
  evhttp_request_set_chunked_cb(req, &ServeProxy::OnUpstreamChunk);
  evhttp_request_set_error_cb(req, [](evhttp_request_error error, void* arg) {
    static_cast<Upstream*>(arg)->error = UpstreamErrorText(error);
  });
  evkeyvalq* out = evhttp_request_get_output_headers(req);
  for (const auto& [name, value] : c->headers) {
    if (!HopByHop(Lower(name))) evhttp_add_header(out, name.c_str(), value.c_str());
  }
  const std::string host = "127.0.0.1:" + std::to_string(upstream_port_);
  evhttp_add_header(out, "Host", host.c_str());
  evhttp_add_header(out, "Connection", "close");
  if (!c->body.empty() || type == EVHTTP_REQ_POST || type == EVHTTP_REQ_PUT ||
      type == EVHTTP_REQ_PATCH) {
    evhttp_add_header(out, "Content-Length", std::to_string(c->body.size()).c_str());
    evbuffer_add(evhttp_request_get_output_buffer(req), c->body.data(), c->body.size());
  }
  c->up = up;
  c->state = Conn::kUpstream;
  if (evhttp_make_request(up->conn, req, type, c->target.c_str()) != 0) {
    // evhttp freed the request.
    DetachUpstream(c);
    ReplyError(c, 502, "cannot forward the request to rank 0", "server_error", "upstream");
  }
}

int ServeProxy::OnUpstreamHead(evhttp_request* req, void* arg) {
  auto* up = static_cast<Upstream*>(arg);
  Conn* c = up->client;
  if (c == nullptr) return -1;
  const int code = evhttp_request_get_response_code(req);
  const char* line = evhttp_request_get_response_code_line(req);
  std::string head = c->version + " " + std::to_string(code) + " " +
                     (line != nullptr && *line ? line : http::ReasonPhrase(code)) + "\r\n";
  evkeyvalq* hs = evhttp_request_get_input_headers(req);
  const char* length = nullptr;
  for (evkeyval* h = hs->tqh_first; h != nullptr; h = h->next.tqe_next) {
    const std::string lname = Lower(h->key);
    if (lname == "content-length") length = h->value;
    if (lname == "content-type" && std::string(h->value).find("text/event-stream") == 0)
      c->sse = true;
    if (HopByHop(lname)) continue;
    head += std::string(h->key) + ": " + h->value + "\r\n";
  }
  if (length != nullptr) {
    head += std::string("Content-Length: ") + length + "\r\n";
  } else if (c->version == "HTTP/1.1" && c->method != "HEAD") {
    head += "Transfer-Encoding: chunked\r\n";
    c->chunked_out = true;
  } else {
    c->keep_alive = false;  // an HTTP/1.0 body ends with the connection
  }
  head += c->keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  bufferevent_write(c->bev, head.data(), head.size());
  c->head_sent = true;
  return 0;
}

void ServeProxy::OnUpstreamChunk(evhttp_request* req, void* arg) {
  auto* up = static_cast<Upstream*>(arg);
  Conn* c = up->client;
  evbuffer* in = evhttp_request_get_input_buffer(req);
  const size_t n = evbuffer_get_length(in);
  if (c == nullptr || n == 0) return;
  evbuffer* out = bufferevent_get_output(c->bev);
  if (c->chunked_out) evbuffer_add_printf(out, "%zx\r\n", n);
  evbuffer_add_buffer(out, in);
  if (c->chunked_out) evbuffer_add(out, "\r\n", 2);
  const size_t buffered = evbuffer_get_length(out);
  c->proxy->peak_buffered_ = std::max(c->proxy->peak_buffered_, buffered);
  if (buffered > kClientHighWater && !c->upstream_paused) {
    c->upstream_paused = true;
    bufferevent_disable(evhttp_connection_get_bufferevent(up->conn), EV_READ);
  }
}

void ServeProxy::OnUpstreamDone(evhttp_request* req, void* arg) {
  auto* up = static_cast<Upstream*>(arg);
  Conn* c = up->client;
  if (c == nullptr) return;
  ServeProxy* p = up->proxy;
  if (req == nullptr || evhttp_request_get_response_code(req) == 0) {
    return p->UpstreamLost(c, up->error.empty() ? "the connection to rank 0 broke" : up->error);
  }
  // Bytes that arrived with the end of the body.
  OnUpstreamChunk(req, arg);
  p->DetachUpstream(c);
  p->FinishResponse(c);
}

void ServeProxy::UpstreamLost(Conn* c, const std::string& why) {
  DetachUpstream(c);
  if (state_ == State::kRecovering || state_ == State::kFailed) return FailResponse(c, cause_);
  // The supervisor usually learns why within milliseconds (SIGCHLD): wait for
  // GroupFailed to name the cause, else say what the proxy saw.
  c->state = Conn::kUpstream;
  ArmFailTimer(c, why, options_.upstream_lost_wait_s);
}

void ServeProxy::ArmFailTimer(Conn* c, const std::string& why, double seconds) {
  c->lost_why = why;
  c->lost_timer = evtimer_new(
      base_,
      [](evutil_socket_t, short, void* arg) {
        auto* c = static_cast<Conn*>(arg);
        c->proxy->FailResponse(c, c->lost_why);
      },
      c);
  timeval tv = Tv(seconds);
  evtimer_add(c->lost_timer, &tv);
}

void ServeProxy::DetachUpstream(Conn* c) {
  if (c->up == nullptr) return;
  Upstream* up = c->up;
  c->up = nullptr;
  up->client = nullptr;
  // Freed from the loop: this may run inside one of its callbacks.
  timeval zero{0, 0};
  event_base_once(
      base_, -1, EV_TIMEOUT,
      [](evutil_socket_t, short, void* arg) {
        auto* up = static_cast<Upstream*>(arg);
        evhttp_connection_free(up->conn);
        delete up;
      },
      up, &zero);
}

void ServeProxy::FinishResponse(Conn* c) {
  if (c->lost_timer != nullptr) {  // rank 0 ended it within the failure's grace
    event_free(c->lost_timer);
    c->lost_timer = nullptr;
  }
  if (c->chunked_out) bufferevent_write(c->bev, "0\r\n\r\n", 5);
  if (!c->keep_alive) return CloseAfterWrite(c);
  c->state = Conn::kHead;
  ArmDeadline(c, options_.listen.header_timeout_s);
  // A request that arrived behind this one. (OnRead leaves `c` alive: a
  // response it answers itself is still in the output buffer.)
  if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0) OnRead(c);
  // The client has half-closed: no request is still to come.
  if (c->read_eof && c->state == Conn::kHead) CloseAfterWrite(c);
}

void ServeProxy::FailResponse(Conn* c, const std::string& message) {
  DetachUpstream(c);
  if (c->lost_timer != nullptr) {
    event_free(c->lost_timer);
    c->lost_timer = nullptr;
  }
  if (!c->head_sent) {
    return ReplyError(c, 503, message, "server_error", "rank_failed");
  }
  if (c->sse) {
    const std::string events =
        "data: " + ErrorJson(message, "server_error", "rank_failed") + "\n\ndata: [DONE]\n\n";
    evbuffer* out = bufferevent_get_output(c->bev);
    if (c->chunked_out) evbuffer_add_printf(out, "%zx\r\n", events.size());
    evbuffer_add(out, events.data(), events.size());
    if (c->chunked_out) evbuffer_add(out, "\r\n0\r\n\r\n", 7);
  }
  // A started non-stream body stays short of its Content-Length.
  CloseAfterWrite(c);
}

void ServeProxy::FailInFlight(const std::string& cause) {
  std::vector<Conn*> active;
  for (Conn* c : conns_)
    if (c->state == Conn::kUpstream) active.push_back(c);
  for (Conn* c : active) {
    if (c->up == nullptr || c->lost_timer != nullptr) {
      FailResponse(c, cause);
      continue;
    }
    // Rank 0 may still be sending what it decided before the failure (tokens
    // already in its socket, then its own error event): the response gets
    // kFailedUpstreamGrace to arrive and end before the proxy ends it.
    ArmFailTimer(c, cause, kFailedUpstreamGrace);
  }
}

}  // namespace specd::launch
