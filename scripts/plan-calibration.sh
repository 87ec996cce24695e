#!/usr/bin/env bash
# The memory plan's model (src/plan.rs) against measured peaks: runs psa on a matrix of inputs,
# process counts and plans with `--stats`, and prints one table row per run: the peak the plan
# predicted for the fullest pe, the fullest pe's measured peak (MiB) and their ratio (the model
# is meant to stay above 1 and near it), the base the plan measured (a pe's resident size before
# the text, with its margin), the measured peak's bytes per character of the largest block above
# that base (what src/plan.rs' lines are fitted to), and the measured peak of the build and of the
# check apart (the fullest pe's, over their phases). Memory only: the runs may share the machine.
#
#   scripts/plan-calibration.sh [--bin PATH] [--pes "2 4"] [--out FILE] INPUT...
#
# INPUT: text files (e.g. scripts/synthetic.py outputs and corpora slices).
set -euo pipefail
bin=target/release/psa
pes="2 4"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --pes) pes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "usage: $0 [--bin PATH] [--pes \"2 4\"] [--out FILE] INPUT..." >&2; exit 2; }
plans=(
  "--algo css"
  "--algo css --check --sort-rounds 2 --merge-rounds 2"
  "--algo css --check --sort-rounds 4 --merge-rounds 4"
  "--algo css --check --sort-rounds 8 --merge-rounds 8"
  "--algo css --check --sort-rounds 8 --merge-rounds 8 --index-bits 40"
  "--algo css --check --sort-rounds 16 --merge-rounds 16"
  "--algo css --check --sort-rounds 64 --merge-rounds 64"
  "--algo css --check --sort-rounds 64 --merge-rounds 64 --exchange-round-bytes 4096"
  "--algo dc3"
  "--algo dc3 --check --merge-rounds 4"
  "--algo dc3 --check --merge-rounds 8"
  "--algo dc3 --check --merge-rounds 64"
  "--algo dc3 --check --merge-rounds 64 --exchange-round-bytes 4096"
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
row() { if [[ -n "$out" ]]; then echo "$1" | tee -a "$out"; else echo "$1"; fi; }
row "| input | p | plan | planned MiB | measured MiB | planned/measured | base MiB | bytes/char over base | build MiB | check MiB |"
row "|---|---|---|---|---|---|---|---|---|---|"
for input in "$@"; do
  for p in $pes; do
    for plan in "${plans[@]}"; do
      # shellcheck disable=SC2086
      mpirun -n "$p" "$bin" -q $plan --mem-per-pe 1T -o "$work/out.sa" --force \
        --stats "$work/stats.json" "$input"
      row "$(python3 -c '
import json, sys
name, p, plan, path = sys.argv[1:]
s = json.load(open(path))
a, b = s["planned_peak_bytes"] / 2**20, s["measured_max_peak_bytes"] / 2**20
base = s["plan"].get("base_bytes", 0)
block = -(-s["n"] // s["pes"])
per_char = (s["measured_max_peak_bytes"] - base) / max(block, 1)
peak = lambda check: max([x["max_peak_rss"] for x in s["phases"] if (x["name"] == "check") == check] or [0]) / 2**20
print(f"| {name} | {p} | `{plan}` | {a:.0f} | {b:.0f} | {a / b:.2f} | {base / 2**20:.0f} | {per_char:.1f} | {peak(False):.0f} | {peak(True):.0f} |")' \
        "$(basename "$input")" "$p" "$plan" "$work/stats.json")"
    done
  done
done
