"""The official `openai` Python client, unmodified, on a stream whose rank
dies: after the first chunk the script kills SPECD_KILL_PID (SIGKILL) and
expects the stream to raise openai.APIError naming the dead rank, not to end
quietly or hang. Usage:
  SPECD_BASE_URL=http://127.0.0.1:PORT/v1 SPECD_MODEL=NAME SPECD_KILL_PID=PID \
    SPECD_KILL_RANK=R python tests/python/openai_rank_death.py
Prints one line per check and exits non-zero if any failed.
"""
import os
import signal
import sys

import openai
from openai import OpenAI

base_url = os.environ.get("SPECD_BASE_URL")
model = os.environ.get("SPECD_MODEL")
pid = int(os.environ.get("SPECD_KILL_PID", "0"))
rank = os.environ.get("SPECD_KILL_RANK")
if not base_url or not model or pid <= 0 or rank is None:
    print("set SPECD_BASE_URL, SPECD_MODEL, SPECD_KILL_PID and SPECD_KILL_RANK", file=sys.stderr)
    sys.exit(2)
client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30.0)

chunks = 0
error = None
try:
    stream = client.completions.create(model=model, prompt=[1, 2, 3], max_tokens=5000,
                                       temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    for chunk in stream:
        chunks += 1
        if chunks == 1:
            os.kill(pid, signal.SIGKILL)
except openai.APIError as e:
    error = e

failed = 0


def check(name, cond, detail=""):
    global failed
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)), flush=True)
    failed += 0 if cond else 1


check("tokens before the kill", chunks >= 1, chunks)
check("the stream raised openai.APIError", error is not None, f"ended after {chunks} chunks")
message = str(getattr(error, "message", "")) if error is not None else ""
check(f"the error names rank {rank}", f"rank {rank}" in message, message)
check("the error says SIGKILL", "SIGKILL" in message, message)
if failed:
    sys.exit(1)
print("all checks passed")
