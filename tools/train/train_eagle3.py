#!/usr/bin/python3
"""Trains the EAGLE-3 draft head for the demo target and exports it as SGLang/vLLM load LlamaForCausalLMEagle3.

Training-time test: every batch is unrolled for --steps draft steps exactly as speculative decoding runs the head
(see tools/train/README.md, "draft head forward"): step 0 reads fc(target aux states) at every anchor position t,
step k >= 1 reads the head's own output hidden state of step k-1 at the same anchor, with RoPE position t + k, and
attends to the step-0 keys of positions 0..t plus its own chain's keys of steps 1..k. The loss at step k is the
cross-entropy of the head's draft-vocabulary distribution against the target's next-token distribution at position
t + 1 + k (restricted to the draft vocabulary and renormalised), weighted 0.8^k.

Data: sequences of BOS + 255 tokens, a mix of corpus text (from paragraph starts) and, with --gen-frac, text the
target itself sampled from corpus prompts (what the head sees at inference). Labels always come from the target.

Usage: OPENBLAS_NUM_THREADS=1 nice -n 19 /usr/bin/python3 train_eagle3.py --target models/demo \
           --out models/demo/eagle3 --minutes 30
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
from model import (Eagle3Head, Llama, LlamaConfig, attention, causal_mask, load_safetensors, rope_cos_sin,
                   save_safetensors)


def load_target(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = LlamaConfig.from_hf_dict(json.load(f))
    m = Llama(cfg)
    m.load_hf_state_dict(load_safetensors(os.path.join(path, "model.safetensors")))
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def default_aux_layers(n_layers):
    """[2, N/2, N-3]: the default of SGLang and vLLM, as indices of the residual stream entering that layer."""
    return [2, n_layers // 2, n_layers - 3]


def draft_vocab(tokens, vocab_size, n):
    """The n most frequent target ids in `tokens`, sorted by id. Returns (ids, d2t int64 [n], t2d bool [vocab])."""
    counts = np.bincount(tokens, minlength=vocab_size)
    ids = np.sort(np.argsort(-counts, kind="stable")[:n])
    d2t = torch.from_numpy(ids - np.arange(n)).to(torch.int64)
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[torch.from_numpy(ids)] = True
    return torch.from_numpy(ids), d2t, t2d


@torch.no_grad()
def target_pass(target, x, aux_layers):
    logits, aux = target(x, capture=aux_layers)
    return logits, torch.cat([aux[i] for i in aux_layers], dim=-1)


def unroll(head, embed, x, aux_cat, n_steps):
    """Training-time test. x: [B, T] tokens; aux_cat: [B, T, 3*H_target]. Anchors t = 0..A-1 with A = T - n_steps.
    Returns a list over steps k of draft logits [B, A, draft_vocab]; step k at anchor t reads token x[t+1+k] and
    predicts x[t+2+k]."""
    B, T = x.shape
    A = T - n_steps
    hd, theta = head.cfg.head_dim, head.cfg.rope_theta
    hidden = head.fc(aux_cat[:, :A])
    keys, vals, outs = [], [], []
    k0_mask = causal_mask(A)
    for k in range(n_steps):
        cos, sin = rope_cos_sin(torch.arange(k, A + k), hd, theta)
        emb = embed(x[:, 1 + k:A + 1 + k])
        residual, q, kk, vv = head.midlayer_qkv(emb, hidden, cos, sin)
        keys.append(kk)
        vals.append(vv)
        if k == 0:
            o = attention(q, kk, vv, k0_mask)
        else:
            rep = q.shape[1] // kk.shape[1]
            K0 = keys[0].repeat_interleave(rep, dim=1)
            V0 = vals[0].repeat_interleave(rep, dim=1)
            scale = 1.0 / math.sqrt(hd)
            s0 = q @ K0.transpose(-1, -2) * scale + k0_mask               # [B, h, A, A]: prefix slots 0..t
            sd = torch.stack([(q * kj.repeat_interleave(rep, dim=1)).sum(-1) * scale
                              for kj in keys[1:]], dim=-1)                 # [B, h, A, k]: own chain, steps 1..k
            p = F.softmax(torch.cat([s0, sd], dim=-1).float(), dim=-1)
            o = p[..., :A] @ V0
            for j, vj in enumerate(vals[1:]):
                o = o + p[..., A + j:A + j + 1] * vj.repeat_interleave(rep, dim=1)
        hidden = head.midlayer_finish(residual, o)
        outs.append(head.logits(hidden))
    return outs


def losses(outs, tgt_logits, draft_ids, step_weight=0.8):
    """Soft cross-entropy against the target's distribution over the draft vocabulary, plus per-step accuracy
    (draft argmax mapped to a target id == the target's argmax over the full vocabulary)."""
    A = outs[0].shape[1]
    p_all = F.softmax(tgt_logits[..., draft_ids].float(), dim=-1)
    top_all = tgt_logits.argmax(-1)
    total, accs = 0.0, []
    for k, lg in enumerate(outs):
        p = p_all[:, 1 + k:A + 1 + k]
        loss = -(p * F.log_softmax(lg.float(), dim=-1)).sum(-1).mean()
        total = total + (step_weight ** k) * loss
        accs.append((draft_ids[lg.argmax(-1)] == top_all[:, 1 + k:A + 1 + k]).float().mean().item())
    return total, accs


@torch.no_grad()
def sample_continuations(target, prompts, n_new, temperature, gen):
    """prompts: [B, P] int64 (same length). Samples n_new tokens per row with a KV cache. Returns [B, P + n_new]."""
    cache = [None] * target.cfg.num_hidden_layers
    logits, _ = target.forward_cached(prompts, 0, cache)
    seq = [prompts]
    pos = prompts.shape[1]
    for _ in range(n_new):
        last = logits[:, -1].float()
        if temperature <= 0:
            nxt = last.argmax(-1, keepdim=True)
        else:
            nxt = torch.multinomial(F.softmax(last / temperature, dim=-1), 1, generator=gen)
        seq.append(nxt)
        logits, _ = target.forward_cached(nxt, pos, cache)
        pos += 1
    return torch.cat(seq, dim=1)


@torch.no_grad()
def warm_start(head, target, draft_ids):
    """norm and lm_head start as the target's final norm and its (tied) output rows of the draft vocabulary, so the
    head's output hidden state lives in the target's output space from the first step. (fc is not started as a
    pass-through of the high aux state: slot t must predict x[t+2], while the aux states at t encode x[t+1].)"""
    head.norm.weight.copy_(target.norm.weight)
    head.lm_head.weight.copy_(target.embed_tokens.weight[draft_ids])


@torch.no_grad()
def generate_with_states(target, prompts, n_new, temperature, aux_layers, gen):
    """Like sample_continuations, but also returns what the target computed on the way (so no second target pass
    is needed): (tokens [B, T], logits [B, T, V], aux_cat [B, T, 3*H_target]) with T = P + n_new."""
    cache = [None] * target.cfg.num_hidden_layers
    logits, aux = target.forward_cached(prompts, 0, cache, capture=aux_layers)
    seq, all_logits, all_aux = [prompts], [logits], [torch.cat([aux[i] for i in aux_layers], dim=-1)]
    pos = prompts.shape[1]
    for _ in range(n_new):
        last = logits[:, -1].float()
        if temperature <= 0:
            nxt = last.argmax(-1, keepdim=True)
        else:
            nxt = torch.multinomial(F.softmax(last / temperature, dim=-1), 1, generator=gen)
        seq.append(nxt)
        logits, aux = target.forward_cached(nxt, pos, cache, capture=aux_layers)
        all_logits.append(logits)
        all_aux.append(torch.cat([aux[i] for i in aux_layers], dim=-1))
        pos += 1
    return torch.cat(seq, dim=1), torch.cat(all_logits, dim=1), torch.cat(all_aux, dim=1)


def export(head, cfg, tcfg, n_draft, aux_layers, d2t, t2d, out_dir, dtype):
    os.makedirs(out_dir, exist_ok=True)
    c = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": 1,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "vocab_size": tcfg.vocab_size,
        "draft_vocab_size": n_draft,
        "target_hidden_size": tcfg.hidden_size,
        "bos_token_id": tcfg.bos_token_id,
        "eos_token_id": tcfg.eos_token_id,
        "torch_dtype": "bfloat16" if dtype == "BF16" else "float32",
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": aux_layers,
            "use_aux_hidden_state": True,
            "use_input_layernorm_in_first_layer": True,
            "use_last_layernorm": True,
        },
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    save_safetensors(os.path.join(out_dir, "model.safetensors"), head.hf_state_dict(d2t, t2d), dtype=dtype,
                     metadata={"format": "pt"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/demo_corpus")
    ap.add_argument("--work", default="/tmp/demo_work")
    ap.add_argument("--target", default="models/demo")
    ap.add_argument("--out", default="models/demo/eagle3")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=6)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5, help="training-time-test unroll length")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--draft-vocab", type=int, default=1536)
    ap.add_argument("--gen-frac", type=float, default=0.5, help="fraction of batches sampled from the target")
    ap.add_argument("--gen-prompt", type=int, default=16)
    ap.add_argument("--gen-temperature", type=float, default=0.8)
    ap.add_argument("--gen-greedy-frac", type=float, default=0.0,
                    help="fraction of generated refills decoded greedily (temperature 0) instead")
    ap.add_argument("--gen-refill", type=int, default=4, help="generated batches produced per refill")
    ap.add_argument("--init-from", default=None,
                    help="start from this head checkpoint (weights + optimizer) with a fresh schedule")
    ap.add_argument("--ckpt-minutes", type=float, default=5)
    ap.add_argument("--dtype", default="BF16", choices=["BF16", "F32"])
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    target = load_target(args.target)
    tcfg = target.cfg
    tj = os.path.join(args.target, "tokenizer.json")
    tokens, starts = data.load_split(args.corpus, tj, "train", args.work)
    aux_layers = default_aux_layers(tcfg.num_hidden_layers)
    if len(set(aux_layers)) != 3 or min(aux_layers) < 0:
        raise SystemExit("target depth %d gives aux layers %s; need 3 distinct" % (tcfg.num_hidden_layers, aux_layers))
    draft_ids, d2t, t2d = draft_vocab(tokens, tcfg.vocab_size, args.draft_vocab)
    cfg = LlamaConfig(**{**tcfg.__dict__, "num_hidden_layers": 1})
    head = Eagle3Head(cfg, tcfg.hidden_size, args.draft_vocab)
    warm_start(head, target, draft_ids)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    ckpt_path = os.path.join(args.work, "eagle3_ckpt.pt")
    step, elapsed_before = 0, 0.0
    if args.resume or args.export_only:
        ck = torch.load(ckpt_path)
        head.load_state_dict(ck["head"])
        opt.load_state_dict(ck["opt"])
        step, elapsed_before = ck["step"], ck["elapsed"]
    if args.init_from:
        ck = torch.load(args.init_from)
        head.load_state_dict(ck["head"])
        opt.load_state_dict(ck["opt"])
        print("initialised from %s (trained %d steps, %.1f min)" % (args.init_from, ck["step"], ck["elapsed"] / 60))
    if args.export_only:
        export(head, cfg, tcfg, args.draft_vocab, aux_layers, d2t, t2d, args.out, args.dtype)
        print("exported to", args.out)
        return
    n_params = sum(p.numel() for p in head.parameters())
    cover = t2d[torch.from_numpy(tokens.astype(np.int64))].float().mean().item()
    print("head params %.3f M; aux layers %s; draft vocab %d covers %.1f%% of corpus tokens" %
          (n_params / 1e6, aux_layers, args.draft_vocab, 100 * cover), flush=True)

    budget = args.minutes * 60
    t_start = time.time() - elapsed_before
    last_ckpt = time.time()
    acc_ema, loss_ema = None, None
    gen_buffer = []

    def save():
        torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "step": step,
                    "elapsed": time.time() - t_start}, ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

    while True:
        elapsed = time.time() - t_start
        progress = max(step / args.max_steps, elapsed / budget)
        if progress >= 1.0:
            break
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = lr
        if rng.random() < args.gen_frac:
            if not gen_buffer:
                n = args.batch * args.gen_refill
                x = torch.from_numpy(data.sample_batch(tokens, starts, n, args.seq_len, tcfg.bos_token_id, rng))
                temp = 0.0 if rng.random() < args.gen_greedy_frac else args.gen_temperature
                x, lg, ax = generate_with_states(target, x[:, :1 + args.gen_prompt],
                                                 args.seq_len - 1 - args.gen_prompt, temp, aux_layers, gen)
                gen_buffer = [(x[i:i + args.batch], lg[i:i + args.batch], ax[i:i + args.batch])
                              for i in range(0, n, args.batch)]
            x, tgt_logits, aux_cat = gen_buffer.pop()
        else:
            x = torch.from_numpy(data.sample_batch(tokens, starts, args.batch, args.seq_len, tcfg.bos_token_id,
                                                   rng))
            tgt_logits, aux_cat = target_pass(target, x, aux_layers)
        outs = unroll(head, target.embed_tokens, x, aux_cat, args.steps)
        loss, accs = losses(outs, tgt_logits, draft_ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        a = np.array(accs)
        acc_ema = a if acc_ema is None else 0.95 * acc_ema + 0.05 * a
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        if step % 10 == 0:
            print("step %4d  %.1f min  lr %.2e  loss %.3f  acc/step %s" %
                  (step, elapsed / 60, lr, loss_ema, " ".join("%.3f" % v for v in acc_ema)), flush=True)
        if time.time() - last_ckpt > args.ckpt_minutes * 60:
            save()
            export(head, cfg, tcfg, args.draft_vocab, aux_layers, d2t, t2d, args.out, args.dtype)
            last_ckpt = time.time()
    save()
    export(head, cfg, tcfg, args.draft_vocab, aux_layers, d2t, t2d, args.out, args.dtype)
    print("final step %d, %.1f min; training accuracy per unroll step (EMA): %s" %
          (step, (time.time() - t_start) / 60, " ".join("%.3f" % v for v in acc_ema)), flush=True)


if __name__ == "__main__":
    main()
