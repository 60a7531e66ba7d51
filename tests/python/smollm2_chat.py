"""SmolLM2-135M-Instruct behind `specd serve`, through the official `openai`
client and the chat template the GGUF carries. Usage:
  SPECD_BASE_URL=http://127.0.0.1:PORT/v1 SPECD_MODEL=NAME SPECD_GGUF=PATH \
    SPECD_BIN=path/to/specd python tests/python/smollm2_chat.py
Checks, greedy: the reply ends at <|im_end|> (finish_reason "stop", the
marker not in the text) or at max_tokens ("length"); streamed deltas join to
the same text; usage.prompt_tokens is the token count of the file's
template rendered by jinja2 as transformers renders it (render_template.py)
and tokenized by `specd tokenize`. Prints a line per check, exits non-zero
on a failure.
"""
import json
import os
import subprocess
import sys

from gguf import GGUFReader
from openai import OpenAI

sys.path.insert(0, os.path.dirname(__file__))
import render_template  # noqa: E402

base_url, model = os.environ["SPECD_BASE_URL"], os.environ["SPECD_MODEL"]
gguf_path, specd = os.environ["SPECD_GGUF"], os.environ["SPECD_BIN"]
client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120.0)
failed = 0


def check(name, cond, detail=None):
    global failed
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    failed += 0 if cond else 1


def field(reader, key):
    f = reader.fields[key]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


template = field(GGUFReader(gguf_path), "tokenizer.chat_template")
questions = ["What is the capital of France?", "Write a haiku about the sea."]
stops = 0
for q in questions:
    messages = [{"role": "user", "content": q}]
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=48,
                                       temperature=0)
    text, reason = r.choices[0].message.content, r.choices[0].finish_reason
    print(f"     {q!r} -> {text!r} ({reason})")
    check(f"{q!r}: finish_reason stop or length", reason in ("stop", "length"), reason)
    stops += reason == "stop"
    check(f"{q!r}: non-empty reply", bool(text and text.strip()), text)
    check(f"{q!r}: no <|im_end|> in the text", "<|im_end|>" not in text, text)
    if reason == "length":
        check(f"{q!r}: length means max_tokens", r.usage.completion_tokens == 48, r.usage)
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=48,
                                            temperature=0, stream=True)
    joined = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    check(f"{q!r}: streamed deltas join to the same text", joined == text, [joined, text])
    rendered = render_template.make_env().from_string(template).render(
        messages=messages, add_generation_prompt=True, bos_token="", eos_token="<|im_end|>")
    ids = json.loads(subprocess.run([specd, "tokenize", "--model", gguf_path, "--text",
                                     rendered, "--json"], capture_output=True, text=True,
                                    check=True).stdout)["ids"]
    check(f"{q!r}: prompt_tokens is the jinja2-rendered template's token count",
          r.usage.prompt_tokens == len(ids), [r.usage.prompt_tokens, len(ids)])
check("a reply ended at <|im_end|> (finish_reason stop)", stops > 0, stops)
print("all checks passed" if failed == 0 else f"{failed} checks failed")
sys.exit(1 if failed else 0)
