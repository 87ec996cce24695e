#!/usr/bin/env bash
# scripts/bench.sh — benchmark psa (pDC3, pCSS) against libsais on real corpora and worst cases.
#
#   scripts/bench.sh [options] [CORPUS...]
#
# From a fresh clone, one command builds everything, makes the corpora and writes the results:
#
#   scripts/bench.sh                      # dna-20MB english-20MB, p = 1 2 ... cores, 3 runs each
#   scripts/bench.sh --procs "1 2 4" --reps 5 --check dna-32MB source-32MB
#
# CORPUS is a file path or a name under corpora/ without .txt: a real corpus (dna, english,
# protein, source, django), a prefix of one (dna-20MB: first 20*10^6 bytes) or a synthetic input
# (an-8MB, fib-8MB, repblock-8MB, random-8MB); missing ones are made with scripts/corpora.sh.
#
# For every corpus it runs, in the same invocation:
#   - sais-baseline (libsais) with 1 thread and with all cores (OMP_WAIT_POLICY=passive);
#   - psa with each --algo and each process count p, with --threads max(1, cores/p) so that
#     p × threads = cores, each pe pinned to its cores (see "Binding" below), with --stats.
# Each configuration runs --reps times; the tables give the median. The first psa run of each
# configuration is compared byte for byte with libsais' output (psa's --check is optional: --check).
# Then the worst cases (a^n, Fibonacci, a repeated 64 KiB random block, and random text of the
# same size) run the same way and get their own table.
#
# Writes bench-results/<date>-<host>-<commit>.{csv,md}, -runs.jsonl (every run with its full
# stats), -phases.svg and -scaling.svg. A psa run that fails, times out or gives a different SA
# is a FAIL row in the tables and makes this script exit with status 1 (after writing the report).
#
# Options (environment variable in brackets):
#   --procs "LIST"     process counts [BENCH_PROCS; default: 1 2 4 ... up to the cores]
#   --algos "LIST"     psa algorithms [BENCH_ALGOS; "dc3 css"]; dc3+gpu / css+gpu add psa --gpu
#   --reps N           runs per configuration, >= 3 for a median [BENCH_REPS; 3]
#   --cores N          cores to use: threads = cores/p, libsais' all-core run [BENCH_CORES; nproc]
#   --check            also run psa with --check (its distributed checker; adds a phase) [BENCH_CHECK=1]
#   --no-cmp           skip the byte-for-byte comparison with libsais' SA [BENCH_CMP=0]
#   --worst-mb N       size of the worst-case inputs in MB, 0 = skip them [BENCH_WORST_MB; 8]
#   --worst-procs LIST process counts for the worst cases [BENCH_WORST_PROCS; = --procs]
#   --timeout S        wall-clock limit per run, in seconds [BENCH_TIMEOUT; 3600]
#   --results DIR      where the report goes [BENCH_RESULTS; bench-results/]
#   --name NAME        base name of the report files [<date>-<host>-<commit>]
#   --note TEXT        a line for the report's notes (repeatable)
#   --no-build         do not run cargo; use the binaries given by --psa/--baseline [BENCH_NO_BUILD=1]
#   --clean-build      build the committed HEAD (git archive) in .bench-tmp/ with its own target
#                      dir, not the working tree: for results that name a commit [BENCH_CLEAN_BUILD=1]
#   --psa BIN, --baseline BIN   binaries [target/release/psa, target/release/examples/sais-baseline]
#   --commit ID        commit the binaries were built from, when there is no git [BENCH_COMMIT]
#   --mpirun-args "…"  extra mpirun arguments [BENCH_MPIRUN_ARGS]
#   --bind auto|none   pin each pe to its cores when p × threads fits (auto), or never [BENCH_BIND; auto]
#   --budget-s S       stop starting runs when S seconds have passed (0 = no limit); what was
#                      not run is listed in the report, not counted as a failure [BENCH_BUDGET_S; 0]
#   --psa-args "…"     extra psa arguments for every psa run, e.g. "--base-case 4194304" [BENCH_PSA_ARGS]
#   --keep-logs DIR    copy every run's log and stats there [BENCH_KEEP_LOGS]
#   --mem-per-char N   skip (and report) a psa run whose estimate n × N exceeds MemAvailable
#                      [BENCH_PSA_BYTES_PER_CHAR; 200]
#
# Binding: each pe is pinned to its own cores (`--bind-to core`, with `--map-by slot:PE=t` for t
# threads per pe) when p × t fits the cores: on the 16-core GPU host this made p = 16 runs 10–30 %
# faster and far less noisy than `--bind-to none` (psa's sequential base case still gets every
# core of the node: pe 0 widens its affinity to the union of its node's pes). Otherwise (more pes
# than cores) `--bind-to none`. Open MPI's own default (one core for p <= 2, else a socket) would
# squeeze a pe's --threads onto one core. --bind none|auto [BENCH_BIND; auto] forces the choice.
# OMP_WAIT_POLICY=passive is exported for every run: libsais' OpenMP threads (the baseline, and
# psa's sequential base case) would otherwise spin on cores the other processes need.
#
# Needs: bash, python3 (stdlib only), mpirun (Open MPI), and cargo unless --no-build.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# The command line as it could be typed again (arguments with spaces in single quotes).
quote_args() {
  local a out=""
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
  done
  echo "$out"
}
CMDLINE="scripts/bench.sh$(quote_args "$@")"

