#!/usr/bin/env python3
"""scripts/tokenize-u16.py — text corpora to one infini-gram shard of u16 tokens, deterministically.

    python3 scripts/tokenize-u16.py [--mb N] [--jobs J] [--vocab FILE] [--width 2|4] DIR CORPUS...

A word-level tokenizer (stdlib only) for benchmarking infini-gram indexes on real text:

* Documents. Each CORPUS (the first N MB of it with --mb; 1 MB = 10^6 bytes) is read line by
  line; a document is a paragraph: the lines up to a blank one (empty or whitespace only). Blank
  lines separate documents and are dropped; a paragraph longer than 1 MB is cut into documents
  of about 1 MB (at line ends; a line longer than 1 MB is read in 1 MB pieces); a corpus's end
  ends its last document.
* Tokens. The bytes of a document are split into runs of word bytes (ASCII letters, digits,
  `_` and every byte >= 0x80, so UTF-8 letters join words without decoding), runs of ASCII
  whitespace, and runs of the other bytes (punctuation).
* Vocabulary. Pass 1 counts the tokens of all documents; the 65,534 most frequent get ids
  0..65533, by count, then by their bytes (ties are broken by the bytes, so the ids depend on the
  input only); every other token is UNK = 65534. 0xFFFF is infini-gram's document separator.
* Output (pass 2), as infini-gram's indexer writes them for `--token_dtype u16`:
  DIR/tokenized.0: every document as its separator 0xFFFF then its token ids, u16 little-endian;
  DIR/offset.0: the byte offset in tokenized.0 of every document's start (its separator),
  u64 little-endian, one per document.
  With --width 4 (infini-gram's `--token_dtype u32`): u32 tokens, every distinct token its own id
  (in the same order; no UNK), and the separator 0xFFFFFFFF.
  With --vocab FILE, also the vocabulary: one line per id, `ID<TAB>COUNT<TAB>TOKEN` with the
  token's bytes as a Python bytes literal.

Memory is bounded by the number of distinct tokens (pass 1's counts), not by the corpora's size:
documents are streamed in batches through --jobs worker processes (default: all cores), in
order, so the output does not depend on J.

The last line printed is `tokens=T documents=D vocabulary=V unk=U bytes=B`: T counts every token
of tokenized.0 (the D separators included), U the tokens mapped to UNK, B = 2 T.
"""

import argparse
import array
import multiprocessing as mp
import os
import re
import sys
from collections import Counter

SEP = 0xFFFF
UNK = 0xFFFE
VOCAB = 65534
CODE = "H"  # array's type of a token (--width 4: "I", 4 bytes on every platform psa runs on)
MB = 1_000_000
PIECE = 1 << 20  # the longest line read at once, and the size where a paragraph is cut
BATCH = 4 << 20  # bytes of documents per task of a worker

TOKEN = re.compile(rb"[A-Za-z0-9_\x80-\xff]+|\s+|[^A-Za-z0-9_\x80-\xff\s]+")

ids = {}  # token -> id, set before pass 2's workers fork


def documents(path, limit):
    """The documents (bytes) of the file at path, of its first `limit` bytes (None: all)."""
    left = limit
    with open(path, "rb") as f:
        doc, size = [], 0
        while left is None or left > 0:
            line = f.readline(PIECE if left is None else min(PIECE, left))
            if not line:
                break
            if left is not None:
                left -= len(line)
            if not line.strip():
                if doc:
                    yield b"".join(doc)
                    doc, size = [], 0
                continue
            doc.append(line)
            size += len(line)
            if size >= PIECE:
                yield b"".join(doc)
                doc, size = [], 0
        if doc:
            yield b"".join(doc)


def batches(paths, limit):
    """Lists of documents of about BATCH bytes, in order."""
    batch, size = [], 0
    for p in paths:
        for d in documents(p, limit):
            batch.append(d)
            size += len(d)
            if size >= BATCH:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


