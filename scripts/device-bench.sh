#!/usr/bin/env bash
# scripts/device-bench.sh — psa's scaling benchmark on a GPU compute node (16 cores here).
#
# Such a node may have no Rust, no network and no Python packages, so build on a machine that
# has them first:
#
#   scripts/device-pack.sh --clean-build        # -> corpora/device/ (stripped binaries, xz slices)
#
# then copy the repository with corpora/device/ (at most 64 MiB) to the GPU node and run there,
# from its root:
#
#   bash scripts/device-bench.sh                                  # dna-32MB + worst cases
#   bash scripts/device-bench.sh --worst-mb 0 english-32MB
#   (also in the pack: source-32MB django-64MB). One corpus per command keeps each command
#   within about 10 minutes: psa runs 2 algorithms × 5 process counts × 3 repetitions on each.
#
# It unpacks the slices (checking their sha256), generates the worst-case inputs with python3,
# checks that the binaries load and that mpirun works (falling back to settings that work in
# containers), then runs scripts/bench.sh --no-build: libsais with 1 and all (16) threads, psa
# dc3 and css at p = 1 2 4 8 16 with p × threads = cores, medians of 3, byte-for-byte comparison
# with libsais, and the worst cases at p = 16. Results go to the folder named by the environment
# variable OUT (default bench-results/device/): the same .csv/.md/-runs.jsonl/.svg as bench.sh,
# plus logs/ and the environment it found. Stops starting runs after --budget-s seconds (default
# 480), so that a command fits a job's time limit; what was not run is listed in the report.
#
# Options (anything else is passed to scripts/bench.sh, e.g. --reps 5, --algos "dc3 css dc3+gpu"):
#   --pack DIR        what device-pack.sh made [corpora/device]
#   --budget-s S      [480]
#   --worst-mb N      worst-case input size, 0 = none [16]
#   --worst-procs L   [16]
#   CORPUS...         slice names present in the pack [dna-32MB]
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
PACK=$ROOT/corpora/device
BUDGET=480
WORST_MB=16
WORST_PROCS=16
CORPORA=()
PASS=()

die() { echo "device-bench.sh: error: $*" >&2; exit 2; }
log() { echo "device-bench.sh: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --pack) PACK=$2; shift 2 ;;
    --budget-s) BUDGET=$2; shift 2 ;;
    --worst-mb) WORST_MB=$2; shift 2 ;;
    --worst-procs) WORST_PROCS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    --check|--no-cmp) PASS+=("$1"); shift ;;
    --*) PASS+=("$1" "$2"); shift 2 ;;
    *) CORPORA+=("$1"); shift ;;
  esac
