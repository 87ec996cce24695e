#!/usr/bin/env bash
# scripts/device-pack.sh — prepare what scripts/device-bench.sh needs on a GPU compute node
# without Rust or network access; the pack stays within 64 MiB so that it is quick to copy there.
#
#   scripts/device-pack.sh [--clean-build | --no-build] [--features gpu] [--out DIR] [CORPUS...]
#
# Writes DIR (default corpora/device/, git-ignored) with
#   bin/psa, bin/sais-baseline  stripped release binaries (the unstripped ones are ~70 MB together)
#   lib/libgomp.so.1            OpenMP runtime, used there only if the host lacks one
#   corpora/NAME.txt.xz         compressed corpus slices + NAME.txt.sha256 of the uncompressed text
#   BUILD_INFO                  commit, features, build host, date
# and fails if the whole is over 64 MiB. CORPUS: slices as scripts/corpora.sh names them
# [default: dna-32MB english-32MB source-32MB django-64MB]. The synthetic worst cases are not packed:
# device-bench.sh generates them there with python3.
#
# Build: default `cargo build --release` of the working tree; --clean-build builds the committed
# HEAD (git archive) with its own target dir in .bench-tmp/ (what the results should name);
# --no-build takes target/release/psa and target/release/examples/sais-baseline as they are.
# --features gpu builds psa with the GPU backend (cudarc loads CUDA at run time, so the binary also
# runs without a GPU).
#
# Then copy the repository with DIR to the GPU node and run `bash scripts/device-bench.sh` there.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
OUTDIR=$ROOT/corpora/device
MODE=build
FEATURES=""
CORPORA=()
LIMIT=$((64 * 1024 * 1024))

die() { echo "device-pack.sh: error: $*" >&2; exit 1; }
log() { echo "device-pack.sh: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --clean-build) MODE=clean; shift ;;
    --no-build) MODE=none; shift ;;
    --features) FEATURES=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option '$1'" ;;
    *) CORPORA+=("$1"); shift ;;
  esac
done
[[ ${#CORPORA[@]} -gt 0 ]] || CORPORA=(dna-32MB english-32MB source-32MB django-64MB)

feat=(); [[ -z "$FEATURES" ]] || feat=(--features "$FEATURES")
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
case $MODE in
  clean)
    SRC=$ROOT/.bench-tmp/build-src
    rm -rf "$SRC" && mkdir -p "$SRC"
    git -C "$ROOT" archive HEAD | tar -x -C "$SRC"
    (cd "$SRC" && cargo build --release --target-dir "$ROOT/.bench-tmp/build-target" "${feat[@]+"${feat[@]}"}" \
      --bin psa --example sais-baseline) || die "cargo build of HEAD failed"
    BIN=$ROOT/.bench-tmp/build-target/release ;;
  build)
    (cd "$ROOT" && cargo build --release "${feat[@]+"${feat[@]}"}" --bin psa --example sais-baseline) || die "cargo build failed"
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
    [[ -z "$(git -C "$ROOT" status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ]] || COMMIT="$COMMIT+dirty" ;;
  none)
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
    COMMIT="$COMMIT (prebuilt target/release binaries, not rebuilt)" ;;
esac
BASELINE=$BIN/examples/sais-baseline
[[ -x $BIN/psa && -x $BASELINE ]] || die "no binaries in $BIN (psa, examples/sais-baseline)"

# Only a pack of this script's own (its BUILD_INFO) is replaced; any other folder must be empty.
if [[ -e "$OUTDIR" && ! -f "$OUTDIR/BUILD_INFO" && -n "$(ls -A "$OUTDIR" 2>/dev/null)" ]]; then
  die "--out $OUTDIR exists and is not a pack of this script's (no BUILD_INFO): choose an empty or new folder"
fi
[[ ! -e "$OUTDIR/BUILD_INFO" ]] || rm -rf "$OUTDIR/bin" "$OUTDIR/lib" "$OUTDIR/corpora" "$OUTDIR/BUILD_INFO"
mkdir -p "$OUTDIR/bin" "$OUTDIR/lib" "$OUTDIR/corpora"
strip -o "$OUTDIR/bin/psa" "$BIN/psa"
strip -o "$OUTDIR/bin/sais-baseline" "$BASELINE"
gomp=$(ldd "$BASELINE" | awk '/libgomp/ {print $3}')
[[ -z "$gomp" ]] || cp -L "$gomp" "$OUTDIR/lib/"
{
  echo "commit=$COMMIT"
  echo "features=${FEATURES:-none}"
  echo "built_on=$(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"), $(rustc --version 2>/dev/null || echo rustc ?))"
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "mpi_built_against=$(mpirun --version 2>/dev/null | head -n1)"
} >"$OUTDIR/BUILD_INFO"

for c in "${CORPORA[@]}"; do
  [[ "$c" =~ ^(dna|english|protein|source|django)-([0-9]+)MB$ ]] || die "'$c' is not a corpus slice name (like dna-32MB)"
  name=${BASH_REMATCH[1]} mb=${BASH_REMATCH[2]}
  f=$ROOT/corpora/$c.txt
  if [[ ! -f $f.xz || ! -f $f.sha256 || $f.xz -ot $f ]]; then
    "$HERE/corpora.sh" --prefix-mb "$mb" --compress xz "$name" || die "cannot make $c"
  fi
  cp "$f.xz" "$f.sha256" "$OUTDIR/corpora/"
done

total=$(du -sb "$OUTDIR" | cut -f1)
packed=("$OUTDIR"/corpora/*.xz)
log "packed ${#packed[@]} corpora and the binaries of $COMMIT into $OUTDIR: $((total / 1024 / 1024)) MiB"
du -ab "$OUTDIR" | sort -n | awk '{printf "  %8.1f MiB  %s\n", $1 / 1048576, $2}' | tail -n 12 >&2
[[ $total -le $LIMIT ]] || die "$OUTDIR is $total bytes, over the 64 MiB budget of a pack: pack fewer or smaller slices"