def waves(it, n):
    """Lists of up to n items of it: a bounded read-ahead for Pool.map (imap reads it all)."""
    wave = []
    for x in it:
        wave.append(x)
        if len(wave) == n:
            yield wave
            wave = []
    if wave:
        yield wave


def count(batch):
    """Pass 1: the tokens' counts of a batch."""
    c = Counter()
    for d in batch:
        c.update(TOKEN.findall(d))
    return c


def encode(batch):
    """Pass 2: a batch's documents as little-endian tokens, their token counts, its UNKs."""
    out = array.array(CODE)
    lengths, unk = [], 0
    get = ids.get
    for d in batch:
        t = [get(w, UNK) for w in TOKEN.findall(d)]
        unk += t.count(UNK)
        out.append(SEP)
        out.extend(t)
        lengths.append(len(t) + 1)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes(), lengths, unk


def run(pool, fn, paths, limit, jobs):
    """fn over the batches of the corpora, in order (in the pool's workers, or here)."""
    for wave in waves(batches(paths, limit), 2 * jobs):
        yield from (pool.map(fn, wave) if pool else map(fn, wave))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("dir", help="the shard's directory (created; tokenized.0, offset.0 replaced)")
    ap.add_argument("corpora", nargs="+", help="text files")
    ap.add_argument("--mb", type=int, help="only the first N MB (10^6 bytes) of each corpus")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="worker processes [all cores; 1: none]")
    ap.add_argument("--vocab", help="also write the vocabulary here")
    ap.add_argument("--width", type=int, choices=(2, 4), default=2,
                    help="bytes per token [2]; 4: u32 tokens, every distinct token its own id "
                         "(no UNK), separator 0xFFFFFFFF")
    args = ap.parse_args()
    global SEP, UNK, VOCAB, CODE
    if args.width == 4:
        SEP, UNK, VOCAB, CODE = 0xFFFF_FFFF, 0xFFFF_FFFE, 0xFFFF_FFFE, "I"
    limit = None if args.mb is None else args.mb * MB
    jobs = max(1, args.jobs)
    pool = mp.get_context("fork").Pool(jobs) if jobs > 1 else None

    counts = Counter()
    for c in run(pool, count, args.corpora, limit, jobs):
        counts.update(c)
    vocab = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:VOCAB]
    global ids
    ids = {w: i for i, (w, _) in enumerate(vocab)}
    if pool:
        pool.close()
        pool.join()
        # Fork the encoders after the vocabulary is known: they inherit it.
        pool = mp.get_context("fork").Pool(jobs)
    if args.vocab:
        with open(args.vocab, "w", encoding="ascii") as f:
            for i, (w, n) in enumerate(vocab):
                f.write(f"{i}\t{n}\t{w!r}\n")

    os.makedirs(args.dir, exist_ok=True)
    tok_path, off_path = os.path.join(args.dir, "tokenized.0"), os.path.join(args.dir, "offset.0")
    tokens = docs = unk = 0
    with open(tok_path + ".tmp", "wb") as ft, open(off_path + ".tmp", "wb") as fo:
        for data, lengths, u in run(pool, encode, args.corpora, limit, jobs):
            offs = array.array("Q")
            for n in lengths:
                offs.append(args.width * tokens)
                tokens += n
            if sys.byteorder != "little":
                offs.byteswap()
            ft.write(data)
            fo.write(offs.tobytes())
            docs += len(lengths)
            unk += u
    os.replace(tok_path + ".tmp", tok_path)
    os.replace(off_path + ".tmp", off_path)
    if pool:
        pool.close()
        pool.join()
    distinct = len(counts)
    print(f"tokenize-u16: {args.dir}: {tokens} tokens in {docs} documents; {distinct} distinct "
          f"tokens, the {len(vocab)} most frequent kept, {unk} tokens UNK", file=sys.stderr)
    print(f"tokens={tokens} documents={docs} vocabulary={len(vocab)} unk={unk} "
          f"bytes={args.width * tokens}")


if __name__ == "__main__":
    main()
