#!/usr/bin/env python3
"""Golden for specd's `deepseek2` GGUF writer: what llama.cpp's own converter
(convert_hf_to_gguf.py of llama.cpp b11312, vendored by the PyPI sdist of
llama-cpp-python 0.3.36) writes for two tiny DeepSeek checkpoints.

For each case below the script writes a Hugging Face folder (config.json +
model.safetensors, f32) whose weights follow a fixed formula, converts it with
llama.cpp's converter to F16 and to Q8_0, reads the result back with gguf-py,
and records in deepseek2_gguf_golden.json (beside this script):
  - config_json: the config.json text,
  - per file type: every "deepseek2.*" key plus general.architecture and
    general.file_type (GGUF type name and value), and every tensor (name, ne
    in ggml order, ggml type name, FNV-1a 64 of its bytes as 16 hex digits).
src/modelgen/gguf_deepseek2_writer_test.cc rebuilds the same weights, writes
them with specd, and compares.

Weights: tensor `name` (HF name, PyTorch shape), element i in row-major order:
    h = (fnv1a32(name) + i * 0x9E3779B1) mod 2^32
    h ^= h >> 15;  h = (h * 0x2C1B3C6D) mod 2^32;  h ^= h >> 12
    value = ((h >> 22) - 512) / 4096          (exact in f16 and f32)

The converter's vocabulary step is replaced by tokenizer.ggml.model =
"no_vocab" (the cases have no tokenizer; the golden ignores tokenizer keys).

Run with the golden environment (torch, transformers, safetensors, numpy;
scripts/setup-golden-venv.sh):
    .venv-golden/bin/python tests/python/deepseek2_gguf_golden.py [--llama-cpp DIR]
DIR is an unpacked llama.cpp source tree; without it the pinned sdist is
fetched with `pip download` into a temporary folder.
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

LLAMA_CPP_PY_VERSION = "0.3.36"  # vendors llama.cpp b11312 (0c1e57098)

CASES = {
    # DeepSeek-V3 / Kimi-K2 shape: q LoRA, sigmoid routing with the correction
    # bias, expert groups, YaRN with mscale_all_dim, a leading dense layer.
    "v3": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": 320,
        "hidden_size": 64,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "n_shared_experts": 1,
        "n_routed_experts": 4,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 32,
        "q_lora_rank": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "qk_nope_head_dim": 32,
        "topk_method": "noaux_tc",
        "n_group": 2,
        "topk_group": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "norm_topk_prob": True,
        "scoring_func": "sigmoid",
        "hidden_act": "silu",
        "max_position_embeddings": 163840,
        "rms_norm_eps": 1e-06,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
    },
    # DeepSeek-V2-Lite / Moonlight shape: plain q_proj, softmax greedy routing,
    # two shared experts, tied embeddings, YaRN mscale 0.707, and a
    # qk_nope_head_dim (16) that Q8_0 cannot hold (attn_k_b falls back to F16).
    "v2lite": {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 64,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "n_shared_experts": 2,
        "n_routed_experts": 4,
        "routed_scaling_factor": 1.0,
        "kv_lora_rank": 32,
        "q_lora_rank": None,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "qk_nope_head_dim": 16,
        "topk_method": "greedy",
        "n_group": 1,
        "topk_group": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "norm_topk_prob": False,
        "scoring_func": "softmax",
        "hidden_act": "silu",
        "max_position_embeddings": 163840,
        "rms_norm_eps": 1e-06,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 0.707,
            "mscale_all_dim": 0.707,
        },
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 1,
    },
}


def fnv1a32(s: bytes) -> int:
    h = 0x811C9DC5
    for b in s:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def weight(name: str, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64)
    h = (np.uint64(fnv1a32(name.encode())) + i * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(0x2C1B3C6D)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(12)
    k = (h >> np.uint64(22)).astype(np.int64)
    return ((k - 512).astype(np.float32) / np.float32(4096)).reshape(shape)


def hf_tensors(c: dict) -> list:
    """(name, shape) of every tensor of a DeepSeek-V2/V3 checkpoint."""
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    kv, q = c["kv_lora_rank"], c["q_lora_rank"]
    ff, eff = c["intermediate_size"], c["moe_intermediate_size"]
    out = [("model.embed_tokens.weight", (c["vocab_size"], hidden))]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out.append((p + "input_layernorm.weight", (hidden,)))
        if q:
            out += [(p + "self_attn.q_a_proj.weight", (q, hidden)),
                    (p + "self_attn.q_a_layernorm.weight", (q,)),
                    (p + "self_attn.q_b_proj.weight", (heads * (nope + rope), q))]
        else:
            out.append((p + "self_attn.q_proj.weight", (heads * (nope + rope), hidden)))
        out += [(p + "self_attn.kv_a_proj_with_mqa.weight", (kv + rope, hidden)),
                (p + "self_attn.kv_a_layernorm.weight", (kv,)),
                (p + "self_attn.kv_b_proj.weight", (heads * (nope + v), kv)),
                (p + "self_attn.o_proj.weight", (hidden, heads * v)),
                (p + "post_attention_layernorm.weight", (hidden,))]

        def mlp(prefix, n):
            return [(prefix + "gate_proj.weight", (n, hidden)),
                    (prefix + "up_proj.weight", (n, hidden)),
                    (prefix + "down_proj.weight", (hidden, n))]
        if layer < c["first_k_dense_replace"]:
            out += mlp(p + "mlp.", ff)
            continue
        out.append((p + "mlp.gate.weight", (c["n_routed_experts"], hidden)))
        if c["topk_method"] == "noaux_tc":
            out.append((p + "mlp.gate.e_score_correction_bias", (c["n_routed_experts"],)))
        for e in range(c["n_routed_experts"]):
            out += mlp(p + f"mlp.experts.{e}.", eff)
        out += mlp(p + "mlp.shared_experts.", eff * c["n_shared_experts"])
    out.append(("model.norm.weight", (hidden,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (c["vocab_size"], hidden)))
    return out


def llama_cpp_tree(arg: str | None, tmp: Path) -> Path:
    if arg:
        return Path(arg)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--no-binary", ":all:", f"llama-cpp-python=={LLAMA_CPP_PY_VERSION}",
                    "-d", str(tmp)], check=True)
    with tarfile.open(tmp / f"llama_cpp_python-{LLAMA_CPP_PY_VERSION}.tar.gz") as t:
        t.extractall(tmp, filter="data")
    return tmp / f"llama_cpp_python-{LLAMA_CPP_PY_VERSION}" / "vendor" / "llama.cpp"


def describe(path: Path, gguf) -> dict:
    r = gguf.GGUFReader(str(path))
    kv = {}
    for key, field in r.fields.items():
        if not (key.startswith("deepseek2.") or key in ("general.architecture", "general.file_type")):
            continue
        t = field.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            raise SystemExit(f"{path}: unexpected array key {key}")
        value = field.contents()
        if isinstance(value, float):
            value = float(np.float32(value))
        kv[key] = {"type": t.name, "value": value}
    tensors = []
    for t in r.tensors:
        tensors.append({"name": t.name, "ne": [int(x) for x in t.shape],
                        "type": t.tensor_type.name, "fnv1a64": fnv1a64(t.data.tobytes())})
    return {"kv": kv, "tensors": tensors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", help="unpacked llama.cpp source tree (default: fetch the sdist)")
    ap.add_argument("--out", default=str(Path(__file__).with_name("deepseek2_gguf_golden.json")))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        tree = llama_cpp_tree(args.llama_cpp, tmp)
        sys.path[:0] = [str(tree / "gguf-py"), str(tree)]
        import gguf  # noqa: E402
        import torch  # noqa: E402
        from safetensors.numpy import save_file  # noqa: E402
        from conversion import get_model_class  # noqa: E402
        from conversion.deepseek import DeepseekV2Model  # noqa: E402

        DeepseekV2Model.set_vocab = lambda self: self.gguf_writer.add_tokenizer_model("no_vocab")
        golden = {"generator": f"llama.cpp convert_hf_to_gguf.py from llama-cpp-python "
                               f"{LLAMA_CPP_PY_VERSION} (b11312)", "cases": {}}
        for case, config in CASES.items():
            hf = tmp / case
            hf.mkdir()
            config_text = json.dumps(config, indent=2) + "\n"
            (hf / "config.json").write_text(config_text)
            save_file({n: weight(n, s) for n, s in hf_tensors(config)}, str(hf / "model.safetensors"),
                      metadata={"format": "pt"})
            files = {}
            for ftype_name, ftype in (("f16", gguf.LlamaFileType.MOSTLY_F16),
                                      ("q8_0", gguf.LlamaFileType.MOSTLY_Q8_0)):
                out = tmp / f"{case}-{ftype_name}.gguf"
                cls = get_model_class(config["architectures"][0])
                with torch.inference_mode():
                    model = cls(hf, ftype, out, eager=True)
                    model.write()
                files[ftype_name] = describe(out, gguf)
            golden["cases"][case] = {"config_json": config_text, "files": files}
    Path(args.out).write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
