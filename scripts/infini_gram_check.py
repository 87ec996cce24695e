#!/usr/bin/env python3
"""psa's infini-gram tables read by infini-gram itself (PyPI `infini-gram`; run by
scripts/infini-gram-check.sh, which installs it into a venv).

For u8, u16 and u32 tokens: small corpora of documents, each starting with infini-gram's
separator (0xFF..FF), written as `tokenized.N` and `offset.N` the way its tokenizer writes them;
`psa --infini-gram` (under mpirun at P pes) writes `table.N`; then

1. every table equals the naive one (the byte offsets of the token starts sorted by the file's
   bytes from there), and infini-gram's engine (`InfiniGramEngine`) counts and finds n-grams
   (present, absent, with separators, the empty query) in psa's tables: every count must equal a
   naive count over the tokens, every found segment must hold exactly the query's occurrences in
   its shard;
2. infini-gram's own indexer (`python -m infini_gram.indexing`, its `rust_indexing` binary) builds
   the same shards in another directory, and its `table.N` must equal psa's byte for byte (u32:
   only where the indexer can run: its make-part asks for 32 GiB for u32 tokens).

With --hack-demo, also where infini-gram's indexer is not exact: run in parts (--cpus 2), it
compares suffixes across a part's end only HACK = 100000 bytes far, and so misorders suffixes
that share a longer prefix (a 150 KB block twice); psa's table of it equals the exact suffix
array (by prefix doubling here), the indexer's differs (reported, not a failure).

Exits non-zero on any difference of psa's, printing it.
"""

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys

import numpy as np
from infini_gram.engine import InfiniGramEngine

DTYPES = {1: ("u8", np.uint8), 2: ("u16", np.uint16), 4: ("u32", np.uint32)}


def corpus(rng, w, docs, vocab):
    """Token documents of `w` bytes, each led by the separator, as one token list and the
    documents' byte offsets (offset.N). `vocab` small: n-grams repeat. Some documents hold the
    largest tokens below the separator and tokens whose bytes sort otherwise than their values."""
    sep = (1 << (8 * w)) - 1
    odd = [v for v in (0x0100, 0x00FF, 0x0001, 0xFF00, sep - 1, 1 << (8 * w - 1)) if v < sep]
    tokens, offsets = [], []
    for d in range(docs):
        offsets.append(len(tokens) * w)
        tokens.append(sep)
        n = rng.randrange(0, 60)
        pool = odd if d % 5 == 4 else list(range(1, min(vocab, sep - 1) + 1))
        tokens += [rng.choice(pool) for _ in range(n)]
    return tokens, offsets


def write_shard(d, k, tokens, offsets, w):
    """tokenized.K and offset.K in directory d, as infini-gram's tokenizer writes them."""
    np.array(tokens, dtype=DTYPES[w][1]).tofile(os.path.join(d, f"tokenized.{k}"))
    np.array(offsets, dtype=np.uint64).tofile(os.path.join(d, f"offset.{k}"))


def run_psa(psa, pes, d, w):
    """psa --infini-gram on d, under mpirun at `pes` pes where mpirun is there."""
    cmd = [psa, "--infini-gram", "--token-width", str(w), "--check", d]
    if shutil.which("mpirun"):
        cmd = ["mpirun", "-n", str(pes), "--bind-to", "none"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"psa failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")


def count(shards, q):
    """Occurrences of q in each shard, as token positions, naively."""
    m = len(q)
    return [[i for i in range(len(t) - m + 1) if t[i:i + m] == q] if q else list(range(len(t)))
            for t in shards]


def queries(rng, shards, w):
    """Present n-grams of 1 to 6 tokens, absent ones, ones across documents, the empty one."""
    sep = (1 << (8 * w)) - 1
    qs = [[], [sep], [sep, sep], [sep - 1], [0]]
    for _ in range(150):
        t = rng.choice([t for t in shards if t])
        n = rng.randrange(1, 7)
        i = rng.randrange(0, max(1, len(t) - n))
        qs.append(t[i:i + n])
    for _ in range(30):
        qs.append([rng.randrange(0, sep + 1) for _ in range(rng.randrange(1, 4))])
    return qs


