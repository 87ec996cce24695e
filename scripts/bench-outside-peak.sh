#!/usr/bin/env bash
# scripts/bench-outside-peak.sh — psa's peak memory as an outside tool sees it (/usr/bin/time -v,
# which reads getrusage's ru_maxrss) beside the peak psa reports itself (--stats), and the run
# time, for one or more psa binaries interleaved on the same input (a baseline beside a change).
#
#   scripts/bench-outside-peak.sh [options] --psa NAME=PATH [--psa NAME=PATH ...] INPUT
#
# Each rep runs every binary once, in turn, as `/usr/bin/time -v mpirun -n P psa --stats S
# -o /dev/null INPUT` (under mpirun, ru_maxrss is the largest over mpirun's descendants: the
# largest pe's). The table gives, per binary, the medians of wall time, outside peak and psa's
# own largest peak per pe, and their ratio.
#
# Options:
#   --procs P     pes [2]
#   --reps R      reps [5]
#   --results DIR where the report goes [bench-results]
#   --name NAME   report base name [<date>-<host>-<commit>-outside-peak]
#   --mpirun CMD  launcher prefix [mpirun --bind-to none]
set -euo pipefail

PROCS=2 REPS=5 RESULTS=bench-results NAME="" MPIRUN="mpirun --bind-to none"
BINS=()
while [ $# -gt 1 ]; do
    case "$1" in
        --procs) PROCS=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --results) RESULTS=$2; shift 2 ;;
        --name) NAME=$2; shift 2 ;;
        --mpirun) MPIRUN=$2; shift 2 ;;
        --psa) BINS+=("$2"); shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
INPUT=${1:?usage: $0 [options] --psa NAME=PATH ... INPUT}
[ ${#BINS[@]} -gt 0 ] || { echo "give at least one --psa NAME=PATH" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
NAME=${NAME:-$(date +%F)-$(hostname)-$commit-outside-peak}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs="$work/runs.tsv"

for rep in $(seq "$REPS"); do
    for b in "${BINS[@]}"; do
        name=${b%%=*} bin=${b#*=}
        /usr/bin/time -v -o "$work/time.txt" $MPIRUN -n "$PROCS" "$bin" --stats "$work/s.json" \
            -o /dev/null "$INPUT" 2>/dev/null
        python3 - "$work/time.txt" "$work/s.json" "$name" "$rep" >> "$runs" <<'EOF'
import json, re, sys
t = open(sys.argv[1]).read()
kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", t)
wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
own = max(json.load(open(sys.argv[2]))["peak_rss_bytes_per_pe"])
print(f"{sys.argv[3]}\t{sys.argv[4]}\t{wall:.3f}\t{kb * 1024}\t{own}")
EOF
    done
done

mkdir -p "$RESULTS"
python3 - "$runs" "$RESULTS/$NAME.md" "$INPUT" "$PROCS" "$REPS" "$commit" "$MPIRUN" "${BINS[@]}" <<'EOF'
import os, statistics as st, sys, platform
runs, out, inp, procs, reps, commit, mpirun = sys.argv[1:8]
bins = sys.argv[8:]
rows = [l.rstrip("\n").split("\t") for l in open(runs)]
order = [b.split("=", 1)[0] for b in bins]
lines = [f"# Peak memory seen from outside against psa's own figure ({commit})", "",
         f"Host {platform.node()}, {os.cpu_count()} cores; input `{inp}` ({os.path.getsize(inp)} bytes);",
         f"`/usr/bin/time -v {mpirun} -n {procs} PSA --stats S -o /dev/null INPUT`, {reps} reps, binaries interleaved.", "",
         "| binary | wall s (median) | outside peak MB (median) | psa's max peak per pe MB (median) | outside / psa |",
         "|---|---|---|---|---|"]
base = None
for name in order:
    r = [x for x in rows if x[0] == name]
    wall = st.median(float(x[2]) for x in r)
    outside = st.median(int(x[3]) for x in r)
    own = st.median(int(x[4]) for x in r)
    lines.append(f"| {name} | {wall:.3f} | {outside / 1e6:.1f} | {own / 1e6:.1f} | {outside / own:.3f} |")
    base = base or wall
lines += ["", "Wall time over the first binary's: " + ", ".join(
    f"{n} {st.median(float(x[2]) for x in rows if x[0] == n) / base:.3f}×" for n in order), "",
    "Binaries: " + ", ".join(f"`{b}`" for b in bins), "", "Every run (binary, rep, wall s, outside bytes, psa bytes):", "", "```"]
lines += ["\t".join(x) for x in rows] + ["```", ""]
open(out, "w").write("\n".join(lines))
print("\n".join(lines[:12]))
EOF
echo "wrote $RESULTS/$NAME.md"
