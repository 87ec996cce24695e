#!/usr/bin/env bash
# psa repeats against deduplicate-text-datasets (google-research): on small byte corpora with
# planted repeats, the peer's `make` + `self-similar --length-threshold K` + `collect` and
# `psa repeats --min-len K` must give the same spans. Prints one line per corpus and K,
# "equal" or "different" (with the first differing lines), and exits 1 if any differ.
#
#   bash scripts/repeats-check.sh [PSA]       PSA: the binary [default: target/ci/psa]
#
# The peer is cloned into target/dedup-text-datasets (or taken from DEDUP_DIR, a checkout of
# it) and built there with `cargo build --release` (crates from crates.io). Its self-similar
# runs with --num-threads 1: with more threads it leaves the last few suffix-array entries
# unexamined (each worker's range ends before n), which can drop repeats among the
# lexicographically largest suffixes. Its collect prints "b e" lines after a line "out"; psa
# writes "b<TAB>e". Both merge touching ranges ([0,5) and [5,9) give [0,9)). P: pes of the psa
# runs [2].
set -euo pipefail
cd "$(dirname "$0")/.."

psa=$(realpath "${1:-target/ci/psa}")
p=${P:-2}
peer_dir=${DEDUP_DIR:-target/dedup-text-datasets}
if [ ! -f "$peer_dir/Cargo.toml" ]; then
    git clone --quiet https://github.com/google-research/deduplicate-text-datasets "$peer_dir"
fi
(cd "$peer_dir" && cargo build --release --quiet 2>/dev/null || cargo build --release)
peer=$(realpath "$peer_dir/target/release/dedup_dataset")
work=$(realpath -m target/repeats-check)
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# Corpora: words drawn from a small vocabulary with copied sentences, paragraphs and a few
# near-copies; a repeated block text; random letters with planted copies.
python3 - "$work" <<'EOF'
import random, sys
out = sys.argv[1]
r = random.Random(20261206)
words = [''.join(r.choice('etaoinshrdlu') for _ in range(r.randint(2, 8))) for _ in range(400)]
def sentence():
    return ' '.join(r.choice(words) for _ in range(r.randint(5, 20))) + '. '
def words_text(n):
    parts, size = [], 0
    while size < n:
        if parts and r.random() < 0.25:
            s = r.choice(parts)
            if r.random() < 0.3:
                k = r.randrange(len(s))
                s = s[:k] + 'X' + s[k + 1:]
        else:
            s = sentence()
        parts.append(s)
        size += len(s)
    return ''.join(parts)[:n].encode()
def planted(n):
    b = bytearray(r.choice(b'abcdefghij') for _ in range(n))
    for _ in range(40):
        ln = r.randint(20, 400)
        a, c = r.randrange(n - ln), r.randrange(n - ln)
        b[c:c + ln] = b[a:a + ln]
    return bytes(b)
block = bytes(r.choice(b'acgt') for _ in range(997))
corpora = {
    'words': words_text(300_000),
    'planted': planted(200_000),
    'blocks': (block * 60)[:50_000] + words_text(20_000),
    'binary': bytes(r.randrange(256) for _ in range(100_000)) * 2,
}
for name, data in corpora.items():
    open(f'{out}/{name}.bin', 'wb').write(data)
EOF

status=0
for name in words planted blocks binary; do
    for k in 20 50 100; do
        f=$work/$name.bin
        cache=$work/cache-$name-$k
        rm -rf "$cache"
        [ -f "$f.table.bin" ] || "$peer" make --data-file "$f" >/dev/null
        "$peer" self-similar --data-file "$f" --length-threshold "$k" --cache-dir "$cache" \
            --num-threads 1 >/dev/null
        "$peer" collect --data-file "$f" --cache-dir "$cache" --length-threshold "$k" \
            | awk 'go && NF == 2 { print $1 "\t" $2 } /^out$/ { go = 1 }' >"$work/$name-$k.peer"
        mpirun -n "$p" --bind-to none "$psa" repeats -q --min-len "$k" -o "$work/$name-$k.psa" "$f"
        spans=$(wc -l <"$work/$name-$k.psa")
        if cmp -s "$work/$name-$k.peer" "$work/$name-$k.psa"; then
            echo "$name (K = $k, $spans spans): equal"
        else
            echo "$name (K = $k): different (peer $(wc -l <"$work/$name-$k.peer") spans, psa $spans)"
            diff "$work/$name-$k.peer" "$work/$name-$k.psa" | head -6
            status=1
        fi
    done
done
exit $status
