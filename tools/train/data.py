"""Token streams for the demo model: the corpus encoded once with the shipped tokenizer and cached as .npy."""
import os

import numpy as np

import bpe


def load_split(corpus_dir, tokenizer_json, split, cache_dir):
    """Returns (tokens int32 [N], para_starts int64 [P]): every paragraph's tokens followed by the '\\n' token,
    concatenated; para_starts are the offsets where paragraphs begin."""
    cache = os.path.join(cache_dir, split + "_tokens.npz")
    if os.path.exists(cache) and os.path.getmtime(cache) > os.path.getmtime(tokenizer_json):
        z = np.load(cache)
        return z["tokens"], z["starts"]
    tok = bpe.Tokenizer(tokenizer_json)
    toks, starts = [], []
    with open(os.path.join(corpus_dir, split + ".txt")) as f:
        for para in f:
            starts.append(len(toks))
            toks.extend(tok.encode(para, add_special=False))  # para keeps its trailing "\n"
    tokens = np.asarray(toks, dtype=np.int32)
    starts = np.asarray(starts, dtype=np.int64)
    os.makedirs(cache_dir, exist_ok=True)
    np.savez(cache, tokens=tokens, starts=starts)
    return tokens, starts


def sample_batch(tokens, starts, batch, seq_len, bos_id, rng):
    """[batch, seq_len] int64: BOS then seq_len-1 tokens from a random paragraph start (so every sequence looks
    like a prompt at inference: BOS + text beginning at a paragraph)."""
    hi = np.searchsorted(starts, len(tokens) - seq_len)
    pick = starts[rng.integers(0, hi, size=batch)]
    idx = pick[:, None] + np.arange(seq_len - 1)[None, :]
    out = np.empty((batch, seq_len), dtype=np.int64)
    out[:, 0] = bos_id
    out[:, 1:] = tokens[idx]
    return out


def eval_windows(tokens, seq_len, bos_id, max_windows=None):
    """Non-overlapping windows over the whole split: [n, seq_len] with BOS first (every held-out token predicted
    exactly once, from at most seq_len-1 tokens of context)."""
    n = (len(tokens)) // (seq_len - 1)
    if max_windows:
        n = min(n, max_windows)
    w = tokens[:n * (seq_len - 1)].reshape(n, seq_len - 1).astype(np.int64)
    return np.concatenate([np.full((n, 1), bos_id, dtype=np.int64), w], axis=1)
