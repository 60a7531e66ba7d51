#!/usr/bin/env python3
"""Load generator for `specd serve`: streamed /v1/completions at several
concurrency levels; reports aggregate output tok/s and p50/p99 time to first
token. Python 3 standard library only (a thread per stream, raw HTTP with the
server-sent events read as they arrive, so the client adds next to nothing to
what is measured).

  specd serve --model small-170m-q4_0.gguf --port 8000 --max-batch 64 &
  python3 bench/serve_bench.py --url http://127.0.0.1:8000 \\
      --concurrency 1,4,16,64 --prompt-tokens 32 --max-tokens 64

Prompts are token ids (random fixtures have no tokenizer); ignore_eos keeps
every request at exactly max_tokens. Each level runs `--requests-per-stream`
requests per concurrent stream (default 2) after one warm-up request.
`--json` adds one line with the rows as a JSON array.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--concurrency", default="1,4,16,64",
                   help="comma-separated concurrent stream counts (default 1,4,16,64)")
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--requests-per-stream", type=int, default=2)
    p.add_argument("--vocab", type=int, default=32000,
                   help="prompt ids are drawn from 1..vocab-1 (default 32000)")
    p.add_argument("--api-key", default=os.environ.get("SPECD_API_KEY", ""),
                   help="Bearer token (default $SPECD_API_KEY)")
    p.add_argument("--model", default=None, help="the request's model field (optional)")
    p.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    return p.parse_args()


class Prompts:
    """The same LCG as before (seed 12345), shared by all streams."""

    def __init__(self, n, vocab):
        self.n, self.vocab, self.seed = n, vocab, 12345
        self.lock = threading.Lock()

    def next(self):
        with self.lock:
            out = []
            for _ in range(self.n):
                self.seed = (self.seed * 1103515245 + 12345) % 2147483648
                out.append(1 + self.seed % (self.vocab - 1))
            return out


class Client:
    def __init__(self, args):
        u = urllib.parse.urlsplit(args.url.rstrip("/"))
        self.https = u.scheme == "https"
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if self.https else 80)
        self.path = (u.path or "") + "/v1/completions"
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if args.api_key:
            self.headers["Authorization"] = f"Bearer {args.api_key}"
        self.args = args
        self.prompts = Prompts(args.prompt_tokens, args.vocab)

    def one(self):
        a = self.args
        body = {"prompt": self.prompts.next(), "max_tokens": a.max_tokens, "temperature": 0,
                "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
        if a.model:
            body["model"] = a.model
        data = json.dumps(body).encode()
        conn_cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = conn_cls(self.host, self.port, timeout=600)
        try:
            t0 = time.perf_counter()
            conn.request("POST", self.path, body=data, headers=self.headers)
            res = conn.getresponse()
            if res.status != 200:
                raise RuntimeError(f"HTTP {res.status}: {res.read().decode(errors='replace')}")
            ttft, tokens = None, 0
            event = []
            # Server-sent events: "data: ..." lines, an empty line ends an event.
            while True:
                line = res.readline()
                if not line:
                    break
                line = line.rstrip(b"\r\n")
                if line:
                    event.append(line)
                    continue
                if not event:
                    continue
                ev, event = b"\n".join(event), []
                if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                    continue
                j = json.loads(ev[6:])
                if j.get("error"):
                    raise RuntimeError(j["error"].get("message", str(j["error"])))
                if ttft is None and j.get("choices"):
                    ttft = (time.perf_counter() - t0) * 1000
                if j.get("usage"):
                    tokens = j["usage"]["completion_tokens"]
            return {"ttft": ttft, "tokens": tokens, "total": (time.perf_counter() - t0) * 1000}
        finally:
            conn.close()


def pct(xs, p):
    s = sorted(x for x in xs if x is not None)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def run_level(client, c, per_stream):
    results, errors = [], []
    lock = threading.Lock()
    start = threading.Barrier(c + 1)

    def stream():
        start.wait()
        try:
            for _ in range(per_stream):
                r = client.one()
                with lock:
                    results.append(r)
        except Exception as e:  # reported after the level
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=stream, daemon=True) for _ in range(c)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return results, wall


def main():
    args = parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x]
    client = Client(args)
    client.one()  # warm-up
    print(f"url {args.url.rstrip('/')}, prompt {args.prompt_tokens} tokens, "
          f"max_tokens {args.max_tokens}, {args.requests_per_stream} requests per stream", flush=True)
    print("concurrency  requests  output_tok/s  ttft_p50_ms  ttft_p99_ms  req_latency_p50_ms",
          flush=True)
    rows = []
    for c in levels:
        res, wall = run_level(client, c, args.requests_per_stream)
        tokens = sum(r["tokens"] for r in res)
        ttfts = [r["ttft"] for r in res]
        row = {"concurrency": c, "requests": len(res), "output_tok_s": tokens / wall,
               "ttft_p50_ms": pct(ttfts, 50), "ttft_p99_ms": pct(ttfts, 99),
               "latency_p50_ms": pct([r["total"] for r in res], 50)}
        rows.append(row)
        print(f"{c:>11}  {len(res):>8}  {row['output_tok_s']:>12.1f}  {row['ttft_p50_ms']:>11.0f}  "
              f"{row['ttft_p99_ms']:>11.0f}  {row['latency_p50_ms']:>18.0f}", flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        print(f"serve_bench: {e}", file=sys.stderr)
        sys.exit(1)