PROCS=${BENCH_PROCS:-}
ALGOS=${BENCH_ALGOS:-"dc3 css"}
REPS=${BENCH_REPS:-3}
CORES=${BENCH_CORES:-$(nproc)}
CHECK=${BENCH_CHECK:-0}
CMP=${BENCH_CMP:-1}
WORST_MB=${BENCH_WORST_MB:-8}
WORST_PROCS=${BENCH_WORST_PROCS:-}
TIMEOUT=${BENCH_TIMEOUT:-3600}
RESULTS=${BENCH_RESULTS:-$ROOT/bench-results}
NAME=""
NOTES=()
NO_BUILD=${BENCH_NO_BUILD:-0}
CLEAN_BUILD=${BENCH_CLEAN_BUILD:-0}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PSA=${BENCH_PSA:-$TARGET/release/psa}
BASELINE=${BENCH_BASELINE:-$TARGET/release/examples/sais-baseline}
COMMIT=${BENCH_COMMIT:-}
MPIRUN_ARGS=${BENCH_MPIRUN_ARGS:-}
BIND=${BENCH_BIND:-auto}
MEM_PER_CHAR=${BENCH_PSA_BYTES_PER_CHAR:-200}
BUDGET=${BENCH_BUDGET_S:-0}
PSA_ARGS=${BENCH_PSA_ARGS:-}
LOGS_TO=${BENCH_KEEP_LOGS:-}
CORPORA=()

die() { echo "bench.sh: error: $*" >&2; exit 2; }
log() { echo "bench.sh: $*" >&2; }
usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --procs) PROCS=$2; shift 2 ;;
    --algos) ALGOS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    --no-cmp) CMP=0; shift ;;
    --worst-mb) WORST_MB=$2; shift 2 ;;
    --worst-procs) WORST_PROCS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --note) NOTES+=("$2"); shift 2 ;;
    --no-build) NO_BUILD=1; shift ;;
    --clean-build) CLEAN_BUILD=1; shift ;;
    --psa) PSA=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    --commit) COMMIT=$2; shift 2 ;;
    --mpirun-args) MPIRUN_ARGS=$2; shift 2 ;;
    --bind) BIND=$2; shift 2 ;;
    --mem-per-char) MEM_PER_CHAR=$2; shift 2 ;;
    --budget-s) BUDGET=$2; shift 2 ;;
    --psa-args) PSA_ARGS=$2; shift 2 ;;
    --keep-logs) LOGS_TO=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) CORPORA+=("$1"); shift ;;
  esac
