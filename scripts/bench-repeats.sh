#!/usr/bin/env bash
# scripts/bench-repeats.sh — same-run benchmark of `psa repeats` against deduplicate-text-datasets
# (google-research) on the same bytes: the peer's `make` (its suffix array) + `self-similar
# --length-threshold K --num-threads P` + `collect`, and `mpirun -n P psa repeats --min-len K`.
#
#   scripts/bench-repeats.sh [--pes P] [--mb N] [--k K] [--reps R] [--psa BIN] [--work DIR]
#                            [--label NAME] [--out FILE.md] CORPUS
#
# CORPUS (with --mb N its first N MB, 10^6 bytes) is copied to DIR/text.bin. R times (default
# 1), the peer's three steps each under `/usr/bin/time -v` (its time: their sum; its peak: the
# largest of the three, each one process) and psa with every pe under `/usr/bin/time -v` (its
# peak: the sum over the pes; its time: mpirun's wall time). The last runs' spans are compared
# (the peer's "b e" lines after "out" against psa's "b<TAB>e"). Writes
# bench-results/DATE-LABEL-COMMIT-repeats.md (or --out): machine, commit, commands, times,
# peaks, ratios, the verdict on the spans and every run.
#
# Options: --pes P [2]  --mb N [whole corpus]  --k K [100]  --reps R [1]  --psa BIN
#          [target/ci/psa]  --work DIR [.bench-tmp/repeats, emptied]  --label NAME [local].
# The peer: DEDUP_DIR (a checkout, or an exported tree with its commit in DEDUP_DIR/REVISION;
# else cloned into target/dedup-text-datasets), built with `cargo build --release`. Needs mpirun (Open MPI), GNU time at /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

P=2 MB="" K=100 REPS=1 PSA=target/ci/psa WORK=.bench-tmp/repeats LABEL=local OUTMD="" CORPUS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pes) P=$2; shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    --k) K=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --psa) PSA=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --label) LABEL=$2; shift 2 ;;
    --out) OUTMD=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bench-repeats.sh: unknown option $1" >&2; exit 2 ;;
    *) CORPUS=$1; shift ;;
  esac
