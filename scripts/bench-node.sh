#!/usr/bin/env bash
# scripts/bench-node.sh — psa on one node against libsais with as many threads, whole run against
# whole run (issue 67): reading the input, building, writing the suffix array, on both sides.
#
#   scripts/bench-node.sh [--psa BIN] [--libsais BIN] [--p P] [--reps R] [--plan NAME=ARGS]...
#                         [--label NAME] [--out FILE.md] INPUT...
#
# For every input, R times, interleaved (the order rotating): each psa plan
# (`mpirun -n P --bind-to core BIN --stats S ARGS -o OUT INPUT`) and libsais
# (`sais-baseline --threads P -o OUT INPUT`, examples/sais-baseline.rs: reads the file, builds
# with libsais' OpenMP driver, writes the suffix array in psa's format), each under
# `/usr/bin/time`. Every output is compared byte for byte with libsais' (4-byte entries on both
# sides) and removed.
#
# Plans [default]: `default` (no switches: the plan's choice; on one node the whole text to
# libsais on pe 0 with the node's CPUs, `--algo node`) and `css` (`--algo css`: the distributed
# algorithm). --plan NAME=ARGS replaces them (given once or more).
#
# Report (bench-results/DATE-LABEL-COMMIT-node.md, or --out): per input and tool the median and
# the spread of the wall times (the whole process: mpirun for psa), psa's speed over libsais'
# (libsais' median time / psa's), the memory (psa: every pe's peak summed, from --stats, per
# character; libsais: its process's peak per character), and every run.
#
# Defaults: --psa target/release/psa  --libsais target/release/examples/sais-baseline
#           --p $(nproc)  --reps 5  --label local
# Needs: mpirun, python3, GNU time at /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
PSA=target/release/psa SAIS=target/release/examples/sais-baseline P=$(nproc) REPS=5 LABEL=local
OUTMD="" PLANS=() INPUTS=()
ARGS="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --psa) PSA=$2; shift 2 ;;
    --libsais) SAIS=$2; shift 2 ;;
    --p) P=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --plan) PLANS+=("$2"); shift 2 ;;
    --label) LABEL=$2; shift 2 ;;
    --out) OUTMD=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bench-node.sh: unknown option $1" >&2; exit 2 ;;
    *) INPUTS+=("$1"); shift ;;
  esac
