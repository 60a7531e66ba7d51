"""PyTorch reference of the demo target (Hugging Face LlamaForCausalLM math) and its EAGLE-3 draft head, plus a
minimal safetensors reader/writer (Debian has no python3-safetensors).

Conventions match HF transformers' modeling_llama.py: RMSNorm computed in float32 with eps inside the rsqrt and the
weight applied after; RoPE in rotate_half form (the two halves of each head are the (re, im) pairs); GQA by repeating
each KV head n_heads / n_kv_heads times; SwiGLU MLP down(silu(gate(x)) * up(x)); no biases; tied embeddings.
"""
import json
import math
import struct
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    vocab_size: int = 2048
    hidden_size: int = 192
    intermediate_size: int = 512
    num_hidden_layers: int = 7
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    bos_token_id: int = 2046
    eos_token_id: int = 2047
    extra: dict = field(default_factory=dict)

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def hf_dict(self):
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "mlp_bias": False,
            "tie_word_embeddings": True,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "pad_token_id": None,
            "initializer_range": 0.02,
            "pretraining_tp": 1,
            "use_cache": True,
            "torch_dtype": "float32",
            "transformers_version": "4.46.0",
        }

    @staticmethod
    def from_hf_dict(d):
        return LlamaConfig(**{k: d[k] for k in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "bos_token_id",
            "eos_token_id")})


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(positions, head_dim, theta):
    """positions: int64 [T] -> cos, sin [T, head_dim] (the half-size frequency table concatenated twice)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    """x: [B, heads, T, head_dim]; cos/sin: [T, head_dim]."""
    return x * cos + rotate_half(x) * sin


def attention(q, k, v, mask):
    """q: [B, nh, Tq, hd], k/v: [B, nkv, Tk, hd]; mask: additive [Tq, Tk] or [B, 1, Tq, Tk] (0 / -inf)."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
    p = F.softmax(scores.float(), dim=-1).to(q.dtype)
    return p @ v


class Attention(nn.Module):
    def __init__(self, cfg, in_dim=None):
        super().__init__()
        in_dim = in_dim or cfg.hidden_size
        hd = cfg.head_dim
        self.nh, self.nkv, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, hd
        self.q_proj = nn.Linear(in_dim, self.nh * hd, bias=False)
        self.k_proj = nn.Linear(in_dim, self.nkv * hd, bias=False)
        self.v_proj = nn.Linear(in_dim, self.nkv * hd, bias=False)
        self.o_proj = nn.Linear(self.nh * hd, cfg.hidden_size, bias=False)

    def qkv(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def out(self, o):
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))

    def forward(self, x, cos, sin, mask):
        q, k, v = self.qkv(x, cos, sin)
        return self.out(attention(q, k, v, mask))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


def causal_mask(T, device=None):
    return torch.full((T, T), float("-inf"), device=device).triu(1)