def table_entries(d, k, ntok):
    """psa's table.K: its entries (byte offsets) and their width."""
    raw = open(os.path.join(d, f"table.{k}"), "rb").read()
    width = len(raw) // ntok if ntok else 0
    return [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)], width


def check_engine(d, shards, w, rng):
    """infini-gram's engine on psa's tables: counts and found segments against the naive ones."""
    name, _ = DTYPES[w]
    vocab = {1: 255, 2: 65535, 4: (1 << 32) - 1}[w]
    engine = InfiniGramEngine(index_dir=d, eos_token_id=0, vocab_size=vocab, token_dtype=name)
    tables = [table_entries(d, k, len(t))[0] for k, t in enumerate(shards)]
    bad = 0
    for k, t in enumerate(shards):
        data = open(os.path.join(d, f"tokenized.{k}"), "rb").read()
        if tables[k] != sorted(range(0, len(data), w), key=lambda o: data[o:]):
            print(f"{name}: table.{k} is not the naive table (offsets sorted by the file's bytes)")
            bad += 1
    qs = queries(rng, shards, w)
    for q in qs:
        want = count(shards, q)
        got = engine.count(q)
        found = engine.find(q)
        if got.get("count") != sum(map(len, want)) or found.get("cnt") != got.get("count"):
            print(f"{name} {q}: engine counts {got} / {found.get('cnt')}, naive {sum(map(len, want))}")
            bad += 1
            continue
        for k, (lo, hi) in enumerate(found["segment_by_shard"]):
            at = sorted(tables[k][lo:hi])
            if at != [i * w for i in want[k]]:
                print(f"{name} {q}: shard {k} segment {lo}..{hi} holds {at[:5]}, want {want[k][:5]}")
                bad += 1
    print(f"{name}: the engine answered {len(qs)} queries on psa's tables ({bad} wrong)")
    return bad


