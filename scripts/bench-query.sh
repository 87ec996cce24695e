#!/usr/bin/env bash
# scripts/bench-query.sh — same-run benchmark of `psa query` (issue 66): psa as it was at a base
# commit (built by this script), psa as it is now, and genedex's FM-index (crates.io), on reads
# sampled from a DNA corpus.
#
#   scripts/bench-query.sh [--base COMMIT] [--reads N[,M..]] [--len L] [--reps R] [--threads T[,U..]]
#                          [--max-hits K] [--seed S] [--label NAME] [--work DIR] [--out FILE.md]
#                          [--bins BASE,NEW,GENEDEX] [--index-pes P] [CORPUS]
#
# CORPUS: a FASTA file (plain) or a text of sequence letters (one line, as corpora/dna.txt)
# [corpora/dna.txt, made by scripts/corpora.sh dna when missing: ~70 MB of human chrX].
#
# 1. Builds psa at --base (a `git archive` of it, built with the ci profile in DIR/base) and psa
#    here (the ci profile, target/ci/psa), and a small genedex program (a cargo project the
#    script writes in DIR/genedex: genedex 0.2.x from crates.io, its default configuration,
#    `FmIndexConfig::<i32>::new()`, alphabet `ascii_dna_with_n`; the release profile).
# 2. Makes the index of each: `psa -o` by each psa (p = 1; a plain text corpus is wrapped into a
#    FASTA record first), genedex's saved to a file (its build is timed apart, not in the runs).
# 3. Samples N reads of L letters (seeded; within one record, A/C/G/T only), one a line.
# 4. Then R times, interleaved (the tools' order rotating): counts (`psa query INDEX --patterns
#    READS`; genedex: load, count_many per thread) and locates (`--locate --max-hits K`; genedex:
#    each cursor's count and the first K hits of its locate), at each thread count of --threads
#    [1 and all cores], each under `/usr/bin/time -v`. The times include opening or loading the index.
#    Every run's counts are compared with the others' of the same reads.
# 5. Writes the report, bench-results/DATE-LABEL-COMMIT-query.md (or --out): the machine, the
#    commits, the corpus, the command, the best wall time of each tool, mode and thread count
#    over the R runs, patterns per second (and per thread), the largest peak memory, whether
#    the counts agree, and every run.
#
# Options: --base [94d7c21]  --reads [100000]  --len [100]  --reps [3]  --threads [1,nproc]
#          --max-hits [10]  --seed [66]  --label [local]  --work [.bench-tmp/query]
#   --bins BASE,NEW,GENEDEX  binaries built already (the base psa, this psa and the genedex program
#                            of step 1, for a host without cargo): nothing is built; BASE's and
#                            NEW's commits are read from their `--version`
#   --index-pes P            build the psa indexes with `mpirun -n P` [1: no launcher]
#   --build-only             step 1 only: build the three, write each one's commit (or version) to
#                            BIN.commit beside it, print their paths as --bins takes them
#
# Needs: git, cargo (network to crates.io the first time, for genedex), python3, GNU time at
# /usr/bin/time, and about 12 bytes of disk per corpus letter.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

BASE=94d7c21 READS=100000 LEN=100 REPS=3 THREADS=1,$(nproc) MAXHITS=10 SEED=66 LABEL=local
WORK=.bench-tmp/query OUTMD="" CORPUS=corpora/dna.txt BINS="" INDEX_PES=1 BUILD_ONLY=0
ARGS="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) BASE=$2; shift 2 ;;
    --reads) READS=$2; shift 2 ;;
    --len) LEN=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --max-hits) MAXHITS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --label) LABEL=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --out) OUTMD=$2; shift 2 ;;
    --bins) BINS=$2; shift 2 ;;
    --index-pes) INDEX_PES=$2; shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bench-query.sh: unknown option $1" >&2; exit 2 ;;
    *) CORPUS=$1; shift ;;
  esac
