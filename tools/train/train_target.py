#!/usr/bin/python3
"""Trains the demo target (a small Llama) on the prepared corpus and exports it in Hugging Face layout.

The learning-rate schedule runs on a wall-clock budget (--minutes): progress = max(step / max_steps,
elapsed / budget), warmup then cosine decay to 10% of the peak, so training ends on time however busy the machine is.
A checkpoint (model + optimizer + step) is written every --ckpt-minutes; --export-only turns the latest one into
config.json + model.safetensors at any time, so a run cut short can still ship.

Usage (see tools/train/README.md):
  OPENBLAS_NUM_THREADS=1 nice -n 19 /usr/bin/python3 train_target.py --corpus /tmp/demo_corpus \
      --work /tmp/demo_work --out models/demo --minutes 60
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

import bpe
import data
from model import Llama, LlamaConfig, save_safetensors


@torch.no_grad()
def heldout_nll(model, windows, batch=8):
    """Mean next-token NLL (nats) over every non-BOS token of the windows."""
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(windows), batch):
        x = torch.from_numpy(windows[i:i + batch])
        logits, _ = model(x)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
        tot += loss.item()
        n += x[:, 1:].numel()
    model.train()
    return tot / n


@torch.no_grad()
def greedy(model, tok, prompt, n=40):
    ids = tok.encode(prompt)
    for _ in range(n):
        logits, _ = model(torch.tensor([ids[-model.cfg.max_position_embeddings:]]))
        ids.append(int(logits[0, -1].argmax()))
    return tok.decode(ids)


def export(model, out_dir, dtype):
    os.makedirs(out_dir, exist_ok=True)
    cfg = model.cfg.hf_dict()
    cfg["torch_dtype"] = "bfloat16" if dtype == "BF16" else "float32"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    save_safetensors(os.path.join(out_dir, "model.safetensors"), model.hf_state_dict(), dtype=dtype,
                     metadata={"format": "pt"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/demo_corpus")
    ap.add_argument("--work", default="/tmp/demo_work", help="token cache, checkpoints, log")
    ap.add_argument("--out", default="models/demo", help="export folder (holds tokenizer.json)")
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=160)
    ap.add_argument("--intermediate", type=int, default=432)
    ap.add_argument("--layers", type=int, default=7)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--eval-minutes", type=float, default=10)
    ap.add_argument("--ckpt-minutes", type=float, default=5)
    ap.add_argument("--dtype", default="BF16", choices=["BF16", "F32"])
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.work, exist_ok=True)
    tj = os.path.join(args.out, "tokenizer.json")
    tok = bpe.Tokenizer(tj)
    cfg = LlamaConfig(vocab_size=tok.vocab_size(), hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, max_position_embeddings=args.seq_len,
                      bos_token_id=tok.bos_id, eos_token_id=tok.eos_id)
    model = Llama(cfg)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt_path = os.path.join(args.work, "target_ckpt.pt")
    step, elapsed_before, train_tokens = 0, 0.0, 0
    if args.resume or args.export_only:
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, elapsed_before, train_tokens = ck["step"], ck["elapsed"], ck["tokens"]
        print("resumed step %d (%.1f min, %d tokens)" % (step, elapsed_before / 60, train_tokens), flush=True)
    if args.export_only:
        export(model, args.out, args.dtype)
        print("exported to", args.out)
        return

    tokens, starts = data.load_split(args.corpus, tj, "train", args.work)
    held, _ = data.load_split(args.corpus, tj, "heldout", args.work)
    held_windows = data.eval_windows(held, args.seq_len, tok.bos_id)
    small_held = held_windows[::4]
    n_params = sum(p.numel() for p in model.parameters())
    print("params %d (%.2f M, %.2f M without embedding); train tokens %d, heldout tokens %d" %
          (n_params, n_params / 1e6, (n_params - model.embed_tokens.weight.numel()) / 1e6, len(tokens), len(held)),
          flush=True)

    budget = args.minutes * 60
    t_start = time.time() - elapsed_before
    last_ckpt = last_eval = time.time()

    def save():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "elapsed": time.time() - t_start, "tokens": train_tokens, "cfg": cfg.hf_dict()},
                   ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    ema = None
    while True:
        elapsed = time.time() - t_start
        progress = max(step / args.max_steps, elapsed / budget)
        if progress >= 1.0:
            break
        if step < args.warmup:
            lr = args.lr * (step + 1) / args.warmup
        else:
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = lr
        x = torch.from_numpy(data.sample_batch(tokens, starts, args.batch, args.seq_len, tok.bos_id, rng))
        logits, _ = model(x)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        train_tokens += x.numel()
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 20 == 0:
            print("step %5d  %.1f min  lr %.2e  loss %.3f  (%.0f tok/s avg)" %
                  (step, elapsed / 60, lr, ema, train_tokens / max(elapsed, 1e-6)), flush=True)
        now = time.time()
        if now - last_ckpt > args.ckpt_minutes * 60:
            save()
            last_ckpt = now
        if now - last_eval > args.eval_minutes * 60:
            nll = heldout_nll(model, small_held)
            print("eval step %d: heldout(1/4) nll %.3f ppl %.2f | %r" %
                  (step, nll, math.exp(nll), greedy(model, tok, "It is a truth universally", 24)), flush=True)
            last_eval = time.time()
    save()
    nll = heldout_nll(model, held_windows)
    print("final step %d, %.1f min, %d tokens (%.2f epochs): heldout nll %.4f ppl %.2f" %
          (step, (time.time() - t_start) / 60, train_tokens, train_tokens / len(tokens), nll, math.exp(nll)),
          flush=True)
    export(model, args.out, args.dtype)
    for p in ["It is a truth universally", "Elizabeth", "\"My dear"]:
        print(repr(greedy(model, tok, p, 48)), flush=True)


if __name__ == "__main__":
    main()
