#!/usr/bin/env bash
# scripts/bench-infini-gram.sh — same-run benchmark of `psa --infini-gram` against infini-gram's
# own indexer on one u16 shard of real text (issue 65).
#
#   scripts/bench-infini-gram.sh [--pes P] [--mb N] [--reps R] [--psa BIN] [--work DIR]
#                                [--label NAME] [--out FILE.md] [--keep] [--python PY]
#                                [--copies C [--rate R]] CORPUS...
#
# 1. Tokenizes the text corpora (with --mb N the first N MB, 10^6 bytes, of each) into one
#    shard, DIR/index/tokenized.0 and offset.0, by scripts/tokenize-u16.py (word-level, u16).
#    With --copies C, the shard then becomes C copies of itself, each but the first with a
#    fraction R of its tokens substituted (scripts/token-copies.py; default R = 0.005): a shard
#    larger than the real text at hand, with near-duplicate documents as in a crawl.
# 2. Then R times (default 3), interleaved, the order alternating:
#    (a) `mpirun -n P --bind-to none psa --infini-gram --token-width 2 --force DIR/psa`, each pe
#        under `/usr/bin/time` (the sum of the pes' peak memory);
#    (b) `python -m infini_gram.indexing … --token_dtype u16 --cpus P --mem M` in DIR/ig (its
#        own indexer, `rust_indexing`, at the same core count; M = the machine's RAM in GiB;
#        its table.0 is removed before each run, since it skips a shard that has one);
#    each under `/usr/bin/time -v` and scripts/bench_infini_gram.py's sampler (the peak of the
#    resident memory summed over the process tree, every 50 ms). Both read the same shard
#    (hard links).
# 3. Compares the last runs' table.0 byte for byte; where they differ, judges the first
#    differing entries by their suffixes and runs `psa --check` once (not timed).
# 4. Writes the report, bench-results/DATE-LABEL-COMMIT-infini-gram.md (or --out): the machine,
#    the commit, the commands, the tokens, the median wall time and peak memory (total over
#    processes, bytes per token) of both, psa / indexer, the verdict, and every run; the runs'
#    JSON lines beside it (…-runs.jsonl).
#
# Options: --pes P [nproc]  --mb N [whole corpora]  --reps R [3]  --psa BIN [target/ci/psa]
#          --work DIR [.bench-tmp/infini-gram, emptied]  --label NAME [local]  --keep (keep
#          DIR's shard and tables; by default they are removed at the end)
#          --python PY (a python3 that imports infini_gram.indexing and numpy, for a host
#          without network: no venv is made)  --copies C [1]  --rate R [0.005].
# Environment: PSA_COMMIT names the commit of --psa in the report where the binary was built
# elsewhere (default: this checkout's HEAD), PSA_PROFILE its Cargo profile (default: ci).
#
# Needs: mpirun (Open MPI), /usr/bin/time (GNU time), python3 with venv and network to PyPI the
# first time (infini-gram 2.6.0 and numpy are installed into target/infini-gram-venv, as
# scripts/infini-gram-check.sh does), and disk for the shard and two tables (about 7 bytes per
# token).
set -euo pipefail
cd "$(dirname "$0")/.."
# Open MPI refuses root without these (harmless otherwise); oversubscribe for P above the cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

P=$(nproc) MB="" REPS=3 PSA=target/ci/psa WORK=.bench-tmp/infini-gram LABEL=local OUTMD="" KEEP=0
CORPORA=() PY="" COPIES=1 RATE=0.005
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pes) P=$2; shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --psa) PSA=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --label) LABEL=$2; shift 2 ;;
    --out) OUTMD=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --python) PY=$2; shift 2 ;;
    --copies) COPIES=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bench-infini-gram.sh: unknown option $1" >&2; exit 2 ;;
    *) CORPORA+=("$1"); shift ;;
  esac
