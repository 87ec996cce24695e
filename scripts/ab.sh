#!/usr/bin/env bash
# scripts/ab.sh — same-run A/B of two psa binaries: interleaved runs, medians, ratios.
#
#   scripts/ab.sh --a BIN --b BIN [--p P] [--reps N] [--algos "css dc3"] [--out FILE.md]
#                 [--psa-args "…"] INPUT...
#
# For every input and algorithm it runs `mpirun -n P --bind-to core psa --algo ALGO --stats …
# INPUT` with binary A, then B, then A, … (N times each, interleaved so that drift of the
# machine affects both alike), and reports per configuration the median of psa's own time (its
# --stats total: from the start of the run to the output in place, after MPI's start-up), the
# median wall time of the whole mpirun (MPI's start-up and exit included: the measure of
# scripts' peers' `wall_s`) and the median bytes per character (peak resident memory summed over
# pes / n) of each, and B over A.
# The first outputs of both are compared byte for byte (a mismatch is a FAIL row). The report
# goes to stdout and, with --out, to FILE.md.
#
# Needs: mpirun (Open MPI), python3 (stdlib).
set -euo pipefail
# Open MPI refuses root without these (harmless otherwise).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

A="" B="" P=16 REPS=3 ALGOS="css dc3" OUTMD="" PSA_ARGS=""
INPUTS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --a) A=$2; shift 2 ;;
    --b) B=$2; shift 2 ;;
    --p) P=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --algos) ALGOS=$2; shift 2 ;;
    --out) OUTMD=$2; shift 2 ;;
    --psa-args) PSA_ARGS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "ab.sh: unknown option $1" >&2; exit 2 ;;
    *) INPUTS+=("$1"); shift ;;
  esac
done
[[ -x "$A" && -x "$B" && ${#INPUTS[@]} -gt 0 ]] || { echo "ab.sh: need --a BIN --b BIN and inputs (--help)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bind=(--bind-to core)
(( P <= $(nproc) )) || bind=(--bind-to none --oversubscribe)
rows=$work/rows.tsv
: >"$rows"
for input in "${INPUTS[@]}"; do
  for algo in $ALGOS; do
    for ((r = 1; r <= REPS; r++)); do
      for side in a b; do
        bin=$A; [[ $side == b ]] && bin=$B
        out=$work/$side.sa
        # shellcheck disable=SC2086  # PSA_ARGS is a list of words
        t0=$(date +%s%N)
        if mpirun -n "$P" "${bind[@]}" "$bin" -q --algo "$algo" --stats "$work/s.json" $PSA_ARGS \
            -o "$out" "$input" 2>"$work/err"; then
          t1=$(date +%s%N)
          python3 - "$work/s.json" "$input" "$algo" "$side" "$t0" "$t1" >>"$rows" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
wall = (int(sys.argv[6]) - int(sys.argv[5])) / 1e9
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], f"{s['total_secs']:.4f}", f"{s['bytes_per_char'] or 0:.2f}", f"{wall:.4f}"]))
EOF
        else
          printf '%s\t%s\t%s\tFAIL\tFAIL\tFAIL\n' "$input" "$algo" "$side" >>"$rows"
          cat "$work/err" >&2
        fi
      done
      if [[ $r == 1 ]] && ! cmp -s "$work/a.sa" "$work/b.sa"; then
        printf '%s\t%s\tcmp\tMISMATCH\tMISMATCH\tMISMATCH\n' "$input" "$algo" >>"$rows"
      fi
    done
  done
done
python3 - "$rows" "$A" "$B" "$P" "$REPS" <<'EOF' | tee "${OUTMD:-/dev/null}"
import statistics, sys, collections
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
a, b, p, reps = sys.argv[2:6]
print(f"A = `{a}`, B = `{b}`; p = {p}, {reps} interleaved runs each, medians; s: psa's own time (--stats total), wall: the whole mpirun\n")
print("| input | algo | A s | B s | B/A time | A wall s | B wall s | A B/char | B B/char | runs (s) |")
print("|---|---|---|---|---|---|---|---|---|---|")
by = collections.OrderedDict()
for inp, algo, side, t, m, w in rows:
    by.setdefault((inp, algo), []).append((side, t, m, w))
for (inp, algo), v in by.items():
    if any(s == "cmp" for s, _, _, _ in v) or any(t == "FAIL" for _, t, _, _ in v):
        print(f"| {inp} | {algo} | FAIL | | | | | | | " + ", ".join(f"{s}:{t}" for s, t, _, _ in v if t in ("FAIL", "MISMATCH")) + " |")
        continue
    col = lambda side, k: [float(x[k]) for x in v if x[0] == side]
    ta, tb = col("a", 1), col("b", 1)
    A, B = statistics.median(ta), statistics.median(tb)
    print(f"| {inp} | {algo} | {A:.3f} | {B:.3f} | {B/A:.2f} | {statistics.median(col('a', 3)):.3f} | "
          f"{statistics.median(col('b', 3)):.3f} | {statistics.median(col('a', 2)):.1f} | {statistics.median(col('b', 2)):.1f} | "
          + " ".join(f"{x:.2f}" for x in ta) + " / " + " ".join(f"{x:.2f}" for x in tb) + " |")
EOF
