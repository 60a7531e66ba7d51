#!/usr/bin/env python3
"""Latency the serve proxy adds: the same short completion against
`specd serve --tp 1` (rank 0 is the public server) and `specd serve --tp 1
--restart-ranks 1` (the supervisor's proxy in front of the same rank 0), one
server after the other in the same run; prints the median and p90 of each and
the difference. Python 3 standard library only; one keep-alive connection per
server, requests in sequence (`--close`: a new connection per request).
`--health` times GET /health instead (no engine
work: the proxy's hop alone).

  python3 bench/proxy_overhead.py --specd build/release/specd --model models/demo \\
      --requests 300 --max-tokens 1

Prompts are token ids (random fixtures have no tokenizer).
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--specd", required=True, help="the specd binary")
    p.add_argument("--model", required=True)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--max-tokens", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--close", action="store_true",
                   help="a new connection per request (Connection: close) instead of one "
                        "kept-alive connection")
    p.add_argument("--health", action="store_true",
                   help="time GET /health (no engine work) instead of a completion")
    return p.parse_args()


def start(args, extra, log):
    cmd = [args.specd, "serve", "--model", args.model, "--port", "0", "--threads",
           str(args.threads)] + extra
    proc = subprocess.Popen(cmd, stderr=log, stdout=subprocess.DEVNULL)
    port = None
    deadline = time.time() + 120
    while time.time() < deadline:
        log.flush()
        with open(log.name) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:([0-9]+)", f.read())
        if m:
            port = int(m.group(1))
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return proc, port
            except OSError:
                pass
        if proc.poll() is not None:
            sys.exit(f"specd serve {' '.join(extra)} exited early; log: {log.name}")
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"specd serve {' '.join(extra)} not healthy after 120 s; log: {log.name}")


def measure(port, args):
    body = json.dumps({"prompt": [1, 2, 3, 4], "max_tokens": args.max_tokens,
                       "temperature": 0})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Connection": "close"} if args.close else {}
    times = []
    for i in range(args.requests + 5):
        t0 = time.perf_counter()
        if args.close:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        if args.health:
            conn.request("GET", "/health", headers=headers)
        else:
            conn.request("POST", "/v1/completions", body.encode(),
                         {"Content-Type": "application/json", **headers})
        r = conn.getresponse()
        r.read()
        if args.close:
            conn.close()
        if r.status != 200:
            sys.exit(f"completion answered {r.status}")
        if i >= 5:  # warm-up
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)]


def main():
    args = parse_args()
    rows = []
    for name, extra in (("direct (--tp 1)", ["--tp", "1"]),
                        ("proxied (--tp 1 --restart-ranks 1)", ["--tp", "1", "--restart-ranks", "1"])):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as log:
            proc, port = start(args, extra, log)
            try:
                rows.append((name, *measure(port, args)))
            finally:
                proc.terminate()
                proc.wait(timeout=60)
    for name, p50, p90 in rows:
        print(f"{name:40s} median {p50:8.3f} ms   p90 {p90:8.3f} ms")
    print(f"{'proxy overhead':40s} median {rows[1][1] - rows[0][1]:+8.3f} ms")


if __name__ == "__main__":
    main()
