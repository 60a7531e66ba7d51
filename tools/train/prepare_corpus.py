#!/usr/bin/python3
"""Extract Jane Austen's six novels from Debian's r-cran-janeaustenr package as plain text.

The package stores each novel as an R character vector (one element per printed line) in an R lazy-load database
(data/Rdata.rdb + Rdata.rdx). R is not needed: this file reads the .rdx index (gzip + R XDR serialization), then
each object's block in the .rdb (4-byte big-endian raw length + zlib stream) and decodes the R serialization of a
character vector (STRSXP of CHARSXP) with a small reader that supports exactly the node types these files use.

Output: <out>/<name>.txt for every novel (lines joined by '\n'; paragraphs are separated by blank lines as in the
Project Gutenberg source), and <out>/train.txt / <out>/heldout.txt: the held-out split is the last 5% of the
paragraphs of every novel, so both splits cover all six books.

Usage: prepare_corpus.py --pkgdir /tmp/demo_corpus/x/usr/lib/R/site-library/janeaustenr --out /tmp/demo_corpus
"""
import argparse
import gzip
import os
import re
import struct
import zlib

NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"]


class RReader:
    """Decodes R's XDR serialization format (versions 2 and 3) for the node types found in data packages."""

    def __init__(self, data):
        self.d = data
        self.p = 0
        self.refs = []

    def int(self):
        (v,) = struct.unpack_from(">i", self.d, self.p)
        self.p += 4
        return v

    def header(self):
        if self.d[:2] != b"X\n":
            raise ValueError("not an XDR R serialization (magic %r)" % self.d[:2])
        self.p = 2
        version = self.int()
        self.int()  # writer R version
        self.int()  # minimal reader version
        if version == 3:
            n = self.int()
            self.p += n  # native encoding name
        elif version != 2:
            raise ValueError("unsupported R serialization version %d" % version)

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if t == 254:  # NILVALUE_SXP
            return None
        if t in (242, 251, 252, 253):  # EMPTYENV, MISSINGARG, BASEENV, GLOBALENV / unbound markers
            return None
        if t == 255:  # REFSXP: index packed in the flags or following
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            return self.refs[idx - 1]
        if t == 1:  # SYMSXP
            name = self.item()
            self.refs.append(name)
            return name
        if t in (2, 6):  # LISTSXP / LANGSXP (pairlist)
            out = []
            while True:
                attr = self.item() if has_attr else None
                tag = self.item() if has_tag else None
                car = self.item()
                out.append((tag, car))
                del attr
                nxt = self.int()
                t2 = nxt & 0xFF
                if t2 == 254:
                    return out
                if t2 not in (2, 6):
                    raise ValueError("unexpected pairlist tail type %d" % t2)
                has_attr = bool(nxt & (1 << 9))
                has_tag = bool(nxt & (1 << 10))
        if t == 9:  # CHARSXP
            n = self.int()
            if n == -1:
                return None  # NA_character_
            s = self.d[self.p:self.p + n]
            self.p += n
            # janeaustenr's strings are ASCII/UTF-8 (the LATIN1 bit is never set in this package).
            return s.decode("utf-8", errors="replace")
        if t == 16:  # STRSXP
            n = self.int()
            v = [self.item() for _ in range(n)]
        elif t == 19:  # VECSXP
            n = self.int()
            v = [self.item() for _ in range(n)]
        elif t in (10, 13):  # LGLSXP, INTSXP
            n = self.int()
            v = list(struct.unpack_from(">%di" % n, self.d, self.p))
            self.p += 4 * n
        elif t == 14:  # REALSXP
            n = self.int()
            v = list(struct.unpack_from(">%dd" % n, self.d, self.p))
            self.p += 8 * n
        else:
            raise ValueError("unsupported R node type %d at offset %d" % (t, self.p))
        if has_attr:
            self.item()
        return v


def unserialize(data):
    r = RReader(data)
    r.header()
    return r.item()


def read_lazyload_db(base):
    """Returns {name: object} for every variable of an R lazy-load database base.rdb/base.rdx."""
    with gzip.open(base + ".rdx", "rb") as f:
        index = unserialize(f.read())
    # index is list(variables=, references=, compressed=); its names are in the attribute we skipped, but
    # `variables` is always the first element: a named list of c(offset, length) pairs.
    variables = index[0]
    with open(base + ".rdb", "rb") as f:
        rdb = f.read()
    # Recover the variable names: re-read the index keeping the names attribute of `variables`.
    names = _names_of_first_element(base + ".rdx")
    out = {}
    for name, (off, length) in zip(names, variables):
        off, length = int(off), int(length)
        block = rdb[off:off + length]
        (raw_len,) = struct.unpack_from(">I", block, 0)
        raw = zlib.decompress(block[4:])
        if len(raw) != raw_len:
            raise ValueError("%s: block length %d, expected %d" % (name, len(raw), raw_len))
        out[name] = unserialize(raw)
    return out


def _names_of_first_element(rdx_path):
    """Reads the names attribute of index$variables (a pairlist attribute: tag 'names' -> STRSXP)."""
    with gzip.open(rdx_path, "rb") as f:
        data = f.read()

    class NamesReader(RReader):
        def __init__(self, d):
            super().__init__(d)
            self.names_seen = []

        def item(self):
            start = self.p
            flags = struct.unpack_from(">i", self.d, start)[0]
            v = super().item()
            if (flags & 0xFF) in (2,) and isinstance(v, list):
                for tag, car in v:
                    if tag == "names":
                        self.names_seen.append(car)
            return v

    r = NamesReader(data)
    r.header()
    r.item()
    # Attributes are read after an object's payload, so the innermost (variables) names come first.
    return r.names_seen[0]


def paragraphs(lines):
    paras, cur = [], []
    for ln in lines:
        ln = (ln or "").strip()
        if ln:
            cur.append(ln)
        elif cur:
            paras.append(normalize(" ".join(cur)))
            cur = []
    if cur:
        paras.append(normalize(" ".join(cur)))
    return paras


def normalize(para):
    """Gutenberg typesetting to plain prose: _italics_ markers dropped, runs of spaces (two after a full stop)
    collapsed to one."""
    return re.sub(r" +", " ", para.replace("_", "")).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pkgdir", required=True, help="janeaustenr installation dir (contains data/Rdata.rdb)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--heldout-frac", type=float, default=0.05)
    args = ap.parse_args()
    db = read_lazyload_db(os.path.join(args.pkgdir, "data", "Rdata"))
    train, held = [], []
    for name in NOVELS:
        if name not in db:
            raise SystemExit("novel %s missing from the package (found %s)" % (name, sorted(db)))
        lines = db[name]
        with open(os.path.join(args.out, name + ".txt"), "w") as f:
            f.write("\n".join(l or "" for l in lines) + "\n")
        paras = paragraphs(lines)
        cut = int(len(paras) * (1 - args.heldout_frac))
        train += paras[:cut]
        held += paras[cut:]
        print("%-18s %6d lines %5d paragraphs %8d chars" % (name, len(lines), len(paras), sum(map(len, paras))))
    # One paragraph per line; the training code joins paragraphs with "\n".
    with open(os.path.join(args.out, "train.txt"), "w") as f:
        f.write("\n".join(train) + "\n")
    with open(os.path.join(args.out, "heldout.txt"), "w") as f:
        f.write("\n".join(held) + "\n")
    print("train %d paragraphs %d chars; heldout %d paragraphs %d chars" %
          (len(train), sum(map(len, train)), len(held), sum(map(len, held))))


if __name__ == "__main__":
    main()