done
[[ ${#CORPORA[@]} -gt 0 ]] || CORPORA=(dna-32MB)

RESULTS=${OUT:-$ROOT/bench-results/device}
mkdir -p "$RESULTS"
T0=$(date +%s)
[[ -d "$PACK" ]] || die "no pack at $PACK: run scripts/device-pack.sh on the build machine and copy corpora/device here"
PSA=$PACK/bin/psa
BASELINE=$PACK/bin/sais-baseline
[[ -x "$PSA" && -x "$BASELINE" ]] || die "$PACK/bin lacks psa or sais-baseline"
COMMIT=$(sed -n 's/^commit=//p' "$PACK/BUILD_INFO" 2>/dev/null || echo unknown)
CORES=$(nproc)

# ---- environment ---------------------------------------------------------------------------------
{
  echo "# environment of the device run"
  date -u
  uname -a
  grep PRETTY_NAME /etc/os-release || true
  lscpu || true
  free -g || true
  nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
  mpirun --version 2>&1 | head -n1 || true
  cat "$PACK/BUILD_INFO"
} >"$RESULTS/environment.txt" 2>&1

# The binaries were built on Debian 12. They need libmpi.so.40 (Open MPI 4.x) and libgomp.so.1
# from the host; the pack carries a libgomp for hosts without one.
if ldd "$PSA" "$BASELINE" | grep -q 'libgomp.*not found'; then
  log "the host has no libgomp.so.1: using the packed one"
  export LD_LIBRARY_PATH=$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if ldd "$PSA" "$BASELINE" | grep 'not found'; then
  die "the binaries miss shared libraries on this host (above)"
fi

# ---- corpora -------------------------------------------------------------------------------------
DATA=$ROOT/.bench-tmp/device-corpora
mkdir -p "$DATA"
FILES=()
for c in "${CORPORA[@]}"; do
  if [[ ! -f "$DATA/$c.txt" ]]; then
    [[ -f "$PACK/corpora/$c.txt.xz" ]] || die "corpus $c is not in the pack (have: $(ls "$PACK/corpora" | tr '\n' ' '))"
    if command -v xz >/dev/null; then
      xz -dc "$PACK/corpora/$c.txt.xz" >"$DATA/$c.txt.tmp"
    else
      python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 22)' \
        "$PACK/corpora/$c.txt.xz" "$DATA/$c.txt.tmp"
    fi
    mv "$DATA/$c.txt.tmp" "$DATA/$c.txt"
  fi
  (cd "$DATA" && sha256sum --quiet -c "$PACK/corpora/$c.txt.sha256") || die "sha256 of $c does not match the pack"
  FILES+=("$DATA/$c.txt")
done
if [[ $WORST_MB -gt 0 ]]; then
  # bench.sh finds an-16MB etc. under corpora/ and makes missing ones with corpora.sh (python3 only).
  "$HERE/corpora.sh" --synthetic-mb "$WORST_MB" synthetic >/dev/null
fi
log "corpora ready after $(($(date +%s) - T0)) s"

# ---- MPI preflight -------------------------------------------------------------------------------
# As root, Open MPI needs --allow-run-as-root (bench.sh adds it). In containers its shared-memory
# single-copy mechanism (CMA) is often not permitted; if a 2-process run fails, retry without it.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
head -c 200000 "${FILES[0]}" >"$DATA/preflight.txt"
pre() { timeout 120 mpirun --allow-run-as-root -n 2 --bind-to none "$PSA" --threads 1 -q -o "$DATA/preflight.sa" "$DATA/preflight.txt"; }
if ! pre >"$RESULTS/preflight.log" 2>&1; then
  log "mpirun preflight failed (see preflight.log); retrying with btl self,vader and no single-copy"
  export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_pml=ob1
  pre >>"$RESULTS/preflight.log" 2>&1 || die "psa does not run under mpirun here; see $RESULTS/preflight.log"
  echo "MPI settings: OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_pml=ob1" >>"$RESULTS/environment.txt"
fi
"$BASELINE" "$DATA/preflight.txt" -o "$DATA/preflight.ref" >/dev/null
cmp -s "$DATA/preflight.sa" "$DATA/preflight.ref" || die "psa's preflight SA differs from libsais'"
log "preflight ok"

# ---- the benchmark -------------------------------------------------------------------------------
LEFT=$((BUDGET - ($(date +%s) - T0)))
[[ $LEFT -gt 30 ]] || die "no time left for the benchmark (budget $BUDGET s)"
HOST=$(hostname -s 2>/dev/null || cut -d. -f1 /proc/sys/kernel/hostname)
set +e
BENCH_WORK=$ROOT/.bench-tmp "$HERE/bench.sh" --no-build --psa "$PSA" --baseline "$BASELINE" --commit "$COMMIT" \
  --cores "$CORES" --procs "1 2 4 8 16" --reps 3 --worst-mb "$WORST_MB" --worst-procs "$WORST_PROCS" \
  --budget-s "$LEFT" --results "$RESULTS" --name "$(date +%Y-%m-%d)-$HOST-${COMMIT%%[+ ]*}" \
  --keep-logs "$RESULTS/logs" \
  --note "run by scripts/device-bench.sh on the GPU host; binaries built elsewhere ($(sed -n 's/^built_on=//p' "$PACK/BUILD_INFO"))" \
  "${PASS[@]+"${PASS[@]}"}" "${FILES[@]}"
rc=$?
set -e
log "bench.sh exited $rc; results in $RESULTS"
ls -la "$RESULTS" >&2
exit $rc
