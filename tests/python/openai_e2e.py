"""End-to-end check of `specd serve` with the official `openai` Python client,
unmodified. Usage:
  SPECD_BASE_URL=http://127.0.0.1:PORT/v1 SPECD_API_KEY=KEY SPECD_MODEL=NAME \
    [SPECD_PLAIN_BASE_URL=http://127.0.0.1:PORT2/v1] python tests/python/openai_e2e.py
Prints one line per check and exits non-zero if any failed. With
SPECD_PLAIN_BASE_URL set (a second server on the same model without
speculation), the server under test is taken to be speculative: its greedy
output must equal the plain server's and /metrics must count verify steps.
"""
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
from openai import OpenAI

base_url = os.environ.get("SPECD_BASE_URL")
api_key = os.environ.get("SPECD_API_KEY")
model = os.environ.get("SPECD_MODEL")
if not base_url or not api_key or not model:
    print("set SPECD_BASE_URL, SPECD_API_KEY and SPECD_MODEL", file=sys.stderr)
    sys.exit(2)
plain_base_url = os.environ.get("SPECD_PLAIN_BASE_URL")
client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60.0)
failed = 0


def check(name, cond, detail=None):
    global failed
    if cond:
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL {name}: {'' if detail is None else json.dumps(detail, default=str)}", flush=True)


def expect_error(name, fn, status, param=None):
    try:
        fn()
        check(name, False, "no error raised")
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check(f"{name}: status {status}", e.status_code == status, {"status": e.status_code, "body": body})
        check(f"{name}: error object", isinstance(body.get("message"), str) and "type" in body and
              "param" in body and "code" in body, body)
        if param is not None:
            check(f"{name}: param {param}", body.get("param") == param, body)


prompt = "It is a truth universally acknowledged, that"
greedy = {"temperature": 0, "max_tokens": 24}

# Models.
models = client.models.list()
check("models.list has the served model", any(m.id == model for m in models.data),
      [m.id for m in models.data])

# Completions, not streamed.
c = client.completions.create(model=model, prompt=prompt, **greedy)
check("completion object", c.object == "text_completion" and c.id.startswith("cmpl-"), c.to_dict())
check("completion model", c.model == model, c.model)
check("completion created", isinstance(c.created, int) and c.created > 1.6e9, c.created)
check("completion text", isinstance(c.choices[0].text, str) and len(c.choices[0].text) > 0,
      c.choices[0].to_dict())
check("completion usage", c.usage.completion_tokens > 0 and c.usage.prompt_tokens > 0 and
      c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens, c.usage.to_dict())
check("completion finish_reason", c.choices[0].finish_reason in ("stop", "length"),
      c.choices[0].finish_reason)

# Completions, streamed: the same greedy text, then [DONE] (the client ends the loop).
streamed, finish, usage = "", None, None
for chunk in client.completions.create(model=model, prompt=prompt, stream=True,
                                       stream_options={"include_usage": True}, **greedy):
    if chunk.usage:
        usage = chunk.usage
    for ch in chunk.choices:
        streamed += ch.text
        if ch.finish_reason:
            finish = ch.finish_reason
check("streamed completion equals non-streamed", streamed == c.choices[0].text,
      {"streamed": streamed, "full": c.choices[0].text})
check("streamed finish_reason", finish == c.choices[0].finish_reason, finish)
check("streamed include_usage",
      usage is not None and usage.completion_tokens == c.usage.completion_tokens,
      usage and usage.to_dict())

# Logprobs on completions.
lp = client.completions.create(model=model, prompt=prompt, temperature=0, max_tokens=4, logprobs=2)
l = lp.choices[0].logprobs
check("completion logprobs", l is not None and len(l.tokens) == 4 and
      all(x <= 0 for x in l.token_logprobs) and all(len(m) >= 1 for m in l.top_logprobs),
      l and l.to_dict())

