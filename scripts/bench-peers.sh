#!/usr/bin/env bash
# scripts/bench-peers.sh — psa's plans beside the distributed peers (psac, Distributed DCX) on the
# same node, interleaved, with time and memory of every run.
#
#   scripts/bench-peers.sh --psa BIN --peers DIR [--p 16] [--reps 3] [--peer-reps 1]
#                          [--tools "psac dcx_dc39"] [--plan NAME=ARGS]... [--libsais BIN]
#                          [--peer-check] [--out DIR] INPUT...
#
# For every input and repetition it runs each psa plan (`mpirun -n P --bind-to core BIN --stats …
# ARGS -o OUT INPUT`, the suffix array written to a file beside the input and removed after), then,
# in the first --peer-reps repetitions, each peer of --tools through DIR/run-peers.sh (psac,
# dcx_dc39: `algo_s` their own construction time, `wall_s` the whole mpirun, `rss_sum_kb` every
# rank's peak summed). The plans' outputs of the first repetition are compared byte for byte.
# With --libsais BIN (examples/sais-baseline, `cargo build --release --example sais-baseline`),
# libsais also runs in those repetitions with all the node's cores (`--threads $(nproc)`, its own
# construction time and its process's peak), the shared-memory baseline beside the peers.
# With --peer-check each peer also runs a second time in those repetitions with its own checker
# and its suffix array written to a file (VERIFY=1, SA_OUT; the file removed after): the work a
# psa plan with --check does, so the two whole runs' wall times compare like for like.
#
# Default plans (--plan replaces them; ARGS are psa's switches):
#   css-lean  --algo css --check --sort-rounds 8 --merge-rounds 8
#   dc3-lean  --algo dc3 --check --merge-rounds 8
#   css       --algo css                          (the default plan, no check)
#
# Memory is every pe's peak resident set summed, per input character. "Less idle" subtracts what
# P ranks of psa hold with nothing to do (measured once: psa on a one-byte input at P pes) — MPI's
# and the process's fixed cost, which a larger text per pe makes negligible.
#
# Writes DIR/peers-runs.jsonl (one line per run), DIR/peers.md (medians, and psa's median time
# over each peer's median `algo_s` and wall over wall) and DIR/stats/INPUT-PLAN-REP.json (each psa
# run's --stats report: time, bytes sent and peak memory of every phase); --out defaults to
# bench-results/peers.
# psa's time is its own (--stats total: reading, building, checking, writing the output); its
# build time is that total less the phases that read, check and write (the sum of each such
# phase's slowest pe), to set beside the peers' construction time. That is close, not exact: the
# writes inside the merge rounds are local phases whose slowest pes need not coincide (the
# subtraction may be a little too large), and the time outside any phase (creating and syncing
# the output, the report) stays in (too small). Both are small beside a build.
#
# Needs: mpirun (Open MPI), python3 (stdlib), the peers' folder (run-peers.sh, bin/).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "bench-peers.sh: error: $*" >&2; exit 2; }

PSA="" PEERS="" LIBSAIS="" PEER_CHECK=0 P=16 REPS=3 PEER_REPS=1 OUTDIR=$(dirname "$HERE")/bench-results/peers
TOOLS="psac dcx_dc39" PLANS=() INPUTS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --psa) PSA=$2; shift 2 ;;
    --peers) PEERS=$2; shift 2 ;;
    --p) P=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --peer-reps) PEER_REPS=$2; shift 2 ;;
    --plan) PLANS+=("$2"); shift 2 ;;
    --tools) TOOLS=$2; shift 2 ;;
    --libsais) LIBSAIS=$2; shift 2 ;;
    --peer-check) PEER_CHECK=1; shift ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option '$1' (--help)" ;;
    *) INPUTS+=("$1"); shift ;;
  esac
