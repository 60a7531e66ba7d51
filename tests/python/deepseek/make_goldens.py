#!/usr/bin/env python3
"""Greedy goldens for specd's DeepSeek-family fixtures, from Hugging Face transformers.

For each tiny preset of `specd make-model` (src/modelgen/fixture.h) this script

  1. writes the fixture with the built binary:
       specd make-model --preset P --dtype f32 --seed S --out DIR
  2. loads DIR with transformers' AutoModelForCausalLM (float32, eager
     attention) and checks that every tensor of the file was loaded -- no
     missing, unexpected or mismatched keys -- and that every parameter equals
     the file's values (the routed experts, which transformers fuses into
     3-D gate_up_proj / down_proj, compared expert by expert);
  3. decodes PROMPTS greedily (do_sample=False, MAX_NEW_TOKENS new tokens,
     end-of-sequence ignored as specd's Generate does without stop ids), and
     checks each continuation against a cache-free forward of the whole
     sequence;
  4. writes goldens/P.json: preset, seed, dtype, sha256 of model.safetensors and
     config.json, the prompts, the greedy ids, the first decode step's top-5
     logits, the smallest top-1/top-2 logit gap seen (how close the run came
     to a tie), and how many of the ids change when the routed experts, the
     attention output or the routing bias are zeroed (each must change some:
     the goldens exercise them).

Kimi-K2.5 (KimiK25ForConditionalGeneration) has no transformers class: its
fixture is checked to hold kimi-k2-tiny's tensors byte for byte under
"language_model." (plus vision tensors the text model never reads), so its
expected ids are kimi-k2-tiny's.

Run from the repository root, with the environment of
scripts/setup-golden-venv.sh:
  .venv-golden/bin/python tests/python/deepseek/make_goldens.py --specd build/release/specd
tests/deepseek_golden_test.cc (DeepseekGoldenTest) regenerates the fixtures
with the same seed, compares the sha256s and runs specd's engine on them.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import safetensors.torch
import torch
import transformers

SEED = 20250101
DTYPE = "f32"
MAX_NEW_TOKENS = 24
PRESETS = ["deepseek-v3-tiny", "kimi-k2-tiny", "kimi-k25-tiny", "moonlight-tiny",
           "deepseek-v2-lite-tiny"]
# Token ids (vocab 256; 0 is BOS). The 40-token prompt makes prefill cross
# several positions (and pages) before decoding starts.
PROMPTS = [
    [0, 17, 93, 201, 44],
    [5],
    [0] + [(7 + 37 * i) % 256 for i in range(39)],
    [0, 250, 3, 3, 3, 128, 64, 32, 16, 8, 4, 2],
]
KIMI_K25 = "kimi-k25-tiny"
KIMI_K25_TEXT = "kimi-k2-tiny"
HERE = os.path.dirname(os.path.abspath(__file__))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_fixture(specd, preset, out):
    subprocess.run([specd, "make-model", "--preset", preset, "--dtype", DTYPE, "--seed",
                    str(SEED), "--out", out], check=True)
    return {name: sha256(os.path.join(out, name)) for name in ("model.safetensors", "config.json")}


def check_loaded(model, info, file_tensors):
    """Every file tensor is in the model with the file's values."""
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(kind):
            sys.exit(f"transformers load: {kind}: {info[kind]}")
    state = model.state_dict()
    fused = {}  # (layer prefix, expert) -> {proj: tensor}
    n_checked = 0
    for name, want in file_tensors.items():
        if ".mlp.experts." in name:
            prefix, rest = name.split(".mlp.experts.")
            expert, proj, _ = rest.split(".")
            fused.setdefault((prefix, int(expert)), {})[proj] = want
            continue
        if name not in state:
            sys.exit(f"{name}: in the file but not in the model's state_dict")
        got = state[name]
        if got.shape != want.shape or not torch.equal(got.float(), want.float()):
            sys.exit(f"{name}: the model's values differ from the file's")
        n_checked += 1
    for (prefix, e), projs in sorted(fused.items()):
        gate_up = state[f"{prefix}.mlp.experts.gate_up_proj"][e]
        down = state[f"{prefix}.mlp.experts.down_proj"][e]
        if not torch.equal(gate_up, torch.cat([projs["gate_proj"], projs["up_proj"]], dim=0)):
            sys.exit(f"{prefix}.mlp.experts.{e}: gate/up weights were not loaded from the file")
        if not torch.equal(down, projs["down_proj"]):
            sys.exit(f"{prefix}.mlp.experts.{e}: down weights were not loaded from the file")
        n_checked += 3
    if n_checked != len(file_tensors):
        sys.exit(f"checked {n_checked} of {len(file_tensors)} file tensors")
    return n_checked


def greedy_case(model, prompt):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=0, eos_token_id=None,
                         pad_token_id=0, output_logits=True, return_dict_in_generate=True)
    generated = out.sequences[0, len(prompt):].tolist()
    if len(generated) != MAX_NEW_TOKENS:
        sys.exit(f"prompt {prompt}: generated {len(generated)} tokens, expected {MAX_NEW_TOKENS}")
    # The same continuation from one cache-free forward of the whole sequence.
    full = torch.tensor([prompt + generated[:-1]])
    with torch.no_grad():
        logits = model(full, use_cache=False).logits[0, len(prompt) - 1:]
    if logits.argmax(-1).tolist() != generated:
        sys.exit(f"prompt {prompt}: cached decoding and a full forward disagree")
    margin = min(float(t[0] - t[1]) for t in (s[0].topk(2).values for s in out.logits))
    first = out.logits[0][0]
    top = first.topk(5)
    return {
        "prompt_ids": prompt,
        "generated_ids": generated,
        "first_step_top5": {"ids": top.indices.tolist(),
                            "logits": [round(float(v), 7) for v in top.values]},
        "min_top1_top2_gap": round(margin, 7),
    }