done
say() { echo "bench-query: $*" >&2; }
[[ -x /usr/bin/time ]] || { say "needs GNU time at /usr/bin/time (apt-get install time)"; exit 2; }
if [[ ! -f $CORPUS && $CORPUS == corpora/dna.txt ]]; then scripts/corpora.sh dna; fi
[[ -f $CORPUS ]] || { say "no corpus '$CORPUS'"; exit 2; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
if [[ -z $BINS ]]; then
  COMMIT=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- src Cargo.toml Cargo.lock || COMMIT="$COMMIT+dirty"
  BASE=$(git rev-parse --short "$BASE")
fi

# ---- 1. the binaries ------------------------------------------------------------------------------
build_base() {
  local dir=$WORK/base
  if [[ -x $dir/target/ci/psa && $(cat "$dir/commit" 2>/dev/null) == "$BASE" ]]; then return; fi
  say "building psa at $BASE in $dir"
  rm -rf "$dir/src-tree" && mkdir -p "$dir/src-tree"
  git archive --format=tar "$BASE" | tar -x -C "$dir/src-tree"
  cargo build -q --profile ci --bin psa --manifest-path "$dir/src-tree/Cargo.toml" \
    --target-dir "$dir/target"
  echo "$BASE" > "$dir/commit"
}
build_genedex() {
  local dir=$WORK/genedex
  mkdir -p "$dir/src"
  cat > "$dir/Cargo.toml" <<'EOF'
[package]
name = "genedex-bench"
version = "0.1.0"
edition = "2021"

[dependencies]
genedex = "0.2"

[profile.release]
codegen-units = 1
EOF
  cat > "$dir/src/main.rs" <<'EOF'
//! genedex-bench build SEQS INDEX: the FM-index of SEQS (one sequence a line) saved to INDEX.
//! genedex-bench count|locate INDEX READS THREADS K: loads INDEX, then per thread a contiguous
//! share of READS (one a line): each read's count (locate: and its first K hits), printed in
//! order, one count a line.
use genedex::{alphabet, FmIndexCondensed64, FmIndexConfig};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a[1] == "build" {
        let text = std::fs::read(&a[2]).expect("sequences");
        let seqs: Vec<&[u8]> = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
        let t0 = std::time::Instant::now();
        let index = FmIndexConfig::<i32>::new().construct_index(seqs, alphabet::ascii_dna_with_n());
        eprintln!("genedex build: {:.2} s", t0.elapsed().as_secs_f64());
        index.save_to_file(&a[3]).expect("saved");
        return;
    }
    let locate = a[1] == "locate";
    let index = FmIndexCondensed64::<i32>::load_from_file(&a[2]).expect("index");
    let reads = std::fs::read(&a[3]).expect("reads");
    let reads: Vec<&[u8]> = reads.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let threads: usize = a[4].parse().expect("threads");
    let k: usize = a[5].parse().expect("K");
    let share = reads.len().div_ceil(threads).max(1);
    let counts: Vec<Vec<(usize, usize)>> = std::thread::scope(|s| {
        let jobs: Vec<_> = (reads.chunks(share))
            .map(|part| {
                let index = &index;
                s.spawn(move || {
                    (index.cursors_for_many_queries(part.iter().copied()))
                        .map(|c| match locate {
                            true => (c.count(), c.locate().take(k).map(|h| h.position).sum()),
                            false => (c.count(), 0),
                        })
                        .collect()
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().expect("a thread")).collect()
    });
    let mut out = String::new();
    for (count, _) in counts.iter().flatten() {
        out.push_str(&format!("{count}\n"));
    }
    print!("{out}");
}
EOF
  say "building the genedex program in $dir"
  cargo build -q --release --manifest-path "$dir/Cargo.toml" --target-dir "$dir/target"
}
if [[ -n $BINS ]]; then
  # Built elsewhere: each binary's commit (or version) in a file BIN.commit beside it.
  IFS=, read -r PSA_BASE PSA_NEW GDX <<< "$BINS"
  for b in "$PSA_BASE" "$PSA_NEW" "$GDX"; do [[ -x $b ]] || { say "no binary '$b'"; exit 2; }; done
  BASE=$(cat "$PSA_BASE.commit" 2>/dev/null || echo prebuilt)
  COMMIT=$(cat "$PSA_NEW.commit" 2>/dev/null || echo prebuilt)
  GDX_VERSION=$(cat "$GDX.commit" 2>/dev/null || echo 0.2)
else
  build_base
  say "building psa here ($COMMIT)"
  cargo build -q --profile ci --bin psa
  build_genedex
  PSA_BASE=$WORK/base/target/ci/psa PSA_NEW=$ROOT/target/ci/psa GDX=$WORK/genedex/target/release/genedex-bench
  GDX_VERSION=$(grep -A1 'name = "genedex"' "$WORK/genedex/Cargo.lock" | sed -n 's/version = "\(.*\)"/\1/p')
fi
if [[ $BUILD_ONLY == 1 ]]; then
  echo "$BASE" > "$PSA_BASE.commit"; echo "$COMMIT" > "$PSA_NEW.commit"; echo "$GDX_VERSION" > "$GDX.commit"
  echo "$PSA_BASE,$PSA_NEW,$GDX"
  exit 0
fi
LAUNCH=()
[[ $INDEX_PES -gt 1 ]] && LAUNCH=(mpirun -n "$INDEX_PES")

# ---- 2. the corpus, its indexes, 3. the reads ---------------------------------------------------------
python3 - "$CORPUS" "$WORK/corpus.fa" "$WORK/seqs.txt" <<'EOF'
import sys
src, fa, seqs = sys.argv[1:4]
data = open(src, 'rb').read()
if data.startswith(b'>'):
    recs, name, parts = [], None, []
    for line in data.splitlines():
        if line.startswith(b'>'):
            if name is not None: recs.append((name, b''.join(parts)))
            name, parts = line[1:].split()[0] if line[1:].split() else b'r', []
        else:
            parts.append(line.strip())
    if name is not None: recs.append((name, b''.join(parts)))
else:
    recs = [(b'corpus', b''.join(data.split()))]
with open(fa, 'wb') as f, open(seqs, 'wb') as s:
    for name, seq in recs:
        seq = seq.upper()
        f.write(b'>' + name + b'\n')
        for i in range(0, len(seq), 80): f.write(seq[i:i + 80] + b'\n')
        s.write(bytes(c if c in b'ACGT' else ord('N') for c in seq) + b'\n')
EOF
for tool in base new; do
  bin=PSA_${tool^^}
  [[ -f $WORK/$tool.sa && $WORK/$tool.sa -nt ${!bin} && $WORK/$tool.sa -nt $WORK/corpus.fa ]] ||
    { say "index of psa $tool"; "${LAUNCH[@]}" "${!bin}" -q --force -o "$WORK/$tool.sa" "$WORK/corpus.fa"; }
done
[[ -f $WORK/genedex.idx && $WORK/genedex.idx -nt $GDX && $WORK/genedex.idx -nt $WORK/seqs.txt ]] ||
  { say "index of genedex"; "$GDX" build "$WORK/seqs.txt" "$WORK/genedex.idx" 2> "$WORK/genedex-build.log"; }
GDX_BUILD=$(sed -n 's/genedex build: //p' "$WORK/genedex-build.log")

# ---- 4. the runs ------------------------------------------------------------------------------
RUNS=$WORK/runs.tsv
printf 'reads\trep\ttool\tmode\tthreads\twall_s\tpeak_kb\tcounts_md5\n' > "$RUNS"
one_run() { # reads rep tool mode threads
  local n=$1 rep=$2 tool=$3 mode=$4 th=$5 out=$SCRATCH/bench-query-out.txt cmd
  local reads=$WORK/reads-$n.txt
  case $tool in
    genedex) cmd=("$GDX" "$mode" "$WORK/genedex.idx" "$reads" "$th" "$MAXHITS") ;;
    *) local bin=PSA_${tool^^}
       cmd=("${!bin}" query "$WORK/$tool.sa" --patterns "$reads" --threads "$th")
       [[ $mode == locate ]] && cmd+=(--locate --max-hits "$MAXHITS") ;;
  esac
  local t0=$EPOCHREALTIME wall peak sum
  /usr/bin/time -v -o "$WORK/time.txt" "${cmd[@]}" > "$out"
  wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.3f", b - a}')
  peak=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
  case $tool in
    genedex) sum=$(md5sum < "$out" | cut -c1-12) ;;
    *) sum=$(awk -F'\t' 'NF == 2 {print $2}' "$out" | md5sum | cut -c1-12) ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$rep" "$tool" "$mode" "$th" "$wall" "$peak" "$sum" >> "$RUNS"
  rm -f "$out"
}
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
# The answers go to memory where it can (a locate's lines would else time the disk too).
SCRATCH=$WORK
[[ -d /dev/shm && -w /dev/shm ]] && SCRATCH=/dev/shm
IFS=, read -ra SIZES <<< "$READS"
IFS=, read -ra THREAD_LIST <<< "$THREADS"
TOOLS=(base new genedex)
for n in "${SIZES[@]}"; do
  say "sampling $n reads of $LEN"
  python3 - "$WORK/seqs.txt" "$WORK/reads-$n.txt" "$n" "$LEN" "$SEED" <<'EOF'