done
[[ -x "$PSA" ]] || die "--psa BIN: an executable psa is required"
[[ ${#INPUTS[@]} -gt 0 ]] || die "no INPUT given"
if [[ -n "$PEERS" ]]; then
  [[ -f "$PEERS/run-peers.sh" ]] || die "no run-peers.sh in '$PEERS'"
fi
[[ -z "$LIBSAIS" || -x "$LIBSAIS" ]] || die "--libsais BIN: '$LIBSAIS' is not an executable"
for input in "${INPUTS[@]}"; do [[ -r "$input" ]] || die "cannot read '$input'"; done
[[ ${#PLANS[@]} -gt 0 ]] || PLANS=(
  "css-lean=--algo css --check --sort-rounds 8 --merge-rounds 8"
  "dc3-lean=--algo dc3 --check --merge-rounds 8"
  "css=--algo css"
)
mkdir -p "$OUTDIR/stats"
RUNS=$OUTDIR/peers-runs.jsonl
: >"$RUNS"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bind=(--bind-to core)
(( P <= $(nproc) )) || bind=(--bind-to none --oversubscribe)

# One JSON line: {"input", "n", "config", "rep", …fields} from key=value words.
record() {
  python3 - "$@" >>"$RUNS" <<'EOF'
import json, sys
row = {}
for kv in sys.argv[1:]:
    k, _, v = kv.partition("=")
    try:
        v = float(v) if "." in v or "e" in v else int(v)
    except ValueError:
        pass
    row[k] = v
print(json.dumps(row))
EOF
}

# One psa run; appends its row. $1 input, $2 plan name, $3 its switches, $4 repetition.
run_psa() {
  local input=$1 name=$2 args=$3 rep=$4 out
  out=$(dirname "$input")/.bench-peers-$name.sa
  local t0 t1
  t0=$(date +%s%N)
  # shellcheck disable=SC2086  # args is a list of words
  if mpirun -n "$P" "${bind[@]}" "$PSA" -q --stats "$work/s.json" $args -o "$out" "$input" \
      2>"$work/err"; then
    t1=$(date +%s%N)
    python3 - "$work/s.json" "$t0" "$t1" >"$work/kv" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
wall = (int(sys.argv[3]) - int(sys.argv[2])) / 1e9
# Construction alone: the total less the phases that read the input, check and write the outputs.
io = sum(ph["max_secs"] for ph in s["phases"]
         if ph["name"] in ("scan", "read", "check", "write", "write text"))
print(f"secs={s['total_secs']:.4f} build_s={s['total_secs'] - io:.4f} checked={int(s['checked'])} "
      f"bytes_per_char={s['bytes_per_char'] or 0:.3f} wall_s={wall:.4f} status=ok")
EOF
    # shellcheck disable=SC2046
    record input="$input" n="$(stat -L -c %s "$input")" config="psa $name" rep="$rep" $(cat "$work/kv")
    cp "$work/s.json" "$OUTDIR/stats/$(basename "${input%.*}")-$name-$rep.json"
  else
    record input="$input" config="psa $name" rep="$rep" status=fail
    tail -n 5 "$work/err" >&2
  fi
  if [[ $rep == 1 ]]; then
    if [[ -f "$work/first.sa" && -f "$out" ]] && ! cmp -s "$work/first.sa" "$out"; then
      record input="$input" config="psa $name" rep="$rep" status=mismatch
      echo "bench-peers.sh: $name's output differs from the first plan's on $input" >&2
    fi
    [[ -f "$work/first.sa" ]] || { [[ -f "$out" ]] && mv "$out" "$work/first.sa"; }
  fi
  rm -f "$out" "$out.meta" "$out.records.tsv"
}

# What P idle ranks hold: psa on a one-byte input.
printf x >"$work/one"
mpirun -n "$P" "${bind[@]}" "$PSA" -q --stats "$work/s.json" -o "$work/one.sa" "$work/one" \
  || die "psa does not run under mpirun -n $P"
idle=$(python3 -c "import json; print(int(json.load(open('$work/s.json'))['bytes_per_char']))")
record config=idle p="$P" bytes="$idle"
echo "bench-peers.sh: $P idle ranks hold $((idle / 1048576)) MiB" >&2

for input in "${INPUTS[@]}"; do
  rm -f "$work/first.sa"
  for ((r = 1; r <= REPS; r++)); do
    for plan in "${PLANS[@]}"; do
      run_psa "$input" "${plan%%=*}" "${plan#*=}" "$r"
    done
    if [[ -n "$PEERS" && $r -le $PEER_REPS ]]; then
      for tool in $TOOLS; do
        line=$(bash "$PEERS/run-peers.sh" "$input" "$P" "$tool" 2>/dev/null | grep "^tool=" || true)
        if [[ -n "$line" ]]; then
          # shellcheck disable=SC2086  # key=value words
          record input="$input" config="$tool" rep="$r" $line
        else
          record input="$input" config="$tool" rep="$r" status=fail
        fi
        [[ $PEER_CHECK == 1 ]] || continue
        mkdir -p "$work/peer-sa"
        line=$(VERIFY=1 SA_OUT="$work/peer-sa" bash "$PEERS/run-peers.sh" "$input" "$P" "$tool" \
          2>/dev/null | grep "^tool=" || true)
        rm -f "$work/peer-sa/"*
        if [[ -n "$line" ]]; then
          # shellcheck disable=SC2086  # key=value words
          record input="$input" config="$tool checked" rep="$r" $line
        else
          record input="$input" config="$tool checked" rep="$r" status=fail
        fi
      done
    fi
    if [[ -n "$LIBSAIS" && $r -le $PEER_REPS ]]; then
      if OMP_WAIT_POLICY=passive "$LIBSAIS" --threads "$(nproc)" "$input" >"$work/sais" 2>"$work/err"; then
        # shellcheck disable=SC2046  # key=value words
        record input="$input" config="libsais" rep="$r" status=ok $(python3 -c "
import json, sys; s = json.load(open(sys.argv[1]))
print(f\"algo_s={s['secs']:.4f} read_s={s['read_secs']:.4f} threads={s['threads']} bytes_per_char={s['bytes_per_char']:.3f}\")" "$work/sais")
      else
        record input="$input" config="libsais" rep="$r" status=fail
        tail -n 5 "$work/err" >&2
      fi
    fi
  done
  echo "bench-peers.sh: $input done" >&2
done

python3 - "$RUNS" "$P" <<'EOF' | tee "$OUTDIR/peers.md"
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
p = sys.argv[2]
idle = next(r["bytes"] for r in rows if r["config"] == "idle")
med = statistics.median
print(f"p = {p}, medians over the runs; psa's s: its own time (reading, building, checking, writing); "
      f"peers' s: their `algo_s` (construction only), wall: the whole mpirun of each. "
      f"B/char: every rank's peak summed / n; less idle: psa's less the {idle / 2**20:.0f} MiB that {p} idle psa ranks hold. "
      f"vs psac, vs DCX: psa's s / that peer's `algo_s` (in brackets: psa's wall / the peer's wall).\n")
print("| input | n | config | runs | s | wall s | B/char | less idle | vs psac | vs DCX |")
print("|---|---|---|---|---|---|---|---|---|---|")
by = collections.OrderedDict()
for r in rows:
    if r["config"] != "idle":
        by.setdefault(r["input"], collections.OrderedDict()).setdefault(r["config"], []).append(r)
for inp, cfgs in by.items():
    n = next((r["n"] for v in cfgs.values() for r in v if "n" in r), 0)
    peer = {}
    for tool in ("psac", "dcx_dc39"):
        ok = [r for r in cfgs.get(tool, []) if r.get("status") == "ok"]
        if ok:
            peer[tool] = (med(r["algo_s"] for r in ok), med(r["wall_s"] for r in ok))
    for cfg, v in cfgs.items():
        bad = [r for r in v if r.get("status") != "ok"]
        ok = [r for r in v if r.get("status") == "ok"]
        if not ok or any(r.get("status") == "mismatch" for r in bad):
            print(f"| {inp} | {n} | {cfg} | {len(v)} | FAIL ({', '.join(str(r.get('status')) for r in bad)}) | | | | | |")
            continue
        if cfg.startswith("psa "):
            s, w = med(r["secs"] for r in ok), med(r["wall_s"] for r in ok)
            b = med(r["bytes_per_char"] for r in ok)
            vs = [f"{s / peer[t][0]:.2f}× ({w / peer[t][1]:.2f}×)" if t in peer else "–" for t in ("psac", "dcx_dc39")]
            print(f"| {inp} | {n} | {cfg} | {len(ok)} | {s:.3f} | {w:.3f} | {b:.1f} | {b - idle / n:.1f} | {vs[0]} | {vs[1]} |")
        elif cfg == "libsais":
            s, b = med(r["algo_s"] for r in ok), med(r["bytes_per_char"] for r in ok)
            print(f"| {inp} | {n} | libsais, {ok[0]['threads']} threads | {len(ok)} | {s:.3f} | – | {b:.1f} | – | | |")
        else:
            s, w = med(r["algo_s"] for r in ok), med(r["wall_s"] for r in ok)
            b = med(r["rss_sum_kb"] * 1024 / r["n"] for r in ok)
            print(f"| {inp} | {n} | {cfg} | {len(ok)} | {s:.3f} | {w:.3f} | {b:.1f} | – | | |")

# Like for like: psa's build time beside the peers' construction time, and with --peer-check its
# whole run's wall beside theirs with their checker on and their suffix array written.
checked = {t for cfgs in by.values() for t in cfgs if t.endswith(" checked")}
print(f"\nLike for like: psa's build s (its total less reading, checking and writing) / the peer's "
      f"`algo_s`" + (", and psa's wall / the wall of the peer's run with its own checker and its "
                     "suffix array written (`checked`)" if checked else "") + ".\n")
print("| input | config | build s | build / psac | build / DCX |" + (" wall / psac checked | wall / DCX checked |" if checked else ""))
print("|---|---|---|---|---|" + ("---|---|" if checked else ""))
for inp, cfgs in by.items():
    ref = {}
    for tool, key in (("psac", "algo_s"), ("dcx_dc39", "algo_s"), ("psac checked", "wall_s"), ("dcx_dc39 checked", "wall_s")):
        ok = [r for r in cfgs.get(tool, []) if r.get("status") == "ok"]
        if ok:
            ref[tool] = med(r[key] for r in ok)
    for cfg, v in cfgs.items():
        ok = [r for r in v if r.get("status") == "ok" and "build_s" in r]
        if not cfg.startswith("psa ") or not ok:
            continue
        b, w = med(r["build_s"] for r in ok), med(r["wall_s"] for r in ok)
        cols = [f"{b / ref[t]:.2f}×" if t in ref else "–" for t in ("psac", "dcx_dc39")]
        if checked:
            # Whole runs compare only where psa checks too.
            mine = all(r.get("checked") == 1 for r in ok)
            cols += [f"{w / ref[t]:.2f}×" if t in ref and mine else "–" for t in ("psac checked", "dcx_dc39 checked")]
        print(f"| {inp} | {cfg} | {b:.3f} | " + " | ".join(cols) + " |")
EOF
