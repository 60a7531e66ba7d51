// Where an HTTP server listens and what one client may cost it before it is
// refused. The server's front end (server/http_front.h) and the serve proxy
// (launch/serve_proxy.h) enforce the same fields the same way; `specd serve`
// fills them once from its flags.
#pragma once

#include <cstddef>
#include <string>

namespace specd::http {

struct ListenOptions {
  std::string host = "127.0.0.1";
  int port = 8000;            // 0..65535; 0: any free port
  int listen_backlog = 1024;  // pending connections the kernel queues (capped by somaxconn)
  size_t max_header_bytes = 16u << 10;  // a larger request head: 431
  size_t max_body_bytes = 4u << 20;     // a larger body: 413, decided before it is read
  // Deadlines that arriving bytes do not extend (408 after them): the whole
  // request head from the connection becoming idle, the whole body from the
  // end of the head.
  double header_timeout_s = 10;
  double body_timeout_s = 30;
  // Open connections; more are answered 503 at accept. 0: 4096. Never more
  // than the process's open-file limit (raised to its hard limit) leaves room
  // for.
  int max_connections = 0;
};

}  // namespace specd::http