done
[[ ${#CORPORA[@]} -gt 0 ]] || { echo "bench-infini-gram.sh: need text corpora (--help)" >&2; exit 2; }
[[ -x "$PSA" ]] || { echo "bench-infini-gram.sh: no psa binary at '$PSA' (cargo build --profile ci)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench-infini-gram.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "bench-infini-gram.sh: needs mpirun (Open MPI)" >&2; exit 2; }
for c in "${CORPORA[@]}"; do [[ -f "$c" ]] || { echo "bench-infini-gram.sh: no corpus '$c'" >&2; exit 2; }; done

log() { echo "bench-infini-gram.sh: $*" >&2; }

if [[ -n "$PY" ]]; then
  "$PY" -c 'import infini_gram.indexing, numpy' ||
    { echo "bench-infini-gram.sh: '$PY' cannot import infini_gram.indexing and numpy" >&2; exit 2; }
  py=$(command -v "$PY")
else
  venv=target/infini-gram-venv
  if ! "$venv/bin/python" -c 'import infini_gram.engine, numpy' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'infini-gram==2.6.0' numpy
  fi
  py=$(cd "$venv/bin" && pwd)/python
fi
helper="$py scripts/bench_infini_gram.py"

# The commit of the psa measured: $PSA_COMMIT where the binary was built elsewhere (a host
# without the repository's history), else the checkout's HEAD.
if [[ -n "${PSA_COMMIT:-}" ]]; then
  commit=$PSA_COMMIT
else
  commit=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- src Cargo.toml Cargo.lock || commit="$commit+dirty"
fi
date=$(date -u +%F)
[[ -n "$OUTMD" ]] || OUTMD=bench-results/$date-$LABEL-$commit-infini-gram.md
PSA=$(cd "$(dirname "$PSA")" && pwd)/$(basename "$PSA")
rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
mem_gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
[[ $mem_gib -ge 1 ]] || mem_gib=1
nofile=$(ulimit -Hn)
[[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576

# ---- 1. the shard ----------------------------------------------------------------------------
log "tokenizing ${CORPORA[*]}${MB:+ (the first $MB MB of each)}"
t0=$(date +%s.%N)
stats=$("$py" scripts/tokenize-u16.py ${MB:+--mb "$MB"} "$WORK/index" "${CORPORA[@]}" | tail -n1)
tokenize_s=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.0f}')" "$t0" "$(date +%s.%N)")
log "$stats"
val() { sed -n "s/.*\\b$1=\\([0-9]*\\).*/\\1/p" <<<"$stats"; }
tokens=$(val tokens) documents=$(val documents) unk=$(val unk)
copies_desc=""
if [[ $COPIES -gt 1 ]]; then
  log "growing the shard to $COPIES copies (rate $RATE)"
  "$py" scripts/token-copies.py "$WORK/index" --copies "$COPIES" --rate "$RATE" >&2
  copies_desc="; then $COPIES copies of that shard by \`scripts/token-copies.py --copies $COPIES --rate $RATE\` (each copy but the first with a fraction $RATE of its tokens substituted): $((tokens * COPIES)) tokens"
  tokens=$((tokens * COPIES)) documents=$((documents * COPIES)) unk=$((unk * COPIES))
fi
mkdir -p "$WORK/psa" "$WORK/ig/data"
for f in tokenized.0 offset.0; do
  ln "$WORK/index/$f" "$WORK/psa/$f"
  ln "$WORK/index/$f" "$WORK/ig/$f"
done

# ---- 2. the runs -----------------------------------------------------------------------------
ig_cmd=("$py" -m infini_gram.indexing --data_dir "$WORK/ig/data" --save_dir "$WORK/ig"
        --token_dtype u16 --cpus "$P" --mem "$mem_gib" --ulimit "$nofile")
runs=$WORK/runs.jsonl
: >"$runs"

run_psa() {
  local rep=$1
  : >"$WORK/pe-times.$rep"
  $helper measure --runs "$runs" --tool psa --rep "$rep" --log "$WORK/psa.$rep.log" \
    --time-v "$WORK/time-v.psa.$rep" --pe-times "$WORK/pe-times.$rep" -- \
    /usr/bin/time -v -o "$WORK/time-v.psa.$rep" \
    mpirun -n "$P" --bind-to none /usr/bin/time -a -o "$WORK/pe-times.$rep" -f "%M %e" \
    "$PSA" --infini-gram --token-width 2 --force "$WORK/psa" >&2
}

run_ig() {
  local rep=$1
  rm -f "$WORK/ig/table.0"
  $helper measure --runs "$runs" --tool indexer --rep "$rep" --log "$WORK/ig.$rep.log" \
    --time-v "$WORK/time-v.ig.$rep" -- /usr/bin/time -v -o "$WORK/time-v.ig.$rep" "${ig_cmd[@]}" >&2
  if grep -q "Something went wrong" "$WORK/ig.$rep.log"; then
    log "the indexer failed (run $rep): $(tail -n 5 "$WORK/ig.$rep.log")"
  fi
}

order=()
for rep in $(seq 1 "$REPS"); do
  if (( rep % 2 )); then
    log "run $rep: psa, then the indexer"; run_psa "$rep"; run_ig "$rep"; order+=("psa, indexer")
  else
    log "run $rep: the indexer, then psa"; run_ig "$rep"; run_psa "$rep"; order+=("indexer, psa")
  fi
done

# ---- 3. the tables ---------------------------------------------------------------------------
$helper compare --tokens "$WORK/index/tokenized.0" --out "$WORK/compare.json" \
  "$WORK/psa/table.0" "$WORK/ig/table.0" >&2
psa_check=""
if ! grep -q '"equal": true' "$WORK/compare.json"; then
  log "the tables differ: psa --check on the shard (not timed)"
  if mpirun -n "$P" --bind-to none "$PSA" --infini-gram --token-width 2 --force --check \
      "$WORK/psa" >"$WORK/psa-check.log" 2>&1; then
    psa_check="passed (the distributed checker verified psa's table)"
  else
    psa_check="FAILED: $(tail -n 3 "$WORK/psa-check.log" | tr '\n' ' ')"
  fi
fi

# ---- 4. the report ---------------------------------------------------------------------------
corpora_desc=""
for c in "${CORPORA[@]}"; do
  size=$(stat -c %s "$c")
  used=$size
  [[ -z "$MB" ]] || (( MB * 1000000 >= size )) || used=$((MB * 1000000))
  corpora_desc+="${corpora_desc:+, }\`$(basename "$c")\` ($used of $size bytes)"
done
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)
mem=$(awk '/^MemTotal:/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
os_desc=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME" || uname -sr)
mpi=$(mpirun --version 2>&1 | head -n1)
ig_version=$("$py" -c 'import importlib.metadata as m; print(m.version("infini-gram"))')
pyver=$("$py" -c 'import platform; print(platform.python_version())')
mkdir -p "$(dirname "$OUTMD")"
shown_psa=${PSA#"$PWD"/}
shown_work=${WORK#"$PWD"/}
$helper report --runs "$runs" --compare "$WORK/compare.json" --out "$OUTMD" \
  --meta "date=$date" --meta "label=$LABEL" --meta "nproc=$(nproc)" --meta "cpu=$cpu" \
  --meta "mem=$mem" --meta "os=$os_desc" --meta "commit=$commit" --meta "psa=$shown_psa" \
  --meta "mpi=$mpi" --meta "profile=${PSA_PROFILE:-ci}" --meta "ig_version=$ig_version" --meta "python=$pyver" \
  --meta "corpora=$corpora_desc$copies_desc" --meta "tokens=$tokens" --meta "documents=$documents" \
  --meta "unk=$unk" --meta "tokenize_s=$tokenize_s" --meta "reps=$REPS" \
  --meta "order=$(IFS=';'; echo "${order[*]}" | sed 's/;/; /g')" \
  --meta "psa_cmd=mpirun -n $P --bind-to none /usr/bin/time -a -o PE-TIMES -f '%M %e' $shown_psa --infini-gram --token-width 2 --force $shown_work/psa" \
  --meta "ig_cmd=python -m infini_gram.indexing --data_dir $shown_work/ig/data --save_dir $shown_work/ig --token_dtype u16 --cpus $P --mem $mem_gib --ulimit $nofile" \
  --meta "psa_check=$psa_check" >/dev/null
cp "$runs" "${OUTMD%.md}-runs.jsonl"
log "report: $OUTMD"
cat "$OUTMD"

if [[ $KEEP == 0 ]]; then
  rm -rf "$WORK/index" "$WORK/psa" "$WORK/ig"
fi
