#!/usr/bin/env bash
# scripts/bench-bwt-lcp.sh — psa's BWT and LCP against libsais', in one run per corpus.
#
#   scripts/bench-bwt-lcp.sh [options] CORPUS...
#
# For every CORPUS (a file; raw bytes, or FASTA by its name as psa reads it) it runs, in order:
#   1. psa, the suffix array only:  mpirun -n P psa --stats … -o SA CORPUS
#   2. psa, SA + BWT + LCP:         mpirun -n P psa --stats … -o SA --bwt BWT --lcp LCP CORPUS
#   3. libsais' SA, BWT, and SA + PLCP + LCP with T threads (examples/sais-baseline --mode
#      sa|bwt|lcp, OMP_WAIT_POLICY=passive), each timed on its own;
# then compares psa's BWT, primary index and LCP with libsais' byte for byte (for FASTA input,
# libsais gets the text psa built, SA.text). Each psa configuration runs --reps times (the
# table gives the median time); peak memory per rank is psa's own (--stats:
# peak_rss_bytes_per_pe, VmHWM of each pe), libsais' its process's VmHWM.
#
# Writes bench-results/<date>-<host>-<commit>-bwt-lcp.md (the tables) and -runs.jsonl (every
# run's stats). A failed run or a mismatch is a FAIL row and makes the script exit 1.
#
# Options:
#   --p P              psa's processes [16]
#   --threads T        libsais' threads [= the cores, nproc]
#   --reps N           runs per psa configuration [1]
#   --psa BIN          [target/release/psa]
#   --baseline BIN     [target/release/examples/sais-baseline]
#   --results DIR      where the report goes [bench-results]
#   --name NAME        base name of the report [<date>-<host>-<commit>-bwt-lcp]
#   --commit ID        the binaries' commit when there is no git here [git rev-parse --short HEAD]
#   --timeout S        limit per run, seconds [3600]
#   --psa-args "…"     extra psa arguments for every psa run
#   --mpirun-args "…"  extra mpirun arguments
#
# On a host without Rust: build here (cargo build --release && cargo build --release --example
# sais-baseline), copy target/release/psa, target/release/examples/sais-baseline and this script,
# and pass --psa, --baseline and --commit. Needs mpirun (Open MPI) and python3 (stdlib).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

P=16 THREADS=$(nproc) REPS=1 PSA=target/release/psa BASE=target/release/examples/sais-baseline
RESULTS=bench-results NAME="" COMMIT="" TIMEOUT=3600 PSA_ARGS="" MPIRUN_ARGS=""
INPUTS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --p) P=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --psa) PSA=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --commit) COMMIT=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --psa-args) PSA_ARGS=$2; shift 2 ;;
    --mpirun-args) MPIRUN_ARGS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bench-bwt-lcp.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) INPUTS+=("$1"); shift ;;
  esac
done
[[ ${#INPUTS[@]} -gt 0 ]] || { echo "bench-bwt-lcp.sh: give at least one corpus (--help)" >&2; exit 2; }
[[ -x $PSA && -x $BASE ]] || { echo "bench-bwt-lcp.sh: need $PSA and $BASE (build them, or --psa/--baseline)" >&2; exit 2; }
[[ -n $COMMIT ]] || COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n $NAME ]] || NAME="$(date +%Y-%m-%d)-$(hostname -s)-$COMMIT-bwt-lcp"
mkdir -p "$RESULTS"
MD=$RESULTS/$NAME.md JSONL=$RESULTS/$NAME-runs.jsonl
: >"$JSONL"

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-bwt-lcp.XXXXXX")
trap 'rm -rf "$work"' EXIT
# One pe per core when they fit, each pinned; else unpinned and oversubscribed.
bind=(--bind-to core)
(( P <= $(nproc) )) || bind=(--bind-to none --oversubscribe)
failed=0

# Appends one JSON line {corpus, config, rep, ok, …, stats|baseline} to the runs file.
record() { # corpus config rep ok file-with-json-or-empty
  python3 - "$@" >>"$JSONL" <<'EOF'
import json, sys
corpus, config, rep, ok, path = sys.argv[1:6]
row = {"corpus": corpus, "config": config, "rep": int(rep), "ok": ok == "1"}
if path:
    text = open(path).read()
    try:
        row["result"] = json.loads(text)  # psa's --stats
    except ValueError:
        try:
            row["result"] = json.loads(text.strip().splitlines()[-1])  # sais-baseline's line
        except (ValueError, IndexError) as e:
            row["error"] = str(e)
print(json.dumps(row))
EOF
}

for input in "${INPUTS[@]}"; do
  [[ -r $input ]] || { echo "bench-bwt-lcp.sh: cannot read $input" >&2; failed=1; continue; }
  echo "== $input" >&2
  # 1 and 2: psa.
  for config in sa sa+bwt+lcp; do
    extra=()
    [[ $config == sa+bwt+lcp ]] && extra=(--bwt "$work/psa.bwt" --lcp "$work/psa.lcp")
    for ((r = 1; r <= REPS; r++)); do
      rm -f "$work/s.json"
      # shellcheck disable=SC2086  # word lists
      if timeout "$TIMEOUT" mpirun -n "$P" "${bind[@]}" $MPIRUN_ARGS "$PSA" -q --stats "$work/s.json" \
          $PSA_ARGS -o "$work/psa.sa" "${extra[@]}" "$input" 2>"$work/err"; then
        record "$input" "psa $config" "$r" 1 "$work/s.json"
      else
        cat "$work/err" >&2
        record "$input" "psa $config" "$r" 0 ""
        failed=1
      fi
    done
  done
  # 3: libsais on the same text (psa's T for sequence input).
  text=$input
  [[ -f $work/psa.sa.text ]] && text=$work/psa.sa.text
  width=$(python3 -c "import os,sys; n=os.path.getsize(sys.argv[1]); print(os.path.getsize(sys.argv[2]) // n if n else 4)" "$text" "$work/psa.sa" 2>/dev/null || echo 4)
  for mode in sa bwt lcp; do
    out=$work/base.$mode
    if OMP_WAIT_POLICY=passive timeout "$TIMEOUT" "$BASE" --mode "$mode" --threads "$THREADS" \
        --width "$width" -o "$out" "$text" >"$work/b.json" 2>"$work/err"; then
      ok=1
      case $mode in
        bwt) cmp -s "$out" "$work/psa.bwt" && python3 - "$work/b.json" "$work/psa.bwt.primary" <<'EOF' || ok=0
