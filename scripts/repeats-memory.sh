#!/usr/bin/env bash
# The memory of `psa repeats`' phases against its plan: aⁿ and Fibonacci (every SA entry gives a
# record, the most the span phases hold) and random DNA, at 32-, 40- and 64-bit indices, first
# with the default plan, then at each text's leanest budget (planned with a fixed base). Writes a
# Markdown report.
#
#   scripts/repeats-memory.sh [--psa BIN] [--pes P] [--mb N] [--out FILE]
set -euo pipefail

psa=target/release/psa
pes=2
mb=8
out=
while [ $# -gt 0 ]; do
    case "$1" in
        --psa) psa=$2; shift 2 ;;
        --pes) pes=$2; shift 2 ;;
        --mb) mb=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "repeats-memory.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$psa" ] || { echo "repeats-memory.sh: no psa binary at '$psa' (build it, or give --psa)" >&2; exit 2; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
out=${out:-bench-results/$(date +%F)-$(hostname -s)-$commit-repeats-memory.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1

python3 - "$work" "$mb" <<'EOF'
import random, sys
work, n = sys.argv[1], int(sys.argv[2]) << 20
open(f"{work}/an.txt", "wb").write(b"a" * n)
a, b = b"ab", b"a"
while len(a) < n:
    a, b = a + b, a
open(f"{work}/fib.txt", "wb").write(a[:n])
random.seed(1)
open(f"{work}/dna.txt", "wb").write(bytes(random.choice(b"ACGT") for _ in range(n)))
EOF

# The lean runs plan with a fixed base (--plan-base, psa's default where unmeasured), so that the
# leanest budget one run reports is the next run's own.
plan_base=$((32 << 20))
run() { # name bits budget-or-empty [flags...] -> stats json path (empty on refusal)
    local name=$1 bits=$2 budget=$3 st="$work/$1-$2-${3:-free}-$#.json"
    shift 3
    local args=(repeats --min-len 20 --index-bits "$bits" --stats "$st" -o "$work/spans.tsv" "$@")
    [ -n "$budget" ] && args+=(--mem-per-pe "$budget")
    if mpirun -n "$pes" "$psa" "${args[@]}" "$work/$name.txt" 2>"$work/err"; then
        echo "$st"
    else
        echo "refused or failed: $(grep -m1 'psa: error' "$work/err" || tail -1 "$work/err")" >&2
        echo ""
    fi
}

rows="$work/rows.jsonl"
for bits in 32 40 64; do
    for name in an fib dna; do
        st=$(run "$name" "$bits" "")
        fixed=$(run "$name" "$bits" "" --plan-base "$plan_base")
        lean=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['plan']['leanest_peak_bytes'])" "$fixed")
        st_lean=$(run "$name" "$bits" "$lean" --plan-base "$plan_base")
        python3 - "$name" "$bits" "$st" "$st_lean" "$lean" >>"$rows" <<'EOF'
import json, sys
name, bits, st, st_lean, lean = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
d = json.load(open(st))
base, block = d["plan"]["base_bytes"], (d["n"] + d["pes"] - 1) // d["pes"]
peak = lambda pre: max(p["max_peak_rss"] for p in d["phases"] if p["name"].startswith(pre))
row = {"text": name, "bits": bits, "base": base,
       "lcp_bpc": (peak("lcp") - base) / block, "spans_bpc": (peak("repeats") - base) / block,
       "secs": d["total_secs"], "planned": d["planned_peak_bytes"],
       "measured": d["measured_max_peak_bytes"], "lean_budget": lean}
if st_lean:
    l = json.load(open(st_lean))
    row.update(lean_planned=l["planned_peak_bytes"], lean_measured=l["measured_max_peak_bytes"])
print(json.dumps(row))
EOF
    done
done

python3 - "$rows" "$out" "$psa" "$pes" "$mb" "$commit" "$(hostname -s)" <<'EOF'
import json, sys
rows, out, psa, pes, mb, commit, host = sys.argv[1:]
M = 1 << 20
lines = [f"# `psa repeats`: its phases' memory against the plan ({host}, {commit})", "",
         f"Command: `scripts/repeats-memory.sh --psa {psa} --pes {pes} --mb {mb}` "
         f"(`psa repeats --min-len 20 --index-bits B --stats`, p = {pes}, {mb} MiB texts). "
         "Bytes per character are above the plan's base (the resident size at planning plus its "
         "margin), on the fullest pe, per character of its block. The leanest budget is planned with "
         "`--plan-base 32M` (psa's base where unmeasured), so that it is the same in the run that "
         "reports it and the run under it.", "",
         "| text | index bits | lcp phases B/char | repeats phases B/char | default plan: measured / planned | leanest budget | leanest: measured / planned | leanest: measured / budget |",
         "|---|---|---|---|---|---|---|---|"]
for line in open(rows):
    r = json.loads(line)
    lean = (f"{r['lean_measured'] / r['lean_planned']:.3f} | {r['lean_measured'] / r['lean_budget']:.3f}"
            if "lean_measured" in r else "refused | –")
    lines.append(f"| {r['text']} | {r['bits']} | {r['lcp_bpc']:.1f} | {r['spans_bpc']:.1f} | "
                 f"{r['measured'] / r['planned']:.3f} | {r['lean_budget'] / M:.1f} MiB | {lean} |")
open(out, "w").write("\n".join(lines) + "\n")
print(f"wrote {out}")
EOF