# Stop strings: cut the greedy text at a later substring.
text = c.choices[0].text
cut = max(1, len(text) // 2)  # Python strings index code points
stop_str = text[cut:cut + 3].strip() or text[cut:cut + 1]
expected = text[:text.find(stop_str)] if stop_str else text
if stop_str and len(expected) < len(text):
    s = client.completions.create(model=model, prompt=prompt, stop=[stop_str], **greedy)
    check("stop string: text cut before it", s.choices[0].text == expected,
          {"got": s.choices[0].text, "expected": expected, "stop": stop_str})
    check("stop string: finish_reason stop", s.choices[0].finish_reason == "stop",
          s.choices[0].finish_reason)
    st = ""
    for chunk in client.completions.create(model=model, prompt=prompt, stop=stop_str, stream=True,
                                           **greedy):
        for ch in chunk.choices:
            st += ch.text
    check("stop string streamed", st == expected, {"st": st, "expected": expected})

# Chat, not streamed and streamed.
messages = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Tell me about Mr. Darcy."}]
chat = client.chat.completions.create(model=model, messages=messages, temperature=0,
                                      max_completion_tokens=16)
check("chat object", chat.object == "chat.completion" and chat.id.startswith("chatcmpl-"),
      chat.to_dict())
check("chat message", chat.choices[0].message.role == "assistant" and
      isinstance(chat.choices[0].message.content, str), chat.choices[0].to_dict())
check("chat usage", chat.usage.completion_tokens == 16 or chat.choices[0].finish_reason == "stop",
      chat.usage.to_dict())
chat_text, saw_role, chat_usage, chunk_objects = "", False, None, set()
for chunk in client.chat.completions.create(model=model, messages=messages, temperature=0,
                                            max_tokens=16, stream=True,
                                            stream_options={"include_usage": True}):
    chunk_objects.add(chunk.object)
    if chunk.usage:
        chat_usage = chunk.usage
    for ch in chunk.choices:
        if ch.delta.role == "assistant":
            saw_role = True
        if ch.delta.content:
            chat_text += ch.delta.content
check("chat chunk object", chunk_objects == {"chat.completion.chunk"}, sorted(chunk_objects))
check("streamed chat equals non-streamed", chat_text == chat.choices[0].message.content,
      {"chat_text": chat_text, "full": chat.choices[0].message.content})
check("streamed chat role delta", saw_role)
check("streamed chat usage",
      chat_usage is not None and chat_usage.total_tokens == chat.usage.total_tokens,
      chat_usage and chat_usage.to_dict())

# Seeded sampling is reproducible.
a = client.completions.create(model=model, prompt=prompt, temperature=1, seed=7, max_tokens=12)
b = client.completions.create(model=model, prompt=prompt, temperature=1, seed=7, max_tokens=12)
check("same seed, same text", a.choices[0].text == b.choices[0].text,
      [a.choices[0].text, b.choices[0].text])

# Errors.
expect_error("max_tokens wrong type",
             lambda: client.completions.create(model=model, prompt=prompt, max_tokens="ten"),
             400, "max_tokens")
expect_error("n > 1", lambda: client.completions.create(model=model, prompt=prompt, n=2), 400, "n")
expect_error("temperature < 0",
             lambda: client.chat.completions.create(model=model, messages=messages, temperature=-1),
             400, "temperature")
expect_error("top_p > 1", lambda: client.completions.create(model=model, prompt=prompt, top_p=1.5),
             400, "top_p")
expect_error("prompt longer than the context",
             lambda: client.completions.create(model=model, prompt="word " * 5000, max_tokens=1),
             400, "prompt")
expect_error("unknown model", lambda: client.completions.create(model="nope", prompt=prompt),
             404, "model")
bad = OpenAI(base_url=base_url, api_key=api_key + "x", max_retries=0)
expect_error("wrong API key", lambda: bad.completions.create(model=model, prompt=prompt), 401)


# Concurrency: 16 streams at once give each the greedy text it gets alone.
def stream_text(p):
    t = ""
    for chunk in client.completions.create(model=model, prompt=p, temperature=0, max_tokens=20,
                                           stream=True):
        if chunk.choices:
            t += chunk.choices[0].text
    return t


names = ["Elizabeth", "Mr. Bennet", "Her sister", "The ball", "Mrs. Jennings", "Emma",
         "Captain Wentworth", "Anne"]
prompts = [names[i % 8] + (" said that" if i < 8 else " was not") for i in range(16)]
alone = [stream_text(p) for p in prompts]
with ThreadPoolExecutor(max_workers=16) as pool:
    together = list(pool.map(stream_text, prompts))
check("16 concurrent streams equal each run alone",
      all(t == alone[i] and len(t) > 0 for i, t in enumerate(together)),
      ["same" if t == alone[i] else {"alone": alone[i], "together": t} for i, t in enumerate(together)])

# Metrics (no API key needed for /metrics).
base_no_v1 = base_url.rstrip("/")
if base_no_v1.endswith("/v1"):
    base_no_v1 = base_no_v1[:-3]


def metrics():
    with urllib.request.urlopen(base_no_v1 + "/metrics", timeout=10) as r:
        return r.read().decode()


def metric(name):
    for line in metrics().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return float("nan")


# Cancellation: a client that closes its stream frees its KV pages. (The tiny
# test model may finish before /metrics is read, so only the end state is
# checked here; runtime's CancellationFreesKvPages checks a cancellation that
# certainly lands mid-generation.)
long_stream = client.completions.create(model=model, prompt=prompt, temperature=0, max_tokens=400,
                                        stream=True, extra_body={"ignore_eos": True})
got_chunks = 0
for chunk in long_stream:
    got_chunks += 1
    if got_chunks == 2:
        long_stream.close()
        break
freed = False
for _ in range(100):
    freed = metric("specd_kv_cache_used_pages") == 0
    if freed:
        break
    time.sleep(0.05)
check("closed stream frees its KV pages", freed, metric("specd_kv_cache_used_pages"))

if plain_base_url:
    # Speculation served through the client: greedy output equals the plain
    # server's (same model, no draft), and the server did verify drafts.
    plain = OpenAI(base_url=plain_base_url, api_key=api_key, max_retries=0, timeout=60.0)
    for p in prompts[:4] + [prompt]:
        spec_text = client.completions.create(model=model, prompt=p, temperature=0,
                                              max_tokens=32).choices[0].text
        plain_text = plain.completions.create(model=model, prompt=p, temperature=0,
                                              max_tokens=32).choices[0].text
        check(f"speculative greedy equals plain greedy: {p!r}", spec_text == plain_text,
              {"speculative": spec_text, "plain": plain_text})
    spec_chat = client.chat.completions.create(model=model, messages=messages, temperature=0,
                                               max_tokens=24, stream=True)
    spec_chat_text = "".join(ch.choices[0].delta.content or "" for ch in spec_chat if ch.choices)
    plain_chat = plain.chat.completions.create(model=model, messages=messages, temperature=0,
                                               max_tokens=24)
    check("speculative streamed chat equals plain chat",
          spec_chat_text == plain_chat.choices[0].message.content,
          {"speculative": spec_chat_text, "plain": plain_chat.choices[0].message.content})
    steps = metric("specd_spec_accept_length_count")
    check("speculative verify steps counted in /metrics", steps > 0, steps)
    check("speculative mean accept length >= 1", metric("specd_spec_accept_length_mean") >= 1,
          metric("specd_spec_accept_length_mean"))
    # Auto-shaped speculation (the default): the chosen depths, and the
    # predicted and measured speedup over plain decoding.
    check("auto shape: a depth recorded per verify step",
          metric("specd_spec_draft_depth_count") >= steps > 0, metric("specd_spec_draft_depth_count"))
    for name in ("specd_spec_predicted_speedup_avg", "specd_spec_measured_speedup_avg"):
        check(f"{name} in (0, 10)", 0 < metric(name) < 10, metric(name))

print("all checks passed" if failed == 0 else f"{failed} checks failed", flush=True)
sys.exit(0 if failed == 0 else 1)