class Llama(nn.Module):
    """model.* and lm_head (tied to model.embed_tokens)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.init_weights()

    def init_weights(self):
        std = 0.02
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, std)
                # GPT-2 style scaling of the residual-branch output projections.
                if n.endswith("o_proj.weight") or n.endswith("down_proj.weight"):
                    p.data.mul_(1.0 / math.sqrt(2 * self.cfg.num_hidden_layers))

    def forward(self, ids, capture=()):
        """ids: int64 [B, T] at positions 0..T-1. Returns (logits [B, T, V], {i: residual stream entering layer i}
        for i in capture; i == num_hidden_layers gives the last layer's output before the final norm)."""
        T = ids.shape[1]
        cos, sin = rope_cos_sin(torch.arange(T), self.cfg.head_dim, self.cfg.rope_theta)
        mask = causal_mask(T)
        x = self.embed_tokens(ids)
        aux = {}
        for i, layer in enumerate(self.layers):
            if i in capture:
                aux[i] = x
            x = layer(x, cos, sin, mask)
        if self.cfg.num_hidden_layers in capture:
            aux[self.cfg.num_hidden_layers] = x
        logits = F.linear(self.norm(x), self.embed_tokens.weight)
        return logits, aux

    @torch.no_grad()
    def forward_cached(self, ids, pos0, cache, capture=()):
        """Incremental forward with a KV cache (decoding). ids: [B, T] at positions pos0..pos0+T-1; cache: a list
        (one entry per layer) of (k, v) [B, n_kv, pos0, head_dim] or None when pos0 == 0; extended in place.
        Returns (logits [B, T, V], aux as in forward)."""
        T = ids.shape[1]
        cos, sin = rope_cos_sin(torch.arange(pos0, pos0 + T), self.cfg.head_dim, self.cfg.rope_theta)
        mask = torch.cat([torch.zeros(T, pos0), causal_mask(T)], dim=1)
        x = self.embed_tokens(ids)
        aux = {}
        for i, layer in enumerate(self.layers):
            if i in capture:
                aux[i] = x
            h = layer.input_layernorm(x)
            q, k, v = layer.self_attn.qkv(h, cos, sin)
            if cache[i] is not None:
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = (k, v)
            x = x + layer.self_attn.out(attention(q, k, v, mask))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        if self.cfg.num_hidden_layers in capture:
            aux[self.cfg.num_hidden_layers] = x
        return F.linear(self.norm(x), self.embed_tokens.weight), aux

    def hf_state_dict(self):
        """Tensors under Hugging Face LlamaForCausalLM names; lm_head.weight written as an explicit copy."""
        out = {"model.embed_tokens.weight": self.embed_tokens.weight}
        for i, l in enumerate(self.layers):
            p = "model.layers.%d." % i
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                out[p + "self_attn.%s.weight" % n] = getattr(l.self_attn, n).weight
            for n in ("gate_proj", "up_proj", "down_proj"):
                out[p + "mlp.%s.weight" % n] = getattr(l.mlp, n).weight
            out[p + "input_layernorm.weight"] = l.input_layernorm.weight
            out[p + "post_attention_layernorm.weight"] = l.post_attention_layernorm.weight
        out["model.norm.weight"] = self.norm.weight
        out["lm_head.weight"] = self.embed_tokens.weight
        return {k: v.detach().clone() for k, v in out.items()}

    def load_hf_state_dict(self, sd):
        own = self.hf_state_dict()
        missing = [k for k in own if k not in sd and k != "lm_head.weight"]
        if missing:
            raise ValueError("checkpoint lacks tensors %s" % missing[:5])
        with torch.no_grad():
            self.embed_tokens.weight.copy_(sd["model.embed_tokens.weight"].float())
            for i, l in enumerate(self.layers):
                p = "model.layers.%d." % i
                for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                    getattr(l.self_attn, n).weight.copy_(sd[p + "self_attn.%s.weight" % n].float())
                for n in ("gate_proj", "up_proj", "down_proj"):
                    getattr(l.mlp, n).weight.copy_(sd[p + "mlp.%s.weight" % n].float())
                l.input_layernorm.weight.copy_(sd[p + "input_layernorm.weight"].float())
                l.post_attention_layernorm.weight.copy_(sd[p + "post_attention_layernorm.weight"].float())
            self.norm.weight.copy_(sd["model.norm.weight"].float())


# ---------------------------------------------------------------------------------------------------------------
# EAGLE-3 draft head (SGLang llama_eagle3.py semantics; see tools/train/README.md "draft head forward").

class Eagle3Head(nn.Module):
    def __init__(self, cfg, target_hidden_size, draft_vocab_size, n_aux=3):
        super().__init__()
        H = cfg.hidden_size
        self.cfg = cfg
        self.fc = nn.Linear(n_aux * target_hidden_size, H, bias=False)
        self.input_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.hidden_norm = RMSNorm(H, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, in_dim=2 * H)
        self.mlp = MLP(cfg)
        self.norm = RMSNorm(H, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(H, draft_vocab_size, bias=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def midlayer_qkv(self, embeds, hidden, cos, sin):
        """embeds, hidden: [B, T, H]. Returns (residual, q, k, v) for the midlayer attention."""
        h = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1)
        q, k, v = self.self_attn.qkv(h, cos, sin)
        return hidden, q, k, v

    def midlayer_finish(self, residual, attn_out):
        """attn_out: [B, nh, T, hd] -> the midlayer's output hidden state [B, T, H] (before `norm`)."""
        x = residual + self.self_attn.out(attn_out)
        return x + self.mlp(self.post_attention_layernorm(x))

    def logits(self, hidden):
        return self.lm_head(self.norm(hidden))

    def hf_state_dict(self, d2t, t2d):
        out = {"fc.weight": self.fc.weight,
               "midlayer.input_layernorm.weight": self.input_layernorm.weight,
               "midlayer.hidden_norm.weight": self.hidden_norm.weight,
               "midlayer.post_attention_layernorm.weight": self.post_attention_layernorm.weight,
               "norm.weight": self.norm.weight,
               "lm_head.weight": self.lm_head.weight}
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out["midlayer.self_attn.%s.weight" % n] = getattr(self.self_attn, n).weight
        for n in ("gate_proj", "up_proj", "down_proj"):
            out["midlayer.mlp.%s.weight" % n] = getattr(self.mlp, n).weight
        out = {k: v.detach().clone() for k, v in out.items()}
        out["d2t"] = d2t.to(torch.int64)
        out["t2d"] = t2d.to(torch.bool)
        return out

    def load_hf_state_dict(self, sd):
        own = self.hf_state_dict(torch.zeros(1), torch.zeros(1))
        with torch.no_grad():
            for name, p in self.named_parameters():
                key = name
                if not (name.startswith("fc.") or name.startswith("norm.") or name.startswith("lm_head.")):
                    key = "midlayer." + name
                if key not in own:
                    raise ValueError("no export name for parameter %s" % name)
                p.copy_(sd[key].float())


# ---------------------------------------------------------------------------------------------------------------
# safetensors

_DT = {torch.float32: ("F32", np.float32), torch.int64: ("I64", np.int64), torch.bool: ("BOOL", np.bool_)}
_DT_BACK = {"F32": np.float32, "I64": np.int64, "BOOL": np.bool_, "BF16": np.uint16, "F16": np.float16}


def bf16_bits(t):
    """float32 tensor -> uint16 numpy array of bfloat16 bits, rounded to nearest even."""
    u = t.detach().float().contiguous().numpy().view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def save_safetensors(path, tensors, dtype="F32", metadata=None):
    """tensors: {name: torch tensor}. Floating tensors are written as `dtype` (F32 or BF16); int64/bool as is.
    Header: 8-byte little-endian length + JSON (space padded to 8-byte alignment), then the raw little-endian data
    in name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype.is_floating_point:
            if dtype == "BF16":
                arr, st = bf16_bits(t), "BF16"
            else:
                arr, st = t.detach().float().contiguous().numpy(), "F32"
        else:
            st, npdt = _DT[t.dtype]
            arr = t.detach().contiguous().numpy().astype(npdt)
        b = arr.tobytes()
        header[name] = {"dtype": st, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[base + a:base + b], dtype=_DT_BACK[info["dtype"]]).reshape(info["shape"])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(arr.copy())
    return out
