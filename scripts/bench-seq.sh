#!/usr/bin/env bash
# scripts/bench-seq.sh — building from a gzip FASTA against building from its cleaned text, and
# psa query's throughput (counts and locates) on reads sampled from the text.
#
#   scripts/bench-seq.sh [options] FASTA_GZ CLEANED_TXT
#
# FASTA_GZ is a FASTA as it ships (e.g. hs37chrXtrunc.fa.gz from the smalt-examples package, the
# source of scripts/corpora.sh's dna corpus); CLEANED_TXT is its text cleaned by hand (the dna
# corpus: headers and line breaks removed, upper-cased), so the two builds index the same
# characters (T has one '$' more). Needs no network: both files are given.
#
# Runs, in this order, each --reps times (the table gives the median of the wall-clock times):
#   1. mpirun -n P psa FASTA_GZ      (the index: OUT, OUT.text, OUT.records.tsv, OUT.meta)
#      and mpirun -n P psa FILE for every --also FILE (the same FASTA in another form)
#   2. mpirun -n P psa CLEANED_TXT
#   3. psa query OUT --patterns READS            (counts)
#   4. psa query OUT --patterns READS --locate --max-hits K
# READS: --reads reads of --len characters sampled (seeded) from OUT.text, one a line.
#
# Options:
#   --procs P        pes of the builds [16]
#   --also FILE      also build FILE, the same FASTA another way (plain, or bgzip's BGZF: read by
#                    every pe where FASTA_GZ is a plain gzip, streamed by pe 0); repeatable
#   --threads T      threads per pe of the builds [cores / P, at least 1]
#   --query-threads Q  threads of psa query [all cores]
#   --reads N        reads to sample [1000000]
#   --len L          read length [100]
#   --max-hits K     locations reported per read with --locate [10]
#   --reps R         runs of each step [3]
#   --work DIR       where the index and reads go [bench-seq-work]
#   --results DIR    where the report goes [bench-results]
#   --name NAME      report base name [<date>-<host>-<commit>-seq]
#   --psa PATH       the psa binary [target/release/psa]
#   --mpirun "CMD"   launcher prefix [mpirun --bind-to none]
#
# Writes RESULTS/NAME.md (the table, the commands, the host) and RESULTS/NAME-stats/ (each
# build's --stats JSON).
set -euo pipefail

PROCS=16 THREADS="" QTHREADS="" READS=1000000 LEN=100 MAXHITS=10 REPS=3
WORK=bench-seq-work RESULTS=bench-results NAME="" PSA=target/release/psa
MPIRUN="mpirun --bind-to none"
args=() also=()
while (($#)); do
  case $1 in
    --procs) PROCS=$2; shift 2 ;;
    --also) also+=("$(realpath "$2")"); shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --query-threads) QTHREADS=$2; shift 2 ;;
    --reads) READS=$2; shift 2 ;;
    --len) LEN=$2; shift 2 ;;
    --max-hits) MAXHITS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --psa) PSA=$2; shift 2 ;;
    --mpirun) MPIRUN=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench-seq: unknown option $1" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if ((${#args[@]} != 2)); then
  echo "usage: scripts/bench-seq.sh [options] FASTA_GZ CLEANED_TXT (see --help)" >&2
  exit 2
fi
FA=$(realpath "${args[0]}") TXT=$(realpath "${args[1]}")
PSA=$(realpath "$PSA")
CORES=$(nproc)
[[ -n $THREADS ]] || THREADS=$(( CORES / PROCS > 0 ? CORES / PROCS : 1 ))
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
HOST=$(hostname -s)
[[ -n $NAME ]] || NAME="$(date +%F)-$HOST-$COMMIT-seq"
mkdir -p "$WORK" "$RESULTS/$NAME-stats"
WORK=$(realpath "$WORK")
QT=()
[[ -z $QTHREADS ]] || QT=(--threads "$QTHREADS")

now() { date +%s.%N; }
# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# time_runs LABEL CMD...: runs CMD REPS times, prints the median seconds.
time_runs() {
  local label=$1; shift
  local times=()
  for ((r = 1; r <= REPS; r++)); do
    local t0 t1
    t0=$(now)
    "$@" >"$WORK/$label.out" 2>"$WORK/$label.err" || {
      echo "bench-seq: $label failed (run $r):" >&2; tail -20 "$WORK/$label.err" >&2; exit 1; }
    t1=$(now)
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')")
  done
  printf '%s\n' "${times[@]}" | median
}

echo "bench-seq: building from $FA at p=$PROCS × $THREADS threads" >&2
t_fa=$(time_runs build-fa $MPIRUN -n "$PROCS" "$PSA" --threads "$THREADS" -q -o "$WORK/fa.sa" \
  --stats "$RESULTS/$NAME-stats/build-fa.json" "$FA")
