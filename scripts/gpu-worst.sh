#!/usr/bin/env bash
# scripts/gpu-worst.sh — psa with and without --gpu on the synthetic worst cases and random text,
# against libsais with all cores, in one run (for the GPU host; needs only python3 and the binaries).
#
#   scripts/gpu-worst.sh [--psa BIN] [--baseline BIN] [--mb N] [--procs "1 4 16"] [--reps R]
#                        [--kinds "random an fib repblock"] [--cpu-procs "4 16"]
#
# For every kind: generates N MiB (scripts/synthetic.py, default seed), runs `sais-baseline --threads
# $(nproc)` once (its SA is the reference), then for each P in --procs `psa --gpu` R times and for each
# P in --cpu-procs `psa` (CPU) R times, all under `mpirun -n P --bind-to core --map-by slot:PE=T`
# with T = cores / P threads. Every psa output is compared with libsais' (cmp). Prints one line per
# run:
#   RUN kind=an mb=64 tool=psa-gpu p=16 rep=1 build_s=0.812 total_s=1.30 status=ok
# (build_s = psa's total_secs minus read/write, libsais' construction time) and a markdown table of
# medians with each configuration's ratio to random text and to libsais.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PSA=$HERE/../target/release/psa
BASE=$HERE/../target/release/examples/sais-baseline
MB=64
PROCS="1 4 16"
CPU_PROCS="4 16"
REPS=2
KINDS="random an fib repblock"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --psa) PSA=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --mb) MB=$2; shift 2 ;;
    --procs) PROCS=$2; shift 2 ;;
    --cpu-procs) CPU_PROCS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --kinds) KINDS=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "gpu-worst.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
CORES=$(nproc)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
RES=$W/results.txt
: >"$RES"

run_psa() { # tool p rep kind extra...
  local tool=$1 p=$2 rep=$3 kind=$4; shift 4
  local t=$(( CORES / p )); (( t >= 1 )) || t=1
  local status=ok
  if ! mpirun -n "$p" --bind-to core --map-by "slot:PE=$t" "$PSA" --threads "$t" --stats "$W/s.json" \
      -q -o "$W/out.sa" "$@" "$W/$kind.txt" >"$W/log" 2>&1; then
    status=failed; tail -5 "$W/log" >&2
  elif ! cmp -s "$W/out.sa" "$W/$kind.ref.sa"; then
    status=differs
  fi
  python3 - "$W/s.json" "$kind" "$MB" "$tool" "$p" "$rep" "$status" <<'EOF' | tee -a "$RES"
import json, sys
f, kind, mb, tool, p, rep, status = sys.argv[1:]
try:
    d = json.load(open(f))
    io = sum(x["max_secs"] for x in d["phases"] if x["level"] == 0 and x["name"] in ("read", "write", "check"))
    b, t = d["total_secs"] - io, d["total_secs"]
except Exception:
    b = t = float("nan")
print(f"RUN kind={kind} mb={mb} tool={tool} p={p} rep={rep} build_s={b:.3f} total_s={t:.3f} status={status}")
EOF
}

for kind in $KINDS; do
  python3 "$HERE/synthetic.py" "$kind" $(( MB << 20 )) "$W/$kind.txt"
  "$BASE" --threads "$CORES" -o "$W/$kind.ref.sa" "$W/$kind.txt" >"$W/b.json"
  python3 -c "import json,sys; d=json.load(open('$W/b.json')); print(f\"RUN kind=$kind mb=$MB tool=libsais p=1 rep=1 build_s={d['secs']:.3f} total_s={d['secs']:.3f} status=ok\")" | tee -a "$RES"
  for p in $PROCS; do
    for rep in $(seq "$REPS"); do run_psa psa-gpu "$p" "$rep" "$kind" --gpu; done
  done
  for p in $CPU_PROCS; do
    for rep in $(seq "$REPS"); do run_psa psa-cpu "$p" "$rep" "$kind"; done
  done
  rm -f "$W/$kind.txt" "$W/$kind.ref.sa" "$W/out.sa"
done

python3 - "$RES" "$CORES" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    d = dict(kv.split("=", 1) for kv in line.split()[1:])
    key = (d["tool"], int(d["p"]))
    rows.setdefault(key, {}).setdefault(d["kind"], []).append((float(d["build_s"]), d["status"]))
kinds = []
for v in rows.values():
    for k in v:
        if k not in kinds:
            kinds.append(k)
med = {key: {k: statistics.median(b for b, _ in v[k]) for k in v} for key, v in rows.items()}
lib = med.get(("libsais", 1), {})
print(f"\n| config | " + " | ".join(f"{k} build s" for k in kinds) + " | " + " | ".join(f"{k}/random" for k in kinds if k != "random") + " | × libsais " + sys.argv[2] + "T (each kind) | status |")
print("|---" * (2 + len(kinds) + len([k for k in kinds if k != 'random']) + 1) + "|")
for key in sorted(med, key=lambda k: (k[0] != "libsais", k[0], k[1])):
    m = med[key]
    name = "libsais %sT" % sys.argv[2] if key[0] == "libsais" else f"{key[0]} p={key[1]}"
    cells = [f"{m[k]:.3f}" if k in m else "" for k in kinds]
    ratios = [f"{m[k] / m['random']:.2f}" if k in m and "random" in m and m["random"] > 0 else "" for k in kinds if k != "random"]
    vs = [f"{lib[k] / m[k]:.2f}" if k in m and k in lib and m[k] > 0 else "" for k in kinds]
    st = sorted({s for k in rows[key] for _, s in rows[key][k]})
    print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " | " + " / ".join(vs) + " | " + ",".join(st) + " |")
EOF
