"""Reference encoder for the tokenizer tests: Hugging Face's `tokenizers`
(the Rust library transformers' fast tokenizers run), independent of specd.

Usage: python encode.py DIR [--add-special] < strings.json > ids.json
  DIR holds tokenizer.json.
  stdin: a JSON array of strings; stdout: a JSON array with, per string,
  {"ids": [...], "decoded": "..."} (decoded = decode(ids), special tokens kept).
"""
import json
import os
import sys

from tokenizers import Tokenizer


def main() -> int:
    args = sys.argv[1:]
    dirs = [a for a in args if not a.startswith("--")]
    if len(dirs) != 1:
        print("usage: python encode.py DIR [--add-special] < strings.json", file=sys.stderr)
        return 2
    add_special = "--add-special" in args
    tok = Tokenizer.from_file(os.path.join(dirs[0], "tokenizer.json"))
    # Text is read as bytes and decoded leniently: the corpus may hold lone
    # surrogates that JSON escapes carry but UTF-8 cannot.
    strings = json.loads(sys.stdin.buffer.read().decode("utf-8", errors="replace"))
    out = []
    for s in strings:
        ids = tok.encode(s, add_special_tokens=add_special).ids
        decoded = tok.decode(ids, skip_special_tokens=False) if ids else ""
        out.append({"ids": ids, "decoded": decoded})
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