t_also=()
for ((k = 0; k < ${#also[@]}; k++)); do
  echo "bench-seq: building from ${also[k]}" >&2
  t_also+=("$(time_runs "build-also$k" $MPIRUN -n "$PROCS" "$PSA" --threads "$THREADS" -q \
    -o "$WORK/also$k.sa" --stats "$RESULTS/$NAME-stats/build-also$k.json" "${also[k]}")")
  cmp -s "$WORK/also$k.sa" "$WORK/fa.sa" || { echo "bench-seq: ${also[k]} gave another SA" >&2; exit 1; }
done
echo "bench-seq: building from $TXT" >&2
t_txt=$(time_runs build-txt $MPIRUN -n "$PROCS" "$PSA" --threads "$THREADS" -q -o "$WORK/txt.sa" \
  --stats "$RESULTS/$NAME-stats/build-txt.json" "$TXT")
n_fa=$(stat -c %s "$WORK/fa.sa.text")
n_txt=$(stat -c %s "$TXT")

echo "bench-seq: sampling $READS reads of $LEN from the text" >&2
python3 - "$WORK/fa.sa.text" "$WORK/reads.txt" "$READS" "$LEN" <<'EOF'
import random, sys
text, out, reads, length = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t = open(text, "rb").read()
rng = random.Random(1)
with open(out, "wb") as f:
    k = 0
    while k < reads:
        i = rng.randrange(0, max(1, len(t) - length))
        r = t[i:i + length]
        if b"$" in r or len(r) < length:
            continue
        f.write(r + b"\n")
        k += 1
EOF
echo "bench-seq: psa query (counts, then --locate)" >&2
t_count=$(time_runs query-count "$PSA" query "${QT[@]}" "$WORK/fa.sa" --patterns "$WORK/reads.txt")
t_locate=$(time_runs query-locate "$PSA" query "${QT[@]}" "$WORK/fa.sa" --patterns "$WORK/reads.txt" \
  --locate --max-hits "$MAXHITS")
found=$(awk -F'\t' 'NF == 2 && $2 > 0' "$WORK/query-count.out" | wc -l)

# reading: the "scan" and "read" phases' seconds (slowest pe) in a build's --stats
reading() {
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print("%.3f" % sum(p["max_secs"] for p in s["phases"] if p["name"] in ("scan", "read")))' "$1"
}
rate() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f", a / b}'; }
mbs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / 1e6 / b}'; }
{
  echo "# Sequence input and queries — $HOST, commit $COMMIT, $(date +%F)"
  echo
  echo "Builds at p = $PROCS × $THREADS threads ($MPIRUN), median of $REPS runs (wall clock, launch"
  echo "included); queries with psa query on $([[ -n $QTHREADS ]] && echo "$QTHREADS threads" || echo "all $CORES cores")."
  echo
  echo "| step | input | characters | seconds | rate | reading s (last run) |"
  echo "|---|---|---:|---:|---:|---:|"
  echo "| build | $(basename "$FA") (gzip FASTA) | $n_fa | $t_fa | $(mbs "$n_fa" "$t_fa") MB/s | $(reading "$RESULTS/$NAME-stats/build-fa.json") |"
  for ((k = 0; k < ${#also[@]}; k++)); do
    echo "| build | $(basename "${also[k]}") (the same FASTA) | $n_fa | ${t_also[k]} | $(mbs "$n_fa" "${t_also[k]}") MB/s | $(reading "$RESULTS/$NAME-stats/build-also$k.json") |"
  done
  echo "| build | $(basename "$TXT") (cleaned text) | $n_txt | $t_txt | $(mbs "$n_txt" "$t_txt") MB/s | $(reading "$RESULTS/$NAME-stats/build-txt.json") |"
  echo "| query counts | $READS reads × $LEN | | $t_count | $(rate "$READS" "$t_count") patterns/s | |"
  echo "| query --locate --max-hits $MAXHITS | $READS reads × $LEN | | $t_locate | $(rate "$READS" "$t_locate") patterns/s | |"
  echo
  echo "$found of $READS reads found (they are sampled from T, so all should be)."
  echo "Per-phase times of the builds: $NAME-stats/build-*.json. Reading is their \"scan\" and"
  echo "\"read\" phases (decompressing, parsing, placing T), slowest pe; the builds of every form of"
  echo "the FASTA gave the same SA."
  echo
  echo "Commands: \`scripts/bench-seq.sh --procs $PROCS --threads $THREADS --reads $READS --len $LEN --max-hits $MAXHITS --reps $REPS$(for f in "${also[@]}"; do printf ' --also %s' "$(basename "$f")"; done) $(basename "$FA") $(basename "$TXT")\`"
} >"$RESULTS/$NAME.md"
cat "$RESULTS/$NAME.md"
