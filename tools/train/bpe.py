"""Reference byte-level BPE (GPT-2 semantics) for the demo model: training, tokenizer.json I/O, encode/decode.

Encoding follows Hugging Face `tokenizers` for the tokenizer.json written by train_tokenizer.py:
  1. added/special tokens written literally in the text are split out first (when parse_special),
  2. ByteLevel pre-tokenizer: the GPT-2 split regex, then every UTF-8 byte mapped to a printable code point
     (GPT-2's bytes_to_unicode table, e.g. ' ' -> 'Ġ', '\n' -> 'Ċ'),
  3. BPE model: inside each piece, repeatedly merge the adjacent pair with the lowest merge rank,
  4. TemplateProcessing post-processor: prepend <|bos|> (only when add_special).
Needs Debian's python3-regex for the \\p{L} / \\p{N} classes of the GPT-2 regex.
"""
import json

import regex

GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
BOS = "<|bos|>"
EOS = "<|eos|>"

_split_re = regex.compile(GPT2_SPLIT)


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable code point map (printable Latin-1 bytes map to themselves)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pretokenize(text):
    """GPT-2 regex split, then byte-level mapping: returns the list of mapped pieces."""
    return ["".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")) for piece in _split_re.findall(text)]


def train(counts, n_merges):
    """Learns n_merges merges from {mapped piece: frequency}. Returns the merges as a list of (left, right).

    Keeps pair counts and a pair -> words index up to date incrementally, so each merge only touches the words that
    contain the chosen pair. Ties on count are broken by the lexicographically smallest pair (deterministic)."""
    words = [list(w) for w in counts]
    freq = list(counts.values())
    pairs, where = {}, {}
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + freq[i]
            where.setdefault((a, b), set()).add(i)
    merges = []
    for _ in range(n_merges):
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        merged = best[0] + best[1]
        for i in list(where.get(best, ())):
            w = words[i]
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] -= freq[i]
                if pairs[(a, b)] == 0:
                    del pairs[(a, b)]
                where[(a, b)].discard(i)
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + freq[i]
                where.setdefault((a, b), set()).add(i)
        where.pop(best, None)
    return merges


class Tokenizer:
    """Loads the tokenizer.json written by train_tokenizer.py (BPE + ByteLevel + TemplateProcessing)."""

    def __init__(self, path):
        with open(path) as f:
            tj = json.load(f)
        model = tj["model"]
        if model["type"] != "BPE":
            raise ValueError("%s: model.type %r, expected BPE" % (path, model["type"]))
        self.vocab = dict(model["vocab"])
        self.specials = {t["content"]: t["id"] for t in tj["added_tokens"]}
        self.vocab.update(self.specials)
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.bos_id = self.specials[BOS]
        self.eos_id = self.specials[EOS]
        self._cache = {}
        self._special_re = regex.compile("(" + "|".join(regex.escape(s) for s in self.specials) + ")")

    def vocab_size(self):
        return len(self.vocab)

    def _bpe(self, piece):
        hit = self._cache.get(piece)
        if hit is not None:
            return hit
        w = list(piece)
        while len(w) > 1:
            best, best_rank = None, None
            for j in range(len(w) - 1):
                r = self.ranks.get((w[j], w[j + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = j, r
            if best is None:
                break
            # Merge every occurrence of the best pair, left to right (as HF and GPT-2 do).
            a, b = w[best], w[best + 1]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            w = out
        ids = [self.vocab[t] for t in w]
        self._cache[piece] = ids
        return ids

    def encode(self, text, add_special=True, parse_special=True):
        ids = [self.bos_id] if add_special else []
        chunks = self._special_re.split(text) if parse_special else [text]
        for chunk in chunks:
            if chunk in self.specials and parse_special:
                ids.append(self.specials[chunk])
                continue
            for piece in pretokenize(chunk):
                ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids, skip_special=True):
        out = bytearray()
        for i in ids:
            t = self.id_to_tok[int(i)]
            if t in self.specials:
                if not skip_special:
                    out += t.encode("utf-8")
                continue
            out += bytes(CHAR_TO_BYTE[c] for c in t)
        return out.decode("utf-8", errors="replace")
