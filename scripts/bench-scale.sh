#!/usr/bin/env bash
# scripts/bench-scale.sh — one large text on one node: psa at p pes against libsais' 64-bit path,
# with a byte comparison of the two suffix arrays.
#
# Build here (`cargo build --release --example sais-baseline`, `target/release/psa`), copy both
# binaries and a DNA source (e.g. corpora/dna.txt from scripts/corpora.sh) to the node, and run
# from the repository root there. The work is split into stages, each one command that keeps its
# files in --dir, so that a long run can be done as several shorter commands:
#
#   scripts/bench-scale.sh gen       --source dna.txt --copies 65 --dir D   # D/text (seeded, pangenome.py)
#   scripts/bench-scale.sh baseline  --baseline BIN --dir D --out R        # libsais, D/libsais.sa
#   scripts/bench-scale.sh psa       --psa BIN --dir D --out R [-- ARGS]   # mpirun -n P psa ARGS, D/psa.sa
#   scripts/bench-scale.sh start-psa …same as psa…                          # the same, detached (setsid)
#   scripts/bench-scale.sh wait      --dir D --out R [--max-s S]           # waits for a detached run
#   scripts/bench-scale.sh compare   --dir D --out R                       # cmp of the two SAs
#
# Every stage appends one JSON line to R/scale-runs.jsonl (the stage, its command, seconds, exit
# status; for psa its --stats report, for libsais its own JSON line) and its log to R/.
# Defaults: --p 16, --width 5 (psa and libsais write 5-byte entries), --threads 16 for libsais,
# psa's arguments after `--` (e.g. `-- --algo css --check`). The SA files are n × width bytes
# each: the disk needs about (1 + 2 × width) bytes per character.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "bench-scale.sh: error: $*" >&2; exit 2; }

[[ $# -ge 1 ]] || die "a stage: gen, baseline, psa, start-psa, wait or compare (see the top of this script)"
STAGE=$1; shift
SOURCE=""; COPIES=65; DIR=""; OUTDIR=""; PSA=""; BASELINE=""; P=16; WIDTH=5; THREADS=16; MAXS=590
RATE=0.001; SEED=1; PSA_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source) SOURCE=$2; shift 2 ;;
    --copies) COPIES=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --psa) PSA=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    --p) P=$2; shift 2 ;;
    --width) WIDTH=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --max-s) MAXS=$2; shift 2 ;;
    --) shift; PSA_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ -n "$DIR" ]] || die "--dir is required"
mkdir -p "$DIR"
if [[ "$STAGE" != gen ]]; then
  [[ -n "$OUTDIR" ]] || die "--out is required"
  mkdir -p "$OUTDIR"
fi
TEXT=$DIR/text
export OMP_WAIT_POLICY=passive

# Seconds since $1 (a `date +%s.%N` stamp).
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }

# record STAGE SECS RC [JSON_FILE]: one line of scale-runs.jsonl (the file's JSON as "result").
record() {
  python3 - "$OUTDIR/scale-runs.jsonl" "$1" "$2" "$3" "${4:-}" "$(hostname)" "$(nproc)" <<'EOF'
import json, sys
path, stage, secs, rc, extra, host, cores = sys.argv[1:]
line = {"stage": stage, "secs": float(secs or 0), "rc": int(rc), "host": host, "cores": int(cores)}
try:
    line["result"] = json.load(open(extra)) if extra else None
except (OSError, ValueError) as e:
    line["result_error"] = str(e)
with open(path, "a") as f:
    f.write(json.dumps(line) + "\n")
EOF
}

# psa's command line, in CMD.
psa_cmd() {
  [[ -n "$PSA" ]] || die "--psa is required"
  CMD=(mpirun -n "$P" --bind-to core "$PSA" --width "$WIDTH" --stats "$DIR/psa-stats.json"
    -v "${PSA_ARGS[@]}" -o "$DIR/psa.sa" "$TEXT")
}

case "$STAGE" in
  gen)
    [[ -n "$SOURCE" ]] || die "--source is required"
    t0=$(date +%s.%N)
    python3 "$HERE/pangenome.py" "$SOURCE" "$TEXT" --copies "$COPIES" --rate "$RATE" --seed "$SEED"
    echo "bench-scale.sh: $(stat -c %s "$TEXT") characters in $TEXT ($(since "$t0") s)"
    ;;
  baseline)
    [[ -n "$BASELINE" ]] || die "--baseline is required"
    rm -f "$DIR/libsais.sa"
    t0=$(date +%s.%N); set +e
    "$BASELINE" --threads "$THREADS" --width "$WIDTH" -o "$DIR/libsais.sa" "$TEXT" \
      >"$OUTDIR/baseline.json" 2>"$OUTDIR/baseline.log"
    rc=$?; set -e
    record baseline "$(since "$t0")" $rc "$OUTDIR/baseline.json"
    cat "$OUTDIR/baseline.json"; exit $rc
    ;;
  psa)
    rm -f "$DIR/psa.sa" "$DIR/psa-stats.json"
    psa_cmd
    t0=$(date +%s.%N); set +e
    "${CMD[@]}" >"$OUTDIR/psa.log" 2>&1
    rc=$?; set -e
    record psa "$(since "$t0")" $rc "$DIR/psa-stats.json"
    tail -n 5 "$OUTDIR/psa.log"; exit $rc
    ;;
  start-psa)
    rm -f "$DIR/psa.sa" "$DIR/psa-stats.json" "$DIR/psa.rc"
    psa_cmd
    cmd=$(printf '%q ' "${CMD[@]}")
    # Detached from this shell: the run survives the command that started it.
    setsid bash -c "t0=\$(date +%s); $cmd >'$OUTDIR/psa.log' 2>&1; rc=\$?; \
      echo \"\$rc \$(( \$(date +%s) - t0 ))\" > '$DIR/psa.rc'" </dev/null >/dev/null 2>&1 &
    echo "bench-scale.sh: started: $cmd"
    ;;
  wait)
    end=$(( $(date +%s) + MAXS ))
    while [[ ! -s "$DIR/psa.rc" && $(date +%s) -lt $end ]]; do sleep 5; done
    if [[ ! -s "$DIR/psa.rc" ]]; then
      echo "bench-scale.sh: still running after ${MAXS} s"; tail -n 3 "$OUTDIR/psa.log" 2>/dev/null; exit 3
    fi
    read -r rc secs <"$DIR/psa.rc"
    record psa "$secs" "$rc" "$DIR/psa-stats.json"
    tail -n 5 "$OUTDIR/psa.log"; exit "$rc"
    ;;
  compare)
    t0=$(date +%s.%N); set +e
    cmp "$DIR/libsais.sa" "$DIR/psa.sa" >"$OUTDIR/compare.log" 2>&1
    rc=$?; set -e
    sizes="{\"libsais_bytes\": $(stat -c %s "$DIR/libsais.sa"), \"psa_bytes\": $(stat -c %s "$DIR/psa.sa"), \"identical\": $([[ $rc == 0 ]] && echo true || echo false)}"
    echo "$sizes" >"$OUTDIR/compare.json"
    record compare "$(since "$t0")" $rc "$OUTDIR/compare.json"
    echo "bench-scale.sh: $sizes"; exit $rc
    ;;
  *) die "unknown stage '$STAGE'" ;;
esac