def sensitivity(model, cases):
    """How many golden ids change when a part of the model is zeroed: proof that
    the goldens exercise the routed experts, the routing bias and attention."""
    parts = {"routed_experts": ".mlp.experts.", "attention_o_proj": ".self_attn.o_proj.",
             "e_score_correction_bias": ".e_score_correction_bias"}
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    out = {}
    for part, key in parts.items():
        names = [k for k in saved if key in k]
        if not names:
            continue
        with torch.no_grad():
            for k in names:
                model.state_dict()[k].zero_()
        changed = sum(a != b for c in cases
                      for a, b in zip(c["generated_ids"], greedy_case(model, c["prompt_ids"])["generated_ids"]))
        model.load_state_dict(saved)
        if changed == 0:
            sys.exit(f"zeroing {part} changes no greedy id: the goldens would not test it")
        out[part] = changed
    return out


def run_transformers(model_dir):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    # specd's Generate stops only at requested stop ids: never at EOS here.
    model.generation_config.eos_token_id = None
    file_tensors = safetensors.torch.load_file(os.path.join(model_dir, "model.safetensors"))
    n = check_loaded(model, info, file_tensors)
    cases = [greedy_case(model, p) for p in PROMPTS]
    return type(model).__name__, n, cases, sensitivity(model, cases)


def check_kimi_k25(k25_dir, k2_dir):
    """kimi-k25-tiny holds kimi-k2-tiny's tensors under language_model."""
    k2 = safetensors.torch.load_file(os.path.join(k2_dir, "model.safetensors"))
    k25 = safetensors.torch.load_file(os.path.join(k25_dir, "model.safetensors"))
    text = {n[len("language_model."):]: t for n, t in k25.items() if n.startswith("language_model.")}
    other = sorted(n for n in k25 if not n.startswith("language_model."))
    if text.keys() != k2.keys() or any(not torch.equal(text[n], k2[n]) for n in k2):
        sys.exit(f"{KIMI_K25}: language_model.* tensors differ from {KIMI_K25_TEXT}'s")
    if not other or any(not n.startswith(("vision_tower.", "mm_projector.")) for n in other):
        sys.exit(f"{KIMI_K25}: expected only vision_tower.* / mm_projector.* besides the text "
                 f"model, found {other}")
    with open(os.path.join(k25_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(k2_dir, "config.json")) as f:
        k2_cfg = json.load(f)
    if cfg["architectures"] != ["KimiK25ForConditionalGeneration"] or cfg["text_config"] != k2_cfg:
        sys.exit(f"{KIMI_K25}: config.json is not {KIMI_K25_TEXT}'s under text_config")
    return other


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--specd", default="build/release/specd", help="the built specd binary")
    ap.add_argument("--out", default=os.path.join(HERE, "goldens"), help="folder for P.json")
    ap.add_argument("presets", nargs="*", default=PRESETS)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        # kimi-k25-tiny needs kimi-k2-tiny's run.
        order = sorted(args.presets, key=lambda p: p == KIMI_K25)
        if KIMI_K25 in order and KIMI_K25_TEXT not in order:
            order.insert(0, KIMI_K25_TEXT)
        for preset in order:
            model_dir = os.path.join(tmp, preset)
            digests = make_fixture(os.path.abspath(args.specd), preset, model_dir)
            golden = {
                "preset": preset,
                "seed": SEED,
                "dtype": DTYPE,
                "sha256": digests,
                "max_new_tokens": MAX_NEW_TOKENS,
            }
            if preset == KIMI_K25:
                vision = check_kimi_k25(model_dir, os.path.join(tmp, KIMI_K25_TEXT))
                ref = results[KIMI_K25_TEXT]
                golden["reference"] = (
                    f"{KIMI_K25_TEXT}'s transformers {transformers.__version__} run: transformers "
                    f"has no KimiK25ForConditionalGeneration, and this file holds {KIMI_K25_TEXT}'s "
                    f"tensors byte for byte under 'language_model.' (config.json: its config "
                    f"under text_config) plus {len(vision)} vision tensors the text model skips: "
                    f"{', '.join(vision)}")
                golden["expected_ids_from"] = KIMI_K25_TEXT
                golden["cases"] = ref["cases"]
            else:
                cls, n, cases, sens = run_transformers(model_dir)
                golden["reference"] = (
                    f"transformers {transformers.__version__} {cls}, torch {torch.__version__}, "
                    f"float32, eager attention, greedy generate(); all {n} file tensors "
                    f"checked loaded")
                golden["cases"] = cases
                golden["ids_changed_when_zeroed"] = sens
            results[preset] = golden
            if preset in args.presets:
                path = os.path.join(args.out, preset + ".json")
                with open(path, "w") as f:
                    json.dump(golden, f, indent=1)
                    f.write("\n")
                gaps = [c["min_top1_top2_gap"] for c in golden["cases"]]
                print(f"{preset}: wrote {os.path.relpath(path)} (smallest top-1 gap {min(gaps):.2e})")


if __name__ == "__main__":
    main()