done
[[ ${#CORPORA[@]} -gt 0 ]] || CORPORA=(dna-20MB english-20MB)
[[ "$REPS" =~ ^[0-9]+$ && "$REPS" -ge 1 ]] || die "--reps must be a positive integer"
[[ "$REPS" -ge 3 ]] || log "WARNING: --reps $REPS: fewer than 3 runs, the median is not robust"
[[ "$CORES" =~ ^[0-9]+$ && "$CORES" -ge 1 ]] || die "--cores must be a positive integer"
if [[ -z "$PROCS" ]]; then
  PROCS=""; p=1
  while [[ $p -le $CORES ]]; do PROCS="$PROCS $p"; p=$((p * 2)); done
  [[ $((p / 2)) -eq $CORES ]] || PROCS="$PROCS $CORES"
fi
[[ -n "$WORST_PROCS" ]] || WORST_PROCS=$PROCS
for a in $ALGOS; do [[ $a =~ ^(dc3|css)(\+gpu)?$ ]] || die "unknown algorithm '$a' (dc3, css, dc3+gpu, css+gpu)"; done

command -v python3 >/dev/null || die "python3 is needed (stdlib only) for the report"
[[ $BIND == auto || $BIND == none ]] || die "--bind must be auto or none"
# mpirun's binding arguments for p pes with t threads each (see "Binding" above).
bind_args() {
  if [[ $BIND == auto && $(($1 * $2)) -le $CORES ]]; then
    if [[ $2 -eq 1 ]]; then echo "--bind-to core"; else echo "--map-by slot:PE=$2 --bind-to core"; fi
  else
    echo "--bind-to none"
  fi
}
command -v mpirun >/dev/null || die "mpirun is not on PATH"

# ---- build ---------------------------------------------------------------------------------------
if [[ $CLEAN_BUILD == 1 ]]; then
  # Build exactly the committed HEAD, in a target dir of its own: the working tree may hold other
  # people's uncommitted edits, and target/ may be rebuilt by them while the benchmark runs.
  command -v cargo >/dev/null || die "cargo is not on PATH"
  git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1 || die "--clean-build needs a git checkout"
  COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
  SRC=$ROOT/.bench-tmp/build-src
  rm -rf "$SRC" && mkdir -p "$SRC"
  git -C "$ROOT" archive HEAD | tar -x -C "$SRC"
  log "building HEAD ($COMMIT) in $SRC: cargo build --release --bin psa --example sais-baseline"
  (cd "$SRC" && cargo build --release --target-dir "$ROOT/.bench-tmp/build-target" --bin psa --example sais-baseline) ||
    die "cargo build of HEAD failed"
  PSA=$ROOT/.bench-tmp/build-target/release/psa
  BASELINE=$ROOT/.bench-tmp/build-target/release/examples/sais-baseline
elif [[ $NO_BUILD != 1 ]]; then
  command -v cargo >/dev/null || die "cargo is not on PATH (or use --no-build with --psa/--baseline)"
  log "building: cargo build --release --bin psa --example sais-baseline"
  (cd "$ROOT" && cargo build --release --bin psa --example sais-baseline) || die "cargo build failed"
fi
[[ -x "$PSA" ]] || die "psa binary '$PSA' not found or not executable"
[[ -x "$BASELINE" ]] || die "baseline binary '$BASELINE' not found or not executable"

DIRTY=""
if [[ -z "$COMMIT" ]]; then
  if git -C "$ROOT" rev-parse --short HEAD >/dev/null 2>&1; then
    COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
    # Uncommitted changes to the sources mean the binary is not exactly that commit.
    if [[ -n "$(git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ]]; then
      DIRTY="+dirty"
    fi
  else
    COMMIT=unknown
  fi
fi

# ---- corpora -------------------------------------------------------------------------------------
# resolve NAME: prints the path of the corpus file, making it with corpora.sh when missing.
resolve() {
  local c=$1 f
  if [[ -f "$c" ]]; then echo "$c"; return; fi
  f=$ROOT/corpora/$c.txt
  if [[ ! -f "$f" ]]; then
    if [[ "$c" =~ ^(an|fib|repblock|random)-([0-9]+)MB$ ]]; then
      "$HERE/corpora.sh" --synthetic-mb "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}" >&2 || die "cannot make corpus '$c'"
    elif [[ "$c" =~ ^(dna|english|protein|source|django)-([0-9]+)MB$ ]]; then
      "$HERE/corpora.sh" --prefix-mb "${BASH_REMATCH[2]}" "${BASH_REMATCH[1]}" >&2 || die "cannot make corpus '$c'"
    elif [[ "$c" =~ ^(dna|english|protein|source|django)$ ]]; then
      "$HERE/corpora.sh" "$c" >&2 || die "cannot make corpus '$c'"
    else
      die "corpus '$c' is neither a file nor a known corpus name"
    fi
  fi
  [[ -f "$f" ]] || die "corpus '$c': $f was not made"
  echo "$f"
}

# ---- the runs ------------------------------------------------------------------------------------
HOST=$(hostname -s 2>/dev/null || cut -d. -f1 /proc/sys/kernel/hostname)
DATE=$(date +%Y-%m-%d)
[[ -n "$NAME" ]] || NAME=$DATE-$HOST-$COMMIT
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
WORK=${BENCH_WORK:-$ROOT/.bench-tmp}/$NAME-$$
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
RUNS=$WORK/runs.jsonl
# Run copies: a concurrent `cargo build` must not swap the binaries in the middle of the benchmark.
mkdir -p "$WORK/bin"
cp "$PSA" "$WORK/bin/psa" && cp "$BASELINE" "$WORK/bin/sais-baseline"
PSA=$WORK/bin/psa BASELINE=$WORK/bin/sais-baseline
: >"$RUNS"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
T_START=$(date +%s)

export OMP_WAIT_POLICY=passive
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  MPIRUN_ARGS="--allow-run-as-root $MPIRUN_ARGS"
fi
export OMPI_MCA_rmaps_base_oversubscribe=1   # p may exceed the slots Open MPI counts

mem_available() { awk '/^MemAvailable:/ { printf "%.0f\n", $2 * 1024 }' /proc/meminfo; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
json_escape() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }

FAILS=0
RUN_ID=0

# record GROUP CORPUS FILE N TOOL ALGO P THREADS REP STATUS RC WALL STATS LOG
record() {
  printf '{"group": "%s", "corpus": %s, "file": %s, "n": %s, "tool": "%s", "algo": "%s", "p": %s, "threads": %s, "rep": %s, "status": "%s", "rc": %s, "wall_secs": %s, "stats_file": %s, "log_file": %s}\n' \
    "$1" "$(json_escape "$2")" "$(json_escape "$3")" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" "${11}" "${12}" \
    "$(json_escape "${13}")" "$(json_escape "${14}")" >>"$RUNS"
}

# run_limit: prints the seconds a run may take (the per-run timeout, cut to what is left of
# --budget-s); prints nothing when the budget is spent.
run_limit() {
  local left
  if [[ $BUDGET -le 0 ]]; then echo "$TIMEOUT"; return; fi
  left=$((BUDGET - ($(date +%s) - T_START)))
  [[ $left -ge 5 ]] || return 0
  [[ $left -lt $TIMEOUT ]] && echo "$left" || echo "$TIMEOUT"
}

# classify RC LIMIT: the status of a finished run from its exit code.
classify() {
  local rc=$1 limit=$2
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    # killed by `timeout`: by the per-run limit (a failure) or by the end of the budget (not one)
    [[ $limit -lt $TIMEOUT ]] && echo cut-by-budget || echo timeout
  elif [[ $rc -ne 0 ]]; then echo fail
  else echo ok
  fi
}

# run_baseline GROUP CORPUS FILE N THREADS REP [REF_OUT]
run_baseline() {
  local group=$1 corpus=$2 file=$3 n=$4 t=$5 rep=$6 ref=${7:-} id stats lg t0 t1 rc status limit
  RUN_ID=$((RUN_ID + 1)); id=$(printf '%04d' $RUN_ID)
  stats=$WORK/$id.json; lg=$WORK/$id.log
  limit=$(run_limit)
  if [[ -z "$limit" ]]; then
    record "$group" "$corpus" "$file" "$n" libsais "" 1 "$t" "$rep" not-run-budget 0 0 "" ""
    return 1
  fi
  local out=(); [[ -z "$ref" ]] || out=(-o "$ref")
  log "[$id] $corpus: libsais ${t}T rep $rep"
  t0=$(now)
  set +e
  timeout --kill-after=30 "$limit" "$BASELINE" --threads "$t" "${out[@]+"${out[@]}"}" "$file" >"$stats" 2>"$lg"
  rc=$?
  set -e
  t1=$(now)
  status=$(classify "$rc" "$limit")
  if [[ $status != ok ]]; then
    [[ $status == cut-by-budget ]] || FAILS=$((FAILS + 1))
    log "FAIL: libsais ${t}T on $corpus: status $status (rc $rc); log: $lg"
    tail -n 5 "$lg" >&2 || true
  fi
  record "$group" "$corpus" "$file" "$n" libsais "" 1 "$t" "$rep" "$status" "$rc" "$(elapsed "$t0" "$t1")" "$stats" "$lg"
  [[ $status == ok ]]
}

# run_psa GROUP CORPUS FILE N ALGO P THREADS REP REF
# ALGO is dc3 or css, with "+gpu" for psa --gpu (dc3+gpu).
run_psa() {
  local group=$1 corpus=$2 file=$3 n=$4 algo=$5 p=$6 t=$7 rep=$8 ref=$9 id stats lg out t0 t1 rc status need avail limit
  RUN_ID=$((RUN_ID + 1)); id=$(printf '%04d' $RUN_ID)
  stats=$WORK/$id.json; lg=$WORK/$id.log; out=$WORK/$id.sa
  need=$((n * MEM_PER_CHAR)); avail=$(mem_available)
  if [[ $need -gt $avail ]]; then
    log "SKIP: psa $algo p=$p on $corpus: estimated $((need >> 20)) MiB > $((avail >> 20)) MiB available"
    record "$group" "$corpus" "$file" "$n" psa "$algo" "$p" "$t" "$rep" skipped-memory 0 0 "" ""
    return 1
  fi
  limit=$(run_limit)
  if [[ -z "$limit" ]]; then
    record "$group" "$corpus" "$file" "$n" psa "$algo" "$p" "$t" "$rep" not-run-budget 0 0 "" ""
    return 1
  fi
  local extra=(); [[ $CHECK != 1 ]] || extra+=(--check)
  [[ $algo != *+gpu ]] || extra+=(--gpu)
  log "[$id] $corpus: psa $algo p=$p threads=$t rep $rep"
  t0=$(now)
  set +e
  # shellcheck disable=SC2086,SC2046  # bind_args, MPIRUN_ARGS and PSA_ARGS are lists of words
  timeout --kill-after=30 "$limit" mpirun -n "$p" $(bind_args "$p" "$t") $MPIRUN_ARGS \
    "$PSA" --algo "${algo%+gpu}" --threads "$t" --stats "$stats" -o "$out" "${extra[@]+"${extra[@]}"}" $PSA_ARGS \
    "$file" >"$lg" 2>&1
  rc=$?
  set -e
  t1=$(now)
  status=$(classify "$rc" "$limit")
  if [[ $status == ok ]]; then
    if [[ ! -s "$stats" ]]; then status=fail-no-stats
    elif [[ $CMP == 1 && -n "$ref" && $rep -eq 1 ]]; then
      if [[ ! -f "$ref" ]]; then status=fail-no-reference
      elif ! cmp -s "$out" "$ref"; then status=mismatch; fi
    fi
  fi
  rm -f "$out"
  if [[ $status != ok ]]; then
    [[ $status == cut-by-budget ]] || FAILS=$((FAILS + 1))
    log "FAIL: psa $algo p=$p threads=$t on $corpus: status $status (rc $rc); log: $lg"
    tail -n 5 "$lg" >&2 || true
  fi
  record "$group" "$corpus" "$file" "$n" psa "$algo" "$p" "$t" "$rep" "$status" "$rc" "$(elapsed "$t0" "$t1")" "$stats" "$lg"
  [[ $status == ok ]]
}

# bench_corpus GROUP NAME PROCS
bench_corpus() {
  local group=$1 c=$2 procs=$3 file n ref rep t p algo label
  file=$(resolve "$c")
  label=$c
  [[ ! -f "$c" ]] || label=$(basename "${c%.txt}")
  n=$(stat -L -c %s "$file")
  ref=""
  [[ $CMP != 1 ]] || ref=$WORK/ref-$label.sa
  for t in 1 "$CORES"; do
    [[ $t -eq 1 || $CORES -gt 1 ]] || continue
    for rep in $(seq 1 "$REPS"); do
      if [[ $t -eq 1 && $rep -eq 1 && -n "$ref" ]]; then
        run_baseline "$group" "$label" "$file" "$n" "$t" "$rep" "$ref" || break
      else
        run_baseline "$group" "$label" "$file" "$n" "$t" "$rep" || break
      fi
    done
  done
  # Repetitions outermost, so that a run cut short by --budget-s still has every configuration.
  local -A failed=()
  for rep in $(seq 1 "$REPS"); do
    for algo in $ALGOS; do
      for p in $procs; do
        # A failed configuration is recorded once; its remaining repetitions are not run.
        [[ -z "${failed[$algo/$p]:-}" ]] || continue
        t=$((CORES / p)); [[ $t -ge 1 ]] || t=1
        run_psa "$group" "$label" "$file" "$n" "$algo" "$p" "$t" "$rep" "$ref" || failed[$algo/$p]=1
      done
    done
  done
  [[ -z "$ref" ]] || rm -f "$ref"
}

log "results: $RESULTS/$NAME.*; work dir $WORK"
log "psa $PSA; baseline $BASELINE; cores $CORES; procs $PROCS; algos $ALGOS; reps $REPS"
for c in "${CORPORA[@]}"; do
  bench_corpus real "$c" "$PROCS"
done
if [[ "$WORST_MB" -gt 0 ]]; then
  for k in an fib repblock random; do
    bench_corpus worst "$k-${WORST_MB}MB" "$WORST_PROCS"
  done
fi
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
T_END=$(date +%s)

# ---- the report ----------------------------------------------------------------------------------
REPORT_ARGS=(--runs "$RUNS" --out "$RESULTS/$NAME" --commit "$COMMIT$DIRTY" --cores "$CORES"
  --cmdline "$CMDLINE" --load-start "$LOAD_START" --load-end "$LOAD_END"
  --elapsed "$((T_END - T_START))" --mpirun "mpirun -n P --bind-to core [--map-by slot:PE=T for T threads per pe] $MPIRUN_ARGS (bind: $BIND)")
for note in "${NOTES[@]+"${NOTES[@]}"}"; do REPORT_ARGS+=(--note "$note"); done
python3 "$HERE/bench_report.py" "${REPORT_ARGS[@]}" || { log "the report could not be written"; exit 1; }
if [[ -n "$LOGS_TO" ]]; then
  mkdir -p "$LOGS_TO" && cp "$WORK"/*.log "$WORK"/*.json "$LOGS_TO"/ 2>/dev/null || true
fi
log "wrote $RESULTS/$NAME.md, .csv, -runs.jsonl, -phases.svg, -scaling.svg"
if [[ $FAILS -gt 0 ]]; then
  log "$FAILS run(s) FAILED (see the FAIL rows in $RESULTS/$NAME.md; logs in $WORK)"
  exit 1
fi
rm -rf "$WORK"
