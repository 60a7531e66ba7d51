#!/usr/bin/python3
"""Acceptance of the demo pair measured by the specd engine itself, on the same held-out prompts as eval_accept.py.

Runs `specd generate --json` once per prompt and algorithm (greedy, --prompt-ids so tokenization is not involved)
and pools the engine's accept_hist (accept_hist[i]: verify steps that committed i+1 tokens).

Usage: /usr/bin/python3 eval_engine.py --specd build/release/specd --model models/demo
"""
import argparse
import json
import os
import subprocess

import numpy as np

import bpe
import data

CONFIGS = {
    "eagle3-chain5": ["--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1",
                      "--speculative-num-steps", "5", "--speculative-num-draft-tokens", "6"],
    "eagle3-tree": ["--speculative-algorithm", "EAGLE3"],  # engine defaults: 5 steps, top-4, 8 draft tokens
    "ngram-chain5": ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "6"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--specd", default="build/release/specd")
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--corpus", default="/tmp/demo_corpus")
    ap.add_argument("--work", default="/tmp/demo_work")
    ap.add_argument("--prompts", type=int, default=48)
    ap.add_argument("--prompt-tokens", type=int, default=24)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    tj = os.path.join(args.model, "tokenizer.json")
    tok = bpe.Tokenizer(tj)
    held, starts = data.load_split(args.corpus, tj, "heldout", args.work)
    ends = np.append(starts[1:], len(held))
    long_enough = [s for s, e in zip(starts, ends) if e - s >= args.prompt_tokens]
    pick = np.asarray(long_enough)[np.linspace(0, len(long_enough) - 1, args.prompts).astype(int)]
    for name, flags in CONFIGS.items():
        hist, tok_s, base_s = np.zeros(16, dtype=np.int64), [], []
        for s in pick:
            ids = [tok.bos_id] + held[s:s + args.prompt_tokens].tolist()
            cmd = [args.specd, "generate", "-m", args.model, "--draft-model", os.path.join(args.model, "eagle3"),
                   "--prompt-ids", ",".join(map(str, ids)), "-n", str(args.new_tokens), "-t", str(args.threads),
                   "--temperature", "0", "--ignore-eos", "--json", "--baseline"] + flags
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            st = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])["stats"]
            for i, n in enumerate(st["accept_hist"]):
                hist[i] += n
            tok_s.append(st["decode_tok_s"])
            base_s.append(st.get("baseline_decode_tok_s", float("nan")))
        hist = np.trim_zeros(hist, "b")
        committed = int((hist * np.arange(1, len(hist) + 1)).sum())
        print("%-14s mean tokens committed per target forward %.3f (%d / %d); accept_hist %s; decode tok/s median "
              "%.0f vs plain %.0f" % (name, committed / hist.sum(), committed, hist.sum(),
                                      " ".join(map(str, hist)), np.median(tok_s), np.median(base_s)), flush=True)


if __name__ == "__main__":
    main()
