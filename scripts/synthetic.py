#!/usr/bin/env python3
"""Deterministic synthetic worst-case inputs for suffix array construction (stdlib only).

    python3 scripts/synthetic.py KIND SIZE_BYTES OUTPUT [--seed S]

KIND:
  an        a^n: every suffix shares a prefix with every other (longest LCPs there are, n-1);
            the classic killer of sample sorts that send equal keys to one pe and of
            comparison-based sorts without rank doubling.
  fib       the Fibonacci word over {a, b} (s1 = "a", s2 = "ab", s_k = s_(k-1) s_(k-2)),
            cut to SIZE: highly repetitive, LCPs Θ(n), the deepest DC3 recursion for a
            binary alphabet.
  repblock  one 64 KiB block of seeded random bytes repeated to SIZE: LCPs up to n - 64 Ki,
            like a corpus of many identical files.
  random    seeded uniform random bytes (all 256 values): LCPs of a few characters; the
            easy case the others are compared against.

The same (KIND, SIZE, seed) always gives the same bytes (random.Random.randbytes is stable
across CPython versions >= 3.9).
"""

import argparse
import random
import sys

BLOCK = 64 * 1024


def write_repeated(out, unit: bytes, size: int) -> None:
    left = size
    # Write in chunks of at least 8 MiB so large outputs are fast.
    chunk = unit * max(1, (8 << 20) // max(1, len(unit)))
    while left > 0:
        piece = chunk[:left]
        out.write(piece)
        left -= len(piece)


def fib_word(size: int) -> bytes:
    a, b = b"a", b"ab"
    if size <= 1:
        return a[:size]
    while len(b) < size:
        a, b = b, b + a
    return b[:size]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["an", "fib", "repblock", "random"])
    ap.add_argument("size", type=int, help="bytes")
    ap.add_argument("output")
    ap.add_argument("--seed", type=int, default=20240501)
    args = ap.parse_args()
    if args.size < 0:
        print("synthetic.py: size must be >= 0", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    with open(args.output, "wb") as out:
        if args.kind == "an":
            write_repeated(out, b"a", args.size)
        elif args.kind == "fib":
            out.write(fib_word(args.size))
        elif args.kind == "repblock":
            write_repeated(out, rng.randbytes(BLOCK), args.size)
        else:
            left = args.size
            while left > 0:
                k = min(left, 8 << 20)
                out.write(rng.randbytes(k))
                left -= k
    return 0


if __name__ == "__main__":
    sys.exit(main())
