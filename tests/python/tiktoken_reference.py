"""Reference for the tiktoken tests: OpenAI's `tiktoken` (its Rust core with
fancy-regex), independent of specd.

Usage:
  python tiktoken_reference.py encode RANKS PATTERN_FILE SPECIALS_JSON [--allow-special]
      < strings.json > out.json
    RANKS: a tiktoken rank file (`base64 rank` lines); PATTERN_FILE: the
    pre-tokenizer pattern as raw text (tiktoken's syntax, e.g. Kimi's with
    `&&`); SPECIALS_JSON: {"<|token|>": id, ...}.
    stdin: a JSON array of strings. stdout: a JSON array with, per string,
    {"ids": [...], "decoded": "..."}: encode(s, allowed_special="all") with
    --allow-special, else encode_ordinary(s) (special-token text encoded as
    plain text); decoded = decode(ids).

  python tiktoken_reference.py from-hf TOKENIZER_JSON OUT_RANKS OUT_SPECIALS_JSON
    Derives a rank file from a byte-level BPE tokenizer.json (Llama 3's):
    each vocabulary piece is mapped back from GPT-2's byte-to-unicode
    alphabet to raw bytes, rank = token id; the added tokens become
    OUT_SPECIALS_JSON ({"content": id}).

  python tiktoken_reference.py regex-split PATTERN_FILE < strings.json > out.json
    Splits each string with Python's third-party `regex` module in V1 mode
    (which has class set operations like `[\\p{L}&&[^\\p{Han}]]`): a JSON
    array of arrays of pieces.
"""
import base64
import json
import sys


def read_strings():
    # Lenient decoding: the corpus may hold lone surrogates that JSON
    # escapes carry but UTF-8 cannot.
    return json.loads(sys.stdin.buffer.read().decode("utf-8", errors="replace"))


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def bytes_to_unicode():
    # GPT-2's reversible map (openai/gpt-2 encoder.py).
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def encode(args):
    import tiktoken

    ranks_path, pattern_path, specials_path = args[:3]
    allow_special = "--allow-special" in args
    with open(pattern_path, encoding="utf-8") as f:
        pattern = f.read()
    with open(specials_path, encoding="utf-8") as f:
        specials = json.load(f)
    enc = tiktoken.Encoding(name="specd-test", pat_str=pattern,
                            mergeable_ranks=load_ranks(ranks_path), special_tokens=specials)
    out = []
    for s in read_strings():
        ids = enc.encode(s, allowed_special="all") if allow_special else enc.encode_ordinary(s)
        out.append({"ids": ids, "decoded": enc.decode(ids)})
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


def from_hf(args):
    tokenizer_json, out_ranks, out_specials = args[:3]
    with open(tokenizer_json, encoding="utf-8") as f:
        root = json.load(f)
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    added = {t["content"]: t["id"] for t in root.get("added_tokens", [])}
    lines = []
    for piece, rank in sorted(root["model"]["vocab"].items(), key=lambda kv: kv[1]):
        if piece in added:
            continue
        raw = bytes(byte_of[c] for c in piece)
        lines.append(base64.b64encode(raw).decode("ascii") + " " + str(rank) + "\n")
    with open(out_ranks, "w", encoding="ascii") as f:
        f.writelines(lines)
    with open(out_specials, "w", encoding="utf-8") as f:
        json.dump(added, f, ensure_ascii=False)
    return 0


def regex_split(args):
    import regex

    with open(args[0], encoding="utf-8") as f:
        pattern = regex.compile(f.read(), flags=regex.V1)
    out = [pattern.findall(s) for s in read_strings()]
    sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


def main():
    modes = {"encode": (encode, 3), "from-hf": (from_hf, 3), "regex-split": (regex_split, 1)}
    args = sys.argv[1:]
    if not args or args[0] not in modes or len([a for a in args[1:] if not a.startswith("--")]) != modes[args[0]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    return modes[args[0]][0](args[1:])


if __name__ == "__main__":
    sys.exit(main())
