#!/usr/bin/python3
"""Trains the demo model's byte-level BPE and writes a Hugging Face tokenizer.json + tokenizer_config.json.

Vocabulary layout (vocab_size ids in all): 0..255 the 256 byte tokens (in byte order), 256.. the merged tokens in
merge order, then the two special tokens <|bos|> and <|eos|> as the last ids. The post-processor prepends <|bos|>
(tokenizer_config.json: add_bos_token true, add_eos_token false).

Usage: train_tokenizer.py --corpus /tmp/demo_corpus/train.txt --vocab-size 2048 --out models/demo
"""
import argparse
import collections
import json
import os
import time

import bpe


def tokenizer_json(merges):
    vocab = {}
    for b in range(256):
        vocab[bpe.BYTE_TO_CHAR[b]] = b
    for a, b in merges:
        vocab[a + b] = len(vocab)
    n = len(vocab)
    specials = [bpe.BOS, bpe.EOS]
    added = [{"id": n + k, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for k, s in enumerate(specials)]
    bos_id = n
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bpe.BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bpe.BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bpe.BOS, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bpe.BOS: {"id": bpe.BOS, "ids": [bos_id], "tokens": [bpe.BOS]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [a + " " + b for a, b in merges],
        },
    }


def tokenizer_config(n_regular):
    def entry(i, s):
        return {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                "special": True}
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": {str(n_regular): entry(n_regular, bpe.BOS),
                                 str(n_regular + 1): entry(n_regular + 1, bpe.EOS)},
        "bos_token": bpe.BOS,
        "eos_token": bpe.EOS,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 256,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--vocab-size", type=int, default=2048)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.time()
    with open(args.corpus) as f:
        text = f.read()
    counts = collections.Counter()
    for line in text.splitlines(keepends=True):
        counts.update(bpe.pretokenize(line))
    n_merges = args.vocab_size - 256 - 2
    merges = bpe.train(counts, n_merges)
    if len(merges) != n_merges:
        raise SystemExit("only %d merges possible, wanted %d" % (len(merges), n_merges))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(merges), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(256 + n_merges), f, indent=2)
        f.write("\n")
    tok = bpe.Tokenizer(os.path.join(args.out, "tokenizer.json"))
    ids = tok.encode(text, add_special=False)
    if tok.decode(ids) != text:
        raise SystemExit("round trip failed")
    print("%d merges, %d pieces (%d distinct), %d chars -> %d tokens (%.2f chars/token), %.1fs" %
          (len(merges), sum(counts.values()), len(counts), len(text), len(ids), len(text) / len(ids),
           time.time() - t0))


if __name__ == "__main__":
    main()
