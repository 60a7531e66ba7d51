#!/usr/bin/python3
"""Greedy speculative-decoding acceptance of the shipped demo pair, measured in PyTorch.

For N held-out prompts (BOS + the first --prompt-tokens tokens of a held-out paragraph) the target generates
--new-tokens tokens greedily (temperature 0, KV cache). Greedy speculative decoding commits exactly that text, so the
decode loop is replayed on it: at each verify step the drafter proposes a chain of --chain tokens after the last
committed token (the root); the target accepts the longest prefix that matches its own greedy tokens and adds one
bonus token. Reported: mean tokens committed per target forward (accepted + 1, pooled over all verify steps; the
prefill forward is not counted) for
  * EAGLE-3: the head run as the engine runs it, one draft step at a time with its own KV: slots 0..t of the
    committed text come from fc(aux) (slot s holds the target's aux states at position s and token s+1, RoPE
    position s); draft step k >= 1 feeds the previous step's output hidden state and drafted token at RoPE position
    t + k, attending to slots 0..t and to its own earlier draft slots.
  * n-gram (prompt lookup): the tokens after the most recent earlier occurrence of the longest suffix (4 down to 1
    tokens) of the committed text, as src/spec/ngram.cc drafts them.
This replay is independent of train_eagle3.py's batched unroll (it is a step-by-step loop), so it also checks the
training-time-test masking.

Usage: OPENBLAS_NUM_THREADS=1 nice -n 19 /usr/bin/python3 eval_accept.py --model models/demo
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

import bpe
import data
from model import Eagle3Head, LlamaConfig, attention, causal_mask, load_safetensors, rope_cos_sin
from train_eagle3 import load_target, losses, sample_continuations, unroll


def load_head(path, tcfg):
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    cfg = LlamaConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                      intermediate_size=c["intermediate_size"], num_hidden_layers=1,
                      num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
                      max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
                      rope_theta=c["rope_theta"])
    head = Eagle3Head(cfg, c["target_hidden_size"], c["draft_vocab_size"])
    sd = load_safetensors(os.path.join(path, "model.safetensors"))
    head.load_hf_state_dict(sd)
    head.eval()
    d2t = sd["d2t"]
    aux_layers = c["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    return head, d2t, aux_layers


class DraftChain:
    """The head over one committed sequence: slot KV from fc(aux) for every committed position, then chains."""

    def __init__(self, head, embed, d2t, seq, aux_cat):
        self.head, self.embed, self.d2t = head, embed, d2t
        n = seq.shape[0] - 1  # slot s holds (aux[s], seq[s+1]) for s = 0..n-1
        cos, sin = rope_cos_sin(torch.arange(n), head.cfg.head_dim, head.cfg.rope_theta)
        hidden = head.fc(aux_cat[None, :n])
        residual, q, k, v = head.midlayer_qkv(self.embed(seq[None, 1:n + 1]), hidden, cos, sin)
        self.k, self.v = k, v                                            # [1, n_kv, n, hd]
        self.out = head.midlayer_finish(residual, attention(q, k, v, causal_mask(n)))  # [1, n, H]

    def propose(self, t, n_draft, forced=None, logits_out=None):
        """Chain of n_draft target ids after anchor slot t (whose token is the root). `forced` replaces the drafted
        tokens fed to the next steps (for checking against the batched unroll); logits_out collects the logits."""
        head = self.head
        ks, vs = self.k[:, :, :t + 1], self.v[:, :, :t + 1]
        hidden = self.out[:, t:t + 1]
        chain = []
        for k in range(n_draft):
            if k > 0:
                cos, sin = rope_cos_sin(torch.tensor([t + k]), head.cfg.head_dim, head.cfg.rope_theta)
                u = forced[k - 1] if forced is not None else chain[-1]
                residual, q, kk, vv = head.midlayer_qkv(self.embed(torch.tensor([[u]])), hidden, cos, sin)
                ks, vs = torch.cat([ks, kk], dim=2), torch.cat([vs, vv], dim=2)
                hidden = head.midlayer_finish(residual, attention(q, ks, vs, torch.zeros(1, ks.shape[2])))
            lg = head.logits(hidden)[0, -1]
            if logits_out is not None:
                logits_out.append(lg)
            d = int(lg.argmax())
            chain.append(d + int(self.d2t[d]))
        return chain



def check_unroll(head, embed, d2t, seq, aux_cat, steps=5):
    """Max |logit difference| between train_eagle3.unroll (batched training-time test) and the step-by-step chain
    fed the same ground-truth tokens, over every anchor of one sequence: the two must compute the same thing."""
    outs = unroll(head, embed, seq[None], aux_cat[None], steps)
    chain = DraftChain(head, embed, d2t, seq, aux_cat)
    worst = 0.0
    for t in range(outs[0].shape[1]):
        got = []
        chain.propose(t, steps, forced=[int(seq[t + 1 + k]) for k in range(1, steps)], logits_out=got)
        for k in range(steps):
            worst = max(worst, float((got[k] - outs[k][0, t]).abs().max()))
    return worst


def ngram_propose(hist, n_draft, max_ngram=4, min_ngram=1):
    n = len(hist)
    for ln in range(min(max_ngram, n - 1), min_ngram - 1, -1):
        for end in range(n - 2, ln - 2, -1):
            if hist[end - ln + 1:end + 1] == hist[n - ln:]:
                return hist[end + 1:end + 1 + n_draft]
    return []


def replay(seq, p_len, propose, chain):
    """seq: committed greedy sequence (list); p_len: prompt length incl. BOS. Returns (committed, forwards,
    accepted-per-step histogram)."""
    anchor = p_len - 1  # the prefill produced seq[p_len]: the root of the first verify step
    committed = forwards = 0
    hist = np.zeros(chain + 1, dtype=np.int64)
    while anchor + 1 < len(seq) - 1:
        remaining = len(seq) - 1 - (anchor + 1)
        draft = propose(anchor, min(chain, remaining))
        a = 0
        while a < len(draft) and draft[a] == seq[anchor + 2 + a]:
            a += 1
        committed += a + 1
        forwards += 1
        hist[a] += 1
        anchor += a + 1
    return committed, forwards, hist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--head", default=None, help="default: <model>/eagle3")
    ap.add_argument("--corpus", default="/tmp/demo_corpus")
    ap.add_argument("--work", default="/tmp/demo_work")
    ap.add_argument("--prompts", type=int, default=48)
    ap.add_argument("--prompt-tokens", type=int, default=24)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--chain", type=int, default=5)
    ap.add_argument("--show", type=int, default=2, help="print this many generations")
    ap.add_argument("--heldout-acc", type=int, default=0, metavar="N",
                    help="also report the head's accuracy per unroll step, teacher-forced on N held-out corpus "
                    "windows of 256 tokens (argmax(head) through d2t == argmax(target))")
    ap.add_argument("--perplexity", action="store_true", help="also report the held-out perplexity of the shipped "
                    "target (every held-out token once, 256-token windows starting with BOS)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    target = load_target(args.model)
    if args.perplexity:
        from train_target import heldout_nll
        tj = os.path.join(args.model, "tokenizer.json")
        held, _ = data.load_split(args.corpus, tj, "heldout", args.work)
        windows = data.eval_windows(held, target.cfg.max_position_embeddings, target.cfg.bos_token_id)
        nll = heldout_nll(target, windows)
        print("held-out: %d tokens, nll %.4f nats/token, perplexity %.2f" % (windows[:, 1:].size, nll, math.exp(nll)))
    head, d2t, aux_layers = load_head(args.head or os.path.join(args.model, "eagle3"), target.cfg)
    if args.heldout_acc:
        tj = os.path.join(args.model, "tokenizer.json")
        held, _ = data.load_split(args.corpus, tj, "heldout", args.work)
        windows = data.eval_windows(held, target.cfg.max_position_embeddings, target.cfg.bos_token_id)
        windows = windows[np.linspace(0, len(windows) - 1, min(args.heldout_acc, len(windows))).astype(int)]
        draft_ids = torch.arange(head.lm_head.weight.shape[0]) + d2t
        acc = np.zeros(args.chain)
        with torch.no_grad():
            for i in range(0, len(windows), 8):
                x = torch.from_numpy(windows[i:i + 8])
                lg, ax = target(x, capture=aux_layers)
                outs = unroll(head, target.embed_tokens, x, torch.cat([ax[j] for j in aux_layers], dim=-1),
                              args.chain)
                _, accs = losses(outs, lg, draft_ids)
                acc += np.array(accs) * len(x)
        print("head accuracy per unroll step on %d held-out corpus windows (teacher forced): %s" %
              (len(windows), " ".join("%.3f" % v for v in acc / len(windows))))
    tok = bpe.Tokenizer(os.path.join(args.model, "tokenizer.json"))
    held, starts = data.load_split(args.corpus, os.path.join(args.model, "tokenizer.json"), "heldout", args.work)
    ends = np.append(starts[1:], len(held))
    long_enough = [s for s, e in zip(starts, ends) if e - s >= args.prompt_tokens]
    pick = np.asarray(long_enough)[np.linspace(0, len(long_enough) - 1, args.prompts).astype(int)]
    prompts = np.stack([np.concatenate([[tok.bos_id], held[s:s + args.prompt_tokens]]) for s in pick])
    prompts = torch.from_numpy(prompts.astype(np.int64))
    p_len = prompts.shape[1]

    with torch.no_grad():
        seqs = sample_continuations(target, prompts, args.new_tokens, 0.0, None)
        logits, aux = target(seqs, capture=aux_layers)
        # The cached generation and a full forward must agree on the greedy tokens (near-ties aside).
        agree = (logits[:, p_len - 1:-1].argmax(-1) == seqs[:, p_len:]).float().mean().item()
        aux_cat = torch.cat([aux[i] for i in aux_layers], dim=-1)
        unroll_diff = check_unroll(head, target.embed_tokens, d2t, seqs[0], aux_cat[0], args.chain)
        tot = {"eagle3": [0, 0, 0], "ngram": [0, 0, 0]}
        hists = {"eagle3": 0, "ngram": 0}
        for b in range(seqs.shape[0]):
            seq = seqs[b].tolist()
            chain = DraftChain(head, target.embed_tokens, d2t, seqs[b], aux_cat[b])
            for name, prop in (("eagle3", lambda t, n: chain.propose(t, n) if n > 0 else []),
                               ("ngram", lambda t, n: ngram_propose(seq[:t + 2], n))):
                c, f, h = replay(seq, p_len, prop, args.chain)
                tot[name][0] += c
                tot[name][1] += f
                hists[name] = hists[name] + h
            if b < args.show:
                print("prompt %d: %r" % (b, tok.decode(seq[:p_len])))
                print("   greedy: %r" % tok.decode(seq[p_len:]))
    print("%d prompts x %d greedy tokens (cached vs full-forward greedy agreement %.4f), chain of %d draft tokens"
          % (seqs.shape[0], args.new_tokens, agree, args.chain))
    print("batched training unroll vs step-by-step drafting: max |logit diff| %.2e" % unroll_diff)
    for name in ("eagle3", "ngram"):
        c, f, _ = tot[name]
        h = hists[name]
        print("%-6s mean tokens committed per target forward %.3f  (%d tokens / %d forwards); accepted-length "
              "histogram 0..%d: %s" % (name, c / f, c, f, args.chain, " ".join(str(int(v)) for v in h)))


if __name__ == "__main__":
    main()
