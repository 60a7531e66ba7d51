#!/usr/bin/env python3
"""Goldens for `specd quantize --format compressed-tensors`, from compressed-tensors itself.

For each preset of `specd make-model` this script

  1. writes the fixture with the built binary:
       specd make-model --preset P --dtype bf16 --seed S --out DIR
  2. quantizes it through the library's real compress path, as llm-compressor's
     data-free W4A16 recipe (model_free_ptq) does on a bf16 checkpoint: the
     tensors to quantize are chosen by the library's matcher
     (match_quantizable_tensors, targets ["Linear"], IGNORE); each becomes an
     nn.Linear in bf16, initialize_module_for_quantization attaches the
     QuantizationScheme (INT4, symmetric, group 32, static), the min-max
     observer's per-group amin/amax go through the library's
     calculate_qparams, and compress_module(pack-quantized) packs it; the
     config is written by ModelCompressor.update_config;
  3. records the sha256 of every tensor's bytes in the library's
     model.safetensors, and the quantization_config;
  4. decompresses every packed weight with the library
     (PackedQuantizationCompressor.decompress, the scales in float32 so each
     weight is the exact product scale * q, as specd's kernels compute it),
     loads the dense model in transformers (float32, eager attention) and
     records greedy ids: MAX_NEW_TOKENS new tokens from each of PROMPTS,
     end-of-sequence ignored.

It also writes unpack_golden.json: a small weight packed by the library's
pack_to_int32 and dequantized by its decompress (src/loader/compressed_tensors_test.cc).

Run from the repository root with the environment of scripts/setup-golden-venv.sh:
  .venv-golden/bin/python tests/python/compressed_tensors/make_goldens.py --specd build/release/specd
tests/compressed_tensors_golden_test.cc regenerates each fixture with the same
seed, quantizes it with `specd quantize` and compares every tensor's sha256 and
the config, then runs specd's engine on the INT4 folder and compares greedy ids.
"""

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import compressed_tensors
import safetensors.torch
import torch
import transformers
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.compressors.base import compress_module
from compressed_tensors.compressors.pack_quantized import (PackedQuantizationCompressor,
                                                           pack_to_int32, unpack_from_int32)
from compressed_tensors.config import CompressionFormat
from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig,
                                             QuantizationScheme, QuantizationStatus)
from compressed_tensors.quantization.lifecycle.initialize import initialize_module_for_quantization
from compressed_tensors.quantization.utils import calculate_qparams
from compressed_tensors.utils.match import match_quantizable_tensors

SEED = 20250101
DTYPE = "bf16"
GROUP = 32
MAX_NEW_TOKENS = 24
# specd's default ignore list (DefaultCompressedTensorsIgnore in
# src/modelgen/compressed_tensors_writer.cc): all but the routed experts.
IGNORE = [
    r"re:.*lm_head$",
    r"re:.*embed_tokens$",
    r"re:.*self_attn\..*",
    r"re:.*shared_experts\..*",
    r"re:.*mlp\.(gate|up|down)_proj$",
    r"re:.*mlp\.gate$",
    r"re:.*(eh_proj|shared_head\..*)$",
    r"re:(vision_tower|mm_projector)\..*",
]
# preset -> whether transformers can run it (Kimi-K2.5 has no transformers
# class: its golden covers the tensor prefix and the vision tower only).
PRESETS = {"deepseek-v3-tiny": True, "kimi-k25-tiny": False}
# Token ids (vocab 256; 0 is BOS).
PROMPTS = [
    [0, 17, 93, 201, 44],
    [0, 3, 3, 3, 128, 64, 32, 16, 8, 4, 2],
    [0] + [(7 + 37 * i) % 256 for i in range(20)],
]
HERE = os.path.dirname(os.path.abspath(__file__))


def scheme():
    return QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group",
                                 group_size=GROUP, dynamic=False))