def check_indexer(d, shards, w, scratch):
    """infini-gram's indexer on the same shards: its table.N against psa's, byte for byte."""
    name, _ = DTYPES[w]
    mine = os.path.join(scratch, f"indexer-{name}")
    shutil.rmtree(mine, ignore_errors=True)
    os.makedirs(os.path.join(mine, "data"))
    for k in range(len(shards)):
        for f in (f"tokenized.{k}", f"offset.{k}"):
            shutil.copy(os.path.join(d, f), os.path.join(mine, f))
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    cmd = [sys.executable, "-m", "infini_gram.indexing", "--data_dir", os.path.join(mine, "data"),
           "--save_dir", mine, "--token_dtype", name, "--cpus", "1", "--mem", "1",
           "--shards", str(len(shards)), "--ulimit", str(min(limit, 1 << 20))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    out = r.stdout + r.stderr
    if r.returncode != 0 or "Something went wrong" in out:
        if w == 4 and "memory allocation of" in out:
            print(f"{name}: infini-gram's indexer could not run here (its make-part asks for "
                  f"32 GiB for u32 tokens): byte-for-byte comparison skipped")
            return 0
        print(f"{name}: infini-gram's indexer failed:\n{out[-3000:]}")
        return 1
    bad = 0
    for k in range(len(shards)):
        a = open(os.path.join(d, f"table.{k}"), "rb").read()
        b = open(os.path.join(mine, f"table.{k}"), "rb").read()
        if a != b:
            print(f"{name}: table.{k} differs from infini-gram's indexer's ({len(a)} vs {len(b)} bytes)")
            bad += 1
    print(f"{name}: {len(shards)} tables equal to infini-gram's indexer's, byte for byte"
          if not bad else f"{name}: {bad} tables differ")
    return bad


def exact_sa(data):
    """The suffix array of bytes by prefix doubling (numpy; exact, for the demonstration)."""
    n = len(data)
    rank = np.frombuffer(data, dtype=np.uint8).astype(np.int64) + 1
    k = 1
    while True:
        second = np.zeros(n, dtype=np.int64)
        second[:max(0, n - k)] = rank[k:]
        order = np.lexsort((second, rank))
        a, b = rank[order], second[order]
        new = np.ones(n, dtype=np.int64)
        new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.cumsum(new)
        if n == 0 or rank.max() == n:
            return order
        k *= 2


def hack_demo(psa, pes, scratch):
    """infini-gram's indexer in two parts against psa on a text with a 150 KB repeat."""
    d = os.path.join(scratch, "hack")
    os.makedirs(os.path.join(d, "data"))
    rng = random.Random(3)
    block = bytes(rng.randrange(0, 255) for _ in range(150000))
    data = block + block + bytes(rng.randrange(0, 255) for _ in range(1000))
    open(os.path.join(d, "tokenized.0"), "wb").write(data)
    open(os.path.join(d, "offset.0"), "wb").write(bytes(8))
    ours = os.path.join(d, "psa")
    os.makedirs(ours)
    for f in ("tokenized.0", "offset.0"):
        shutil.copy(os.path.join(d, f), os.path.join(ours, f))
    run_psa(psa, pes, ours, 1)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    r = subprocess.run([sys.executable, "-m", "infini_gram.indexing", "--data_dir",
                        os.path.join(d, "data"), "--save_dir", d, "--token_dtype", "u8",
                        "--cpus", "2", "--mem", "1", "--ulimit", str(min(limit, 1 << 20))],
                       capture_output=True, text=True)
    want = exact_sa(data)

    def wrong(path):
        """Entries of the table at path off the exact suffix array (None: no such table)."""
        if not os.path.exists(path):
            return None
        raw = np.frombuffer(open(path, "rb").read(), dtype=np.uint8).astype(np.int64)
        width = len(raw) // len(data)
        got = raw.reshape(-1, width) @ (256 ** np.arange(width, dtype=np.int64))
        return int(np.count_nonzero(got != want))

    ours_wrong = wrong(os.path.join(ours, "table.0"))
    theirs = wrong(os.path.join(d, "table.0")) if r.returncode == 0 else "(failed)"
    print(f"hack demo ({len(data)} bytes, a 150000-byte block twice): entries off the exact "
          f"suffix array: psa's table {ours_wrong}, infini-gram's indexer's (--cpus 2) {theirs}")
    return 0 if ours_wrong == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--psa", required=True, help="the psa binary")
    ap.add_argument("--pes", type=int, default=3, help="pes of psa's runs [3]")
    ap.add_argument("--scratch", required=True, help="a directory for the corpora (emptied)")
    ap.add_argument("--hack-demo", action="store_true",
                    help="also show where infini-gram's indexer in parts is not exact")
    args = ap.parse_args()
    # infini-gram's indexer changes its directory to its package's: absolute paths only.
    args.scratch, args.psa = os.path.abspath(args.scratch), os.path.abspath(args.psa)
    rng = random.Random(65)
    bad = 0
    shutil.rmtree(args.scratch, ignore_errors=True)
    for w, (name, _) in DTYPES.items():
        d = os.path.join(args.scratch, f"index-{name}")
        os.makedirs(d)
        # A few KB per shard (2-byte entries), and a small one (1-byte entries below 256 bytes).
        sizes = [(90, 12), (120, 300), (3, 6)]
        shards = []
        for k, (docs, vocab) in enumerate(sizes):
            tokens, offsets = corpus(rng, w, docs, vocab)
            write_shard(d, k, tokens, offsets, w)
            shards.append(tokens)
        run_psa(args.psa, args.pes, d, w)
        bad += check_engine(d, shards, w, rng)
        bad += check_indexer(d, shards, w, args.scratch)
    if args.hack_demo:
        bad += hack_demo(args.psa, args.pes, args.scratch)
    if bad:
        sys.exit(f"infini-gram check: {bad} differences")
    print("infini-gram check passed")


if __name__ == "__main__":
    main()