import random, sys
seqs, out, n, length, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
recs = [l for l in open(seqs, 'rb').read().split(b'\n') if len(l) >= length]
weights = [len(r) - length + 1 for r in recs]
rng = random.Random(seed)
reads = []
while len(reads) < n:
    r = rng.choices(recs, weights)[0]
    i = rng.randrange(len(r) - length + 1)
    read = r[i:i + length]
    if read.strip(b'ACGT') == b'' and b'N' not in read: reads.append(read)
open(out, 'wb').write(b'\n'.join(reads) + b'\n')
EOF
  # The warm-up: the page cache, and the new psa's top level (built by its first query with many
  # patterns, kept in new.sa.top, which the timed runs map).
  rm -f "$WORK/new.sa.top"
  for tool in "${TOOLS[@]}"; do one_run "$n" 0 "$tool" count 1; done
  for rep in $(seq 1 "$REPS"); do
    for mode in count locate; do
      for th in "${THREAD_LIST[@]}"; do
        for k in 0 1 2; do
          tool=${TOOLS[$(( (k + rep) % 3 ))]}
          say "reads $n, run $rep: $tool $mode at $th thread(s)"
          one_run "$n" "$rep" "$tool" "$mode" "$th"
        done
      done
    done
  done
done

TOP_BYTES=$(stat -c %s "$WORK/new.sa.top" 2>/dev/null || echo 0)
SA_BYTES=$(stat -c %s "$WORK/new.sa")