done
[[ -n "$CORPUS" ]] || { echo "bench-repeats.sh: need a corpus (--help)" >&2; exit 2; }
[[ -x "$PSA" ]] || { echo "bench-repeats.sh: no psa binary at '$PSA'" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench-repeats.sh: needs GNU time at /usr/bin/time" >&2; exit 2; }

peer_dir=${DEDUP_DIR:-target/dedup-text-datasets}
if [[ ! -f "$peer_dir/Cargo.toml" ]]; then
  git clone --quiet https://github.com/google-research/deduplicate-text-datasets "$peer_dir"
fi
(cd "$peer_dir" && cargo build --release --quiet 2>/dev/null || cargo build --release)
peer=$(realpath "$peer_dir/target/release/dedup_dataset")
psa=$(realpath "$PSA")
rm -rf "$WORK"
mkdir -p "$WORK"
work=$(realpath "$WORK")
text=$work/text.bin
if [[ -n "$MB" ]]; then head -c "$((MB * 1000000))" "$CORPUS" >"$text"; else cp "$CORPUS" "$text"; fi
n=$(stat -c %s "$text")

# GNU time's fields from a -v report: wall seconds and peak RSS in KiB.
wall() { awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
  for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$1"; }
rss() { awk -F': ' '/Maximum resident set size/ { print $2 }' "$1"; }

runs=()
for rep in $(seq 1 "$REPS"); do
  rm -rf "$work/cache" "$text.table.bin"
  /usr/bin/time -v -o "$work/make.time" "$peer" make --data-file "$text" >/dev/null
  /usr/bin/time -v -o "$work/ss.time" "$peer" self-similar --data-file "$text" \
    --length-threshold "$K" --cache-dir "$work/cache" --num-threads "$P" >/dev/null
  /usr/bin/time -v -o "$work/collect.time" "$peer" collect --data-file "$text" \
    --cache-dir "$work/cache" --length-threshold "$K" >"$work/collect.out"
  peer_s=$(echo "$(wall "$work/make.time") + $(wall "$work/ss.time") + $(wall "$work/collect.time")" | bc)
  peer_kb=$(printf '%s\n' "$(rss "$work/make.time")" "$(rss "$work/ss.time")" "$(rss "$work/collect.time")" | sort -n | tail -1)
  rm -f "$work"/psa.time.*
  t0=$(date +%s.%N)
  mpirun -n "$P" --bind-to none sh -c \
    "exec /usr/bin/time -v -o $work/psa.time.\$OMPI_COMM_WORLD_RANK $psa repeats -q --min-len $K -o $work/spans.tsv $text"
  psa_s=$(echo "$(date +%s.%N) - $t0" | bc)
  psa_kb=$(cat "$work"/psa.time.* | awk -F': ' '/Maximum resident set size/ { s += $2 } END { print s }')
  line="rep $rep: peer $(printf %.2f "$peer_s") s (make $(wall "$work/make.time"), self-similar $(wall "$work/ss.time"), collect $(wall "$work/collect.time")), peak $((peer_kb / 1024)) MiB; psa $(printf %.2f "$psa_s") s, peak $((psa_kb / 1024)) MiB (sum over $P pes)"
  echo "$line"
  runs+=("$line")
done

awk 'go && NF == 2 { print $1 "\t" $2 } /^out$/ { go = 1 }' "$work/collect.out" >"$work/peer.tsv"
if cmp -s "$work/peer.tsv" "$work/spans.tsv"; then
  verdict="equal ($(wc -l <"$work/spans.tsv") spans)"
else
  verdict="different (peer $(wc -l <"$work/peer.tsv") spans, psa $(wc -l <"$work/spans.tsv")): $(diff "$work/peer.tsv" "$work/spans.tsv" | head -4 | tr '\n' ' ')"
fi
echo "spans: $verdict"

commit=$(git rev-parse --short HEAD)
# The peer's commit: its checkout's, or a REVISION file in DEDUP_DIR (an exported tree).
if [[ -e "$peer_dir/.git" ]]; then peer_rev=$(git -C "$peer_dir" rev-parse --short HEAD)
else peer_rev=$(cat "$peer_dir/REVISION" 2>/dev/null || echo '(unknown commit)'); fi
out=${OUTMD:-bench-results/$(date +%Y-%m-%d)-$LABEL-$commit-repeats.md}
cpu=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
{
  echo "# psa repeats against deduplicate-text-datasets — $LABEL, commit $commit"
  echo
  echo "- machine: $(hostname), $(nproc) cores ($cpu), $(free -g | awk '/Mem:/ { print $2 }') GiB"
  echo "- corpus: $(basename "$CORPUS")${MB:+, first $MB MB}: $n bytes; K = $K; P = $P (pes of psa, threads of self-similar)"
  echo "- peer: deduplicate-text-datasets $peer_rev, \`make --data-file\`, \`self-similar --length-threshold $K --num-threads $P\`, \`collect\`"
  echo "- psa: \`mpirun -n $P --bind-to none psa repeats --min-len $K -o spans.tsv text.bin\`"
  echo "- peaks: GNU time's maximum resident set size (peer: the largest of its three steps; psa: the sum over pes)"
  echo
  echo "## Runs"
  echo
  for r in "${runs[@]}"; do echo "- $r"; done
  echo
  echo "## Last run"
  echo
  echo "| | time s | peak MiB |"
  echo "|---|---|---|"
  echo "| peer | $(printf %.2f "$peer_s") | $((peer_kb / 1024)) |"
  echo "| psa repeats | $(printf %.2f "$psa_s") | $((psa_kb / 1024)) |"
  echo "| psa / peer | $(echo "scale=2; $psa_s / $peer_s" | bc) | $(echo "scale=2; $psa_kb / $peer_kb" | bc) |"
  echo
  echo "Spans: $verdict."
} >"$out"
echo "wrote $out"
