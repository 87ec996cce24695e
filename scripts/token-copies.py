#!/usr/bin/env python3
"""scripts/token-copies.py — grow a u16 infini-gram shard to COPIES mutated copies of itself.

    python3 scripts/token-copies.py DIR --copies C [--rate R] [--seed S]

For a shard larger than the real text at hand (a host without network, a carried corpus): the
pangenome recipe of scripts/pangenome.py applied to tokens, as a crawl holds near-duplicate
documents. DIR/tokenized.0 (u16 little-endian, every document starting with the separator 0xFFFF,
as scripts/tokenize-u16.py writes it) becomes C copies of itself, one after another: copy 0 is the
shard unchanged; copy c > 0 gets round(R · n) substitutions (default R = 0.005) at uniformly drawn
positions that are not separators, each by a token drawn uniformly from the vocabulary (the ids
below the largest one in the shard, UNK included) other than the old one. Documents stay where
they were, so DIR/offset.0 (u64 byte offsets of the documents' starts) becomes the C shifted
copies of itself. Both files are written beside the old ones and renamed over them.

Deterministic: the same shard, C, R and S give the same bytes. Needs numpy; memory about three
times the shard's size.

The last line printed is `tokens=T documents=D vocabulary=V unk=U bytes=B` as tokenize-u16.py
prints it (U = -1: not counted here).
"""
import argparse
import os
import sys

import numpy as np

SEP = 0xFFFF


def mutated(base: np.ndarray, rng: np.random.Generator, rate: float, vocab: int) -> np.ndarray:
    """A copy of `base` with round(rate · n) non-separator tokens replaced by other ids."""
    copy = base.copy()
    targets = np.flatnonzero(base != SEP)
    k = min(round(rate * len(base)), len(targets))
    pos = rng.choice(targets, size=k, replace=False) if k else targets[:0]
    # another id than the old one: old + a shift in 1..vocab-1, modulo the vocabulary
    shift = rng.integers(1, max(vocab, 2), size=k, dtype=np.int64)
    copy[pos] = ((base[pos].astype(np.int64) + shift) % max(vocab, 2)).astype(np.uint16)
    return copy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--copies", type=int, required=True)
    ap.add_argument("--rate", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.copies < 1:
        print("token-copies: --copies must be at least 1", file=sys.stderr)
        return 2
    tok_path = os.path.join(args.dir, "tokenized.0")
    off_path = os.path.join(args.dir, "offset.0")
    base = np.fromfile(tok_path, dtype="<u2")
    offsets = np.fromfile(off_path, dtype="<u8")
    real = base[base != SEP]
    vocab = int(real.max()) + 1 if len(real) else 1
    rng = np.random.default_rng(args.seed)
    nbytes = 2 * len(base)
    with open(tok_path + ".copies", "wb") as tok, open(off_path + ".copies", "wb") as off:
        for c in range(args.copies):
            (base if c == 0 else mutated(base, rng, args.rate, vocab)).tofile(tok)
            (offsets + np.uint64(c * nbytes)).astype("<u8").tofile(off)
    os.replace(tok_path + ".copies", tok_path)
    os.replace(off_path + ".copies", off_path)
    tokens = args.copies * len(base)
    docs = args.copies * len(offsets)
    print(f"token-copies: {args.dir}: {args.copies} copies, {tokens} tokens in {docs} documents")
    print(f"tokens={tokens} documents={docs} vocabulary={vocab} unk=-1 bytes={2 * tokens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