import json, sys
b = json.load(open(sys.argv[1]))
sys.exit(0 if open(sys.argv[2]).read() == f"{b['primary']}\n" else 1)
EOF
          ;;
        lcp) cmp -s "$out" "$work/psa.lcp" || ok=0 ;;
        sa) cmp -s "$out" "$work/psa.sa" || ok=0 ;;
      esac
      [[ $ok == 1 ]] || { echo "bench-bwt-lcp.sh: $input: psa's $mode differs from libsais'" >&2; failed=1; }
      record "$input" "libsais $mode" 1 "$ok" "$work/b.json"
    else
      cat "$work/err" >&2
      record "$input" "libsais $mode" 1 0 ""
      failed=1
    fi
    rm -f "$out"
  done
  rm -f "$work"/psa.*
done

python3 - "$JSONL" "$P" "$THREADS" "$REPS" "$COMMIT" "$(hostname -s)" "$(nproc)" <<'EOF' | tee "$MD"
import collections, json, statistics, sys
path, p, threads, reps, commit, host, cores = sys.argv[1:8]
rows = [json.loads(l) for l in open(path)]
print(f"# BWT and LCP: psa at p = {p} against libsais with {threads} threads\n")
print(f"Host `{host}` ({cores} cores), commit `{commit}`, {reps} run(s) per psa configuration "
      "(median time). Peak per rank: psa's --stats (VmHWM of each pe), libsais' process. "
      "`match`: the output equals libsais' byte for byte (BWT: and its primary index).\n")
by = collections.OrderedDict()
for r in rows:
    by.setdefault(r["corpus"], collections.OrderedDict()).setdefault(r["config"], []).append(r)
MB = 1e6
for corpus, configs in by.items():
    n = None
    for rs in configs.values():
        for r in rs:
            n = n or r.get("result", {}).get("n")
    print(f"## `{corpus}` (n = {n})\n")
    print("| run | s | MB/s | max peak per rank MB | peak sum B/char | match |")
    print("|---|---|---|---|---|---|")
    lib_ok = {c.split()[1]: all(r["ok"] for r in rs) for c, rs in configs.items() if c.startswith("libsais")}
    for config, rs in configs.items():
        good = [r for r in rs if r["ok"] and "result" in r]
        if not good:
            print(f"| {config} | FAIL | | | | |")
            continue
        res = [r["result"] for r in good]
        if config.startswith("psa"):
            secs = statistics.median(x["total_secs"] for x in res)
            peak = max(max(x["peak_rss_bytes_per_pe"]) for x in res)
            per_char = statistics.median(x["bytes_per_char"] or 0 for x in res)
            match = {"psa sa": lib_ok.get("sa"), "psa sa+bwt+lcp": lib_ok.get("bwt") and lib_ok.get("lcp")}.get(config)
        else:
            x = res[0]
            secs = x["secs"]
            peak = x["peak_rss_bytes"]
            per_char = x["bytes_per_char"]
            match = all(r["ok"] for r in rs)
        mbs = (n or 0) / MB / max(secs, 1e-9)
        extra = ""
        if config == "libsais lcp":
            x = res[0]
            extra = f" (SA {x['sa_secs']:.2f} + PLCP {x['plcp_secs']:.2f} + LCP {x['lcp_secs']:.2f})"
        print(f"| {config} | {secs:.3f}{extra} | {mbs:.2f} | {peak / MB:.1f} | {per_char:.1f} | "
              f"{'yes' if match else 'NO' if match is not None else ''} |")
    # The phases of psa's BWT and LCP (first good run).
    full = [r for r in configs.get("psa sa+bwt+lcp", []) if r["ok"] and "result" in r]
    if full:
        print("\npsa's phases for the BWT and LCP (max over pes):\n")
        print("| phase | max s | mean s | max MB sent | max MB peak |")
        print("|---|---|---|---|---|")
        for ph in full[0]["result"]["phases"]:
            if ph["name"].startswith(("bwt", "lcp", "write bwt", "write lcp")):
                print(f"| {ph['name']} | {ph['max_secs']:.3f} | {ph['mean_secs']:.3f} | "
                      f"{ph['max_bytes_sent'] / MB:.1f} | {ph['max_peak_rss'] / MB:.1f} |")
    print()
EOF
echo "report: $MD (runs: $JSONL)" >&2
exit $failed