done
[[ ${#PLANS[@]} -gt 0 ]] || PLANS=("default=" "css=--algo css")
[[ ${#INPUTS[@]} -gt 0 ]] || { echo "bench-node.sh: give at least one INPUT" >&2; exit 2; }
for b in "$PSA" "$SAIS"; do [[ -x $b ]] || { echo "bench-node.sh: no binary $b" >&2; exit 2; }; done
[[ -x /usr/bin/time ]] || { echo "bench-node.sh: needs GNU time at /usr/bin/time" >&2; exit 2; }
COMMIT=$(cat "$PSA.commit" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-node.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RUNS=$WORK/runs.tsv
printf 'input\tn\trep\ttool\twall_s\tpeak_kb\tsum_peak_bytes\tsame\n' > "$RUNS"
export OMP_WAIT_POLICY=passive
ROOT=()
[[ $(id -u) == 0 ]] && ROOT=(--allow-run-as-root)

one() { # input rep tool
  local input=$1 rep=$2 tool=$3 out=$WORK/out.sa n wall peak sum=0 same
  n=$(stat -L -c %s "$input")
  if [[ $tool == libsais ]]; then
    /usr/bin/time -f '%e %M' -o "$WORK/t" "$SAIS" --threads "$P" --width 4 -o "$out" "$input" > /dev/null
  else
    local args=${tool#*=}
    # shellcheck disable=SC2086
    /usr/bin/time -f '%e %M' -o "$WORK/t" mpirun "${ROOT[@]}" -n "$P" --bind-to core "$PSA" -q --force \
      --width 4 --stats "$WORK/s.json" $args -o "$out" "$input"
    sum=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(round(d['bytes_per_char'] * d['n']))" "$WORK/s.json")
  fi
  read -r wall peak < "$WORK/t"
  if [[ $tool == libsais ]]; then mv "$out" "$WORK/want.sa"; same=ref
  elif cmp -s "$out" "$WORK/want.sa"; then same=yes; else same=NO; fi
  rm -f "$out"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$input")" "$n" "$rep" "${tool%%=*}" \
    "$wall" "$peak" "$sum" "$same" >> "$RUNS"
  echo "bench-node: $(basename "$input") run $rep: ${tool%%=*} ${wall} s" >&2
}

for input in "${INPUTS[@]}"; do
  one "$input" 0 libsais   # warm-up: the page cache, and the reference output
  for rep in $(seq 1 "$REPS"); do
    tools=(libsais "${PLANS[@]}")
    k=${#tools[@]}
    for i in $(seq 0 $((k - 1))); do one "$input" "$rep" "${tools[$(( (i + rep) % k ))]}"; done
  done
  rm -f "$WORK/want.sa"
done

DATE=$(date +%F)
[[ -n $OUTMD ]] || OUTMD=bench-results/$DATE-$LABEL-$COMMIT-node.md
export MACHINE="\`$(hostname)\`, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
export P REPS COMMIT DATE LABEL ARGS LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RUNS" "$OUTMD" <<'EOF'
import collections, os, statistics, sys
e = os.environ
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])][1:]
by = collections.defaultdict(list)
for inp, n, rep, tool, wall, kb, s, same in rows:
    if rep != '0':
        by[(inp, tool)].append((float(wall), int(kb), int(s), same, int(n)))
L = [f"# psa on one node against libsais, whole runs: {e['DATE']}, {e['LABEL']}\n",
     f"Machine: {e['MACHINE']}; load average at the end: {e['LOAD']}. psa `{e['COMMIT']}` at p = {e['P']} "
     f"(`mpirun --bind-to core`); libsais (examples/sais-baseline) with {e['P']} threads. "
     f"{e['REPS']} interleaved runs of each; every wall time is the whole process (reading, "
     "building, writing 4-byte entries). Outputs compared byte for byte with libsais'.\n",
     f"Command: `scripts/bench-node.sh {e['ARGS']}`\n",
     "| input | tool | median wall (s) | min–max | speed / libsais | memory (B/char) | outputs equal |",
     "|---|---|---|---|---|---|---|"]
for inp in dict.fromkeys(r[0] for r in rows):
    ref = statistics.median(w for w, *_ in by[(inp, 'libsais')])
    for tool in dict.fromkeys(r[3] for r in rows if r[0] == inp):
        runs = by[(inp, tool)]
        walls = [w for w, *_ in runs]
        med, n = statistics.median(walls), runs[0][4]
        mem = max((s if tool != 'libsais' else kb * 1024) for _, kb, s, *_ in runs) / max(n, 1)
        same = {r[3] for r in runs}
        shown = 'reference' if same == {'ref'} else ('yes' if same == {'yes'} else 'NO')
        L.append(f"| {inp} | {tool} | {med:.2f} | {min(walls):.2f}–{max(walls):.2f} | "
                 f"{ref / med:.2f}× | {mem:.1f} | {shown} |")
L += ['', '## Every run\n', '| input | run | tool | wall (s) | peak of the process (KB) | psa: peaks summed (bytes) | equal |',
      '|---|---|---|---|---|---|---|']
for inp, n, rep, tool, wall, kb, s, same in rows:
    L.append(f"| {inp} | {rep if rep != '0' else 'warm-up'} | {tool} | {wall} | {kb} | {s} | {same} |")
open(sys.argv[2], 'w').write('\n'.join(L) + '\n')
EOF
echo "bench-node: wrote $OUTMD" >&2