# ---- 5. the report ----------------------------------------------------------------------------
DATE=$(date +%F)
[[ -n $OUTMD ]] || OUTMD=bench-results/$DATE-$LABEL-${COMMIT%+dirty}-query.md
export BASE COMMIT GDX_VERSION GDX_BUILD DATE LABEL ARGS REPS MAXHITS SEED LEN LOAD_START TOP_BYTES SA_BYTES
export MACHINE="\`$(hostname)\`, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r)"
export CORPUS_SHOWN="\`$(basename "$CORPUS")\` ($(stat -c %s "$CORPUS") bytes, sha256 \`$(sha256sum "$CORPUS" | cut -c1-16)…\`)"
python3 - "$RUNS" "$OUTMD" <<'EOF'
import collections, os, sys
e = os.environ
runs, out = sys.argv[1], sys.argv[2]
rows = [l.rstrip('\n').split('\t') for l in open(runs)][1:]
best, peak, sums = {}, collections.defaultdict(int), collections.defaultdict(set)
for n, rep, tool, mode, th, wall, kb, md5 in rows:
    sums[(n, mode, th)].add(md5)
    if rep == '0':
        continue
    key = (n, tool, mode, th)
    best[key] = min(best.get(key, 1e9), float(wall))
    peak[key] = max(peak[key], int(kb))
