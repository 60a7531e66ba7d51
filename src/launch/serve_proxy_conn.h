// Internal to the serve proxy: the state of one client connection and of one
// forwarded request, and the helpers both halves use (serve_proxy.cc: the
// client side, states and replies; serve_proxy_upstream.cc: the relay of a
// request to rank 0 and of its response back).
#pragma once

#include <sys/time.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http/http_request.h"
#include "launch/serve_proxy.h"

struct bufferevent;
struct event;
struct evhttp_connection;

namespace specd::launch {

// One client connection. Invariants: `up` is set exactly while a request is
// forwarded (state kUpstream); a connection is in `pending_` exactly while
// state is kQueued; in kClosing the last response is being written, then the
// write side is shut (`shut_wr`) and what the client still sends is read and
// dropped until it closes or kLingerS pass (`deadline`); once `read_eof`, no
// request follows the one being answered unless its bytes had already
// arrived.
struct ServeProxy::Conn {
  enum State { kHead, kBody, kQueued, kUpstream, kClosing };
  ServeProxy* proxy = nullptr;
  bufferevent* bev = nullptr;
  event* deadline = nullptr;
  event* lost_timer = nullptr;
  State state = kHead;
  bool counted = true;    // toward max_connections (false: answered 503 at accept)
  bool read_eof = false;  // the client has sent all it will (a FIN)
  bool shut_wr = false;
  // The request being served.
  std::string method, target, version;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  size_t content_length = 0;
  std::unique_ptr<http::ChunkedDecoder> chunked;  // a chunked body being read
  std::string body;
  bool keep_alive = true;
  bool sse = false;  // the response is text/event-stream
  // The response.
  Upstream* up = nullptr;
  bool head_sent = false;
  bool chunked_out = false;
  std::string lost_why;  // set while waiting for the cause of a broken upstream
  bool upstream_paused = false;  // rank 0's socket not read until the client drains
};

// One forwarded request. Outlives its client connection when detached
// (client == nullptr): evhttp may still call back until the deferred free.
struct ServeProxy::Upstream {
  ServeProxy* proxy = nullptr;
  Conn* client = nullptr;
  evhttp_connection* conn = nullptr;
  std::string error;  // from the error callback
};

namespace proxy_detail {

// Bytes of a response waiting for a slow client before the proxy stops
// reading rank 0's socket (TCP then slows rank 0's writes).
inline constexpr size_t kClientHighWater = size_t{1} << 20;

timeval Tv(double seconds);
std::string Lower(std::string s);
// Headers that describe one hop, not the message (RFC 9110 7.6.1), plus the
// framing ones the proxy sets itself. REQUIRES: lower_name is lower case.
bool HopByHop(const std::string& lower_name);
// The OpenAI-style error body: {"error": {"message", "type", "param", "code"}}.
std::string ErrorJson(const std::string& message, const std::string& type,
                      const std::string& code);

}  // namespace proxy_detail
}  // namespace specd::launch
