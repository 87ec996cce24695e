#!/usr/bin/env python3
"""A pangenome-like text from one chromosome: COPIES copies of it, each with point mutations
(a fraction RATE of its positions, default 0.1 %) and a few small insertions and deletions, all from
a seeded generator, so the same arguments always give the same bytes.

    scripts/pangenome.py SOURCE OUT --copies 64 [--rate 0.001] [--indels 50] [--seed 1]

SOURCE is a cleaned sequence (for example corpora/dna.txt from scripts/corpora.sh: chrX as ACGTN
bytes, no line breaks). Copy 0 is SOURCE unchanged; copy c > 0 gets round(RATE · len) substitutions
by another of A, C, G, T at uniformly drawn positions, then INDELS events, each deleting or inserting
1–10 random bases at a uniform position. The copies are written one after another, without
separators. Needs only the standard library; memory: about two copies of SOURCE.
"""
import argparse
import random
import sys

BASES = b"ACGT"


def mutate(src: bytes, rng: random.Random, rate: float, indels: int) -> bytearray:
    seq = bytearray(src)
    n = len(seq)
    for _ in range(round(rate * n)):
        i = rng.randrange(n)
        old = seq[i]
        seq[i] = rng.choice([b for b in BASES if b != old])
    for _ in range(indels):
        i = rng.randrange(len(seq))
        k = rng.randint(1, 10)
        if rng.random() < 0.5:
            del seq[i : i + k]
        else:
            seq[i:i] = bytes(rng.choice(BASES) for _ in range(k))
    return seq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--rate", type=float, default=0.001)
    ap.add_argument("--indels", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    with open(a.source, "rb") as f:
        src = f.read()
    if not src:
        print("pangenome.py: the source is empty", file=sys.stderr)
        return 1
    rng = random.Random(a.seed)
    total = 0
    with open(a.out, "wb") as out:
        for c in range(a.copies):
            seq = src if c == 0 else mutate(src, rng, a.rate, a.indels)
            out.write(seq)
            total += len(seq)
    print(f"pangenome.py: {a.copies} copies, {total} bytes -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