names = {'base': f"psa {e['BASE']} (base)", 'new': f"psa {e['COMMIT']} (new)",
         'genedex': f"genedex {e['GDX_VERSION']}"}
L = [f"# psa query against psa at {e['BASE']} and genedex {e['GDX_VERSION']}: {e['DATE']}, {e['LABEL']}\n",
     f"Machine: {e['MACHINE']}; load average at the start: {e['LOAD_START']} (the machine may have "
     "been busy: compare figures within this report only).\n",
     f"Commits: new `{e['COMMIT']}`, base `{e['BASE']}` (both built with the ci profile); genedex "
     f"{e['GDX_VERSION']} (crates.io, default configuration, `FmIndexConfig::<i32>::new()`, release "
     f"profile; its index build, {e['GDX_BUILD']}, is not in the runs).\n",
     f"Corpus: {e['CORPUS_SHOWN']}, upper-cased, one FASTA record per record; reads of {e['LEN']} "
     f"letters sampled with seed {e['SEED']} (A, C, G, T only, within a record).\n",
     f"Command: `scripts/bench-query.sh {e['ARGS']}`. Each figure: the best wall time of {e['REPS']} "
     "interleaved runs, opening or loading the index included; peak memory: the largest "
     "`ru_maxrss` of those runs (psa maps its SA and T: their pages count once touched). Locate: "
     f"`--locate --max-hits {e['MAXHITS']}` (genedex: each read's count and its first "
     f"{e['MAXHITS']} hits). Counts agree: every run's counts (warm-up included) are the same.\n",
     f"The new psa's search level beside the SA (`new.sa.top`, built by its warm-up run, mapped by "
     f"the timed ones): {int(e['TOP_BYTES']):,} bytes, {100 * int(e['TOP_BYTES']) / int(e['SA_BYTES']):.2f} % "
     f"of the SA's {int(e['SA_BYTES']):,}.\n"]
for n in sorted({r[0] for r in rows}, key=int):
    L += [f'## {int(n):,} reads\n',
          '| tool | mode | threads | wall (s) | patterns/s | per thread | peak memory (MB) | counts agree |',
          '|---|---|---|---|---|---|---|---|']
    for mode in ('count', 'locate'):
        for th in sorted({r[4] for r in rows}, key=int):
            agree = 'yes' if len(sums[(n, mode, th)]) == 1 else 'NO'
            for tool in ('base', 'new', 'genedex'):
                w = best.get((n, tool, mode, th))
                if w is None:
                    continue
                rate = int(n) / max(w, 0.005)
                L.append(f'| {names[tool]} | {mode} | {th} | {w:.2f} | {rate:,.0f} | '
                         f'{rate / int(th):,.0f} | {peak[(n, tool, mode, th)] / 1024:.0f} | {agree} |')
    L.append('')
L += ['## Every run\n', '| reads | run | tool | mode | threads | wall (s) | peak (MB) | counts (md5) |',
      '|---|---|---|---|---|---|---|---|']
for n, rep, tool, mode, th, wall, kb, md5 in rows:
    shown = rep if rep != '0' else 'warm-up'
    L.append(f'| {n} | {shown} | {tool} | {mode} | {th} | {wall} | {int(kb) / 1024:.0f} | `{md5}` |')
open(out, 'w').write('\n'.join(L) + '\n')
EOF
say "wrote $OUTMD"