def tensor_digests(path):
    """{name: {dtype, shape, sha256}} of a safetensors file's raw tensor bytes."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in sorted(header.items()):
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = {"dtype": e["dtype"], "shape": e["shape"],
                     "sha256": hashlib.sha256(data[base + b:base + end]).hexdigest()}
    return out


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def quantize_with_library(model_dir, out_dir):
    """The library's compress path on every matched weight; returns the scheme."""
    tensors = safetensors.torch.load_file(os.path.join(model_dir, "model.safetensors"))
    sch = scheme()
    matched = list(match_quantizable_tensors(tensors, IGNORE, targets=["Linear"]))
    for module_name, name in matched:
        w = tensors.pop(name)
        if w.dtype != torch.bfloat16:
            sys.exit(f"{name}: expected a bf16 weight, found {w.dtype}")
        lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
        lin.weight.data.copy_(w)
        initialize_module_for_quantization(lin, sch)
        # llm-compressor's min-max weight observer: amin / amax per group of
        # each row, then the library's calculate_qparams (in the weight dtype).
        groups = w.unflatten(-1, (w.shape[1] // GROUP, GROUP))
        scale, zero_point = calculate_qparams(torch.amin(groups, dim=-1),
                                              torch.amax(groups, dim=-1), sch.weights)
        lin.weight_scale.data.copy_(scale)
        lin.weight_zero_point.data.copy_(zero_point)
        lin.quantization_status = QuantizationStatus.FROZEN
        compress_module(lin, CompressionFormat.pack_quantized)
        state = lin.state_dict()
        if sorted(state) != ["weight_packed", "weight_scale", "weight_shape"]:
            sys.exit(f"{name}: unexpected compressed state {sorted(state)}")
        for k, v in state.items():
            tensors[f"{module_name}.{k}"] = v.contiguous()
    os.makedirs(out_dir, exist_ok=True)
    safetensors.torch.save_file(tensors, os.path.join(out_dir, "model.safetensors"),
                                metadata={"format": "pt"})
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    qconfig = QuantizationConfig(config_groups={"group_0": sch}, ignore=IGNORE,
                                 format=CompressionFormat.pack_quantized.value,
                                 quantization_status=QuantizationStatus.COMPRESSED)
    ModelCompressor(quantization_config=qconfig).update_config(out_dir)
    return sch, len(matched)


def dequantize_with_library(quant_dir, dense_dir, sch):
    """Dense float32 folder from the library's decompress (scales in float32)."""
    tensors = safetensors.torch.load_file(os.path.join(quant_dir, "model.safetensors"))
    dense = {}
    n_rounded = 0
    for name in sorted(tensors):
        if not name.endswith(".weight_packed"):
            continue
        base = name[:-len(".weight_packed")]
        sd = {"weight_packed": tensors.pop(name),
              "weight_scale": tensors.pop(base + ".weight_scale"),
              "weight_shape": tensors.pop(base + ".weight_shape")}
        exact = PackedQuantizationCompressor.decompress(
            dict(sd, weight_scale=sd["weight_scale"].float()), sch)["weight"]
        default = PackedQuantizationCompressor.decompress(sd, sch)["weight"]
        n_rounded += int((default.float() != exact).sum())
        dense[base + ".weight"] = exact
    for name, t in tensors.items():
        dense[name] = t.float()
    os.makedirs(dense_dir, exist_ok=True)
    safetensors.torch.save_file(dense, os.path.join(dense_dir, "model.safetensors"))
    with open(os.path.join(quant_dir, "config.json")) as f:
        config = json.load(f)
    del config["quantization_config"]
    config["torch_dtype"] = "float32"
    with open(os.path.join(dense_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return n_rounded


def greedy_case(model, prompt):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=0, eos_token_id=None,
                         pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    generated = out.sequences[0, len(prompt):].tolist()
    if len(generated) != MAX_NEW_TOKENS:
        sys.exit(f"prompt {prompt}: generated {len(generated)} tokens, expected {MAX_NEW_TOKENS}")
    margin = min(float(t[0] - t[1]) for t in (s[0].topk(2).values for s in out.logits))
    return {"prompt_ids": prompt, "generated_ids": generated,
            "min_top1_top2_gap": round(margin, 7)}


def run_transformers(dense_dir):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        dense_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            sys.exit(f"transformers load: {kind}: {info[kind]}")
    model.eval()
    model.generation_config.eos_token_id = None
    return type(model).__name__, [greedy_case(model, p) for p in PROMPTS]


def unpack_golden():
    """A weight packed by pack_to_int32 and dequantized by decompress."""
    gen = torch.Generator().manual_seed(7)
    out, inn = 3, 64
    q = torch.randint(-8, 8, (out, inn), generator=gen, dtype=torch.int8)
    scale = (torch.rand(out, inn // GROUP, generator=gen) * 0.1 + 1e-3).to(torch.bfloat16)
    packed = pack_to_int32(q, 4)
    if not torch.equal(unpack_from_int32(packed, 4, torch.Size([out, inn])), q):
        sys.exit("unpack_from_int32(pack_to_int32(q)) != q")
    w = PackedQuantizationCompressor.decompress(
        {"weight_packed": packed, "weight_scale": scale.float(),
         "weight_shape": torch.tensor([out, inn])}, scheme())["weight"]
    return {
        "reference": f"compressed-tensors {compressed_tensors.__version__}: pack_to_int32 of "
                     "random int8 values in [-8, 7], then PackedQuantizationCompressor."
                     "decompress with the bf16 scales as float32",
        "shape": [out, inn],
        "packed_int32": packed.flatten().tolist(),
        "scale_bf16_bits": scale.view(torch.int16).flatten().tolist(),
        "dequantized_f32": [float(v) for v in w.flatten()],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--specd", default="build/release/specd", help="the built specd binary")
    ap.add_argument("--out", default=os.path.join(HERE, "goldens"), help="folder for P.json")
    ap.add_argument("presets", nargs="*", default=list(PRESETS))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(HERE, "unpack_golden.json"), "w") as f:
        g = unpack_golden()
        g["scale_bf16_bits"] = [v & 0xffff for v in g["scale_bf16_bits"]]
        json.dump(g, f, indent=1)
        f.write("\n")
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            model_dir = os.path.join(tmp, preset)
            subprocess.run([os.path.abspath(args.specd), "make-model", "--preset", preset,
                            "--dtype", DTYPE, "--seed", str(SEED), "--out", model_dir],
                           check=True)
            quant_dir = os.path.join(tmp, preset + "-int4")
            sch, n_quantized = quantize_with_library(model_dir, quant_dir)
            with open(os.path.join(quant_dir, "config.json")) as f:
                qconfig = json.load(f)["quantization_config"]
            golden = {
                "preset": preset,
                "seed": SEED,
                "dtype": DTYPE,
                "ignore": IGNORE,
                "source_sha256": {n: file_sha256(os.path.join(model_dir, n))
                                  for n in ("model.safetensors", "config.json")},
                "reference": (
                    f"compressed-tensors {compressed_tensors.__version__} (torch "
                    f"{torch.__version__}): match_quantizable_tensors, "
                    "initialize_module_for_quantization, calculate_qparams of per-group "
                    "amin/amax, compress_module(pack-quantized) on each bf16 weight; "
                    "ModelCompressor.update_config"),
                "n_quantized": n_quantized,
                "quantization_config": qconfig,
                "tensors": tensor_digests(os.path.join(quant_dir, "model.safetensors")),
            }
            if PRESETS.get(preset, True):
                dense_dir = os.path.join(tmp, preset + "-dense")
                n_rounded = dequantize_with_library(quant_dir, dense_dir, sch)
                cls, cases = run_transformers(dense_dir)
                golden["greedy"] = {
                    "reference": (
                        f"transformers {transformers.__version__} {cls}, float32, eager "
                        "attention, greedy generate(), EOS ignored, on the library's "
                        "decompress with float32 scales (exact scale * q; with its default "
                        f"bf16 output {n_rounded} weights would round)"),
                    "max_new_tokens": MAX_NEW_TOKENS,
                    "cases": cases,
                }
            path = os.path.join(args.out, preset + ".json")
            with open(path, "w") as f:
                json.dump(golden, f, indent=1)
                f.write("\n")
            print(f"{preset}: {n_quantized} weights quantized; wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
